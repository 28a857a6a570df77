"""Reused, preallocated padded input buffers (no per-batch tensor allocation)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sluiceway.engines.protocol import Int64Array


class PaddedBuffers:
    """Flat int64 arrays sized for the largest batch; each batch uses a contiguous prefix.

    ``fill`` returns ``[b, s]`` C-contiguous views over the first ``b * s`` elements, so
    ONNX Runtime reads them without a copy. Only the engine thread uses one instance.
    """

    def __init__(self, max_batch_size: int, max_length: int) -> None:
        size = max_batch_size * max_length
        self._ids = np.zeros(size, dtype=np.int64)
        self._mask = np.zeros(size, dtype=np.int64)

    def fill(self, rows: Sequence[Int64Array]) -> tuple[Int64Array, Int64Array]:
        b = len(rows)
        s = max(len(r) for r in rows)
        ids = self._ids[: b * s].reshape(b, s)
        mask = self._mask[: b * s].reshape(b, s)
        ids.fill(0)
        mask.fill(0)
        for i, row in enumerate(rows):
            n = len(row)
            ids[i, :n] = row
            mask[i, :n] = 1
        return ids, mask
