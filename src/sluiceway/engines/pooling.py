"""Pooling token states into one vector per input, and L2 normalisation."""

from __future__ import annotations

from typing import Literal

import numpy as np

from sluiceway.engines.protocol import Float32Array, Int64Array


def pool(hidden: Float32Array, mask: Int64Array, method: Literal["mean", "cls"]) -> Float32Array:
    """[b, s, d] token states → [b, d]. Mean pooling ignores padding through the mask."""
    if method == "cls":
        out: Float32Array = np.ascontiguousarray(hidden[:, 0, :], dtype=np.float32)
        return out
    weights = mask.astype(np.float32)
    # [b, 1, s] @ [b, s, d] → [b, 1, d]: a batched matmul, no [b, s, d] temporary.
    summed = np.matmul(weights[:, None, :], hidden)[:, 0, :]
    counts = np.maximum(weights.sum(axis=1, keepdims=True), 1e-9)
    pooled: Float32Array = (summed / counts).astype(np.float32, copy=False)
    return pooled


def l2_normalize(vectors: Float32Array) -> Float32Array:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    out: Float32Array = (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return out
