"""The encoder engine seam. Implementations: OnnxEncoder, ``sluiceway.testing.FakeEncoder``."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

Int64Array = npt.NDArray[np.int64]
Float32Array = npt.NDArray[np.float32]


class EncoderEngine(Protocol):
    """Runs a padded batch and returns one pooled (not normalised) vector per row.

    Called only from the model's dedicated engine thread, never from the event loop. The input
    arrays are views into reused buffers: an engine must not keep references to them.
    """

    @property
    def dims(self) -> int: ...

    def run(self, input_ids: Int64Array, attention_mask: Int64Array) -> Float32Array: ...
