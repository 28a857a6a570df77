"""An ONNX Runtime encoder: BERT-style inputs in, pooled vectors out."""

from __future__ import annotations

import os
from typing import Literal

# ONNX Runtime 1.32 sends telemetry on Linux unless this is set before it loads.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

import numpy as np
import onnxruntime as ort

from sluiceway.engines.pooling import pool
from sluiceway.engines.protocol import Float32Array, Int64Array


class OnnxEncoder:
    """One ONNX Runtime session per model per process, shared by every request.

    Accepts graphs with ``input_ids`` + ``attention_mask`` (+ optional ``token_type_ids``) and
    either token states ``[b, s, d]`` (pooled here) or an already pooled ``[b, d]`` output.
    """

    def __init__(
        self,
        path: str,
        *,
        pooling: Literal["mean", "cls"],
        intra_op_threads: int = 0,
        output: str | None = None,
        allow_spinning: bool = False,
        memory_arena: bool = False,
    ) -> None:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = intra_op_threads  # 0: ONNX Runtime's one per core
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # Batches come in many shapes; an arena (and per-shape memory patterns) keeps the peak of
        # every shape ever seen. Without them memory goes back after a burst.
        options.enable_cpu_mem_arena = memory_arena
        options.enable_mem_pattern = memory_arena
        options.add_session_config_entry(
            "session.intra_op.allow_spinning", "1" if allow_spinning else "0"
        )
        self._session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        names = {i.name for i in self._session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - names
        if missing:
            raise ValueError(f"{path}: the graph lacks inputs {sorted(missing)}")
        self._token_types = "token_type_ids" in names
        chosen = self._choose_output(output)
        self._output = chosen.name
        self._pooled_output = len(chosen.shape) == 2
        dims = chosen.shape[-1]
        self._pooling = pooling
        self._path = path
        self._zero_buffer = np.zeros(0, dtype=np.int64)
        self._dims = dims if isinstance(dims, int) else self._probe_dims()

    def _zeros(self, shape: tuple[int, ...]) -> Int64Array:
        """A reused all-zero ``token_type_ids`` of ``shape`` (grown, never shrunk)."""
        size = int(np.prod(shape))
        if self._zero_buffer.size < size:
            self._zero_buffer = np.zeros(max(size, 2 * self._zero_buffer.size), dtype=np.int64)
        return self._zero_buffer[:size].reshape(shape)

    def _choose_output(self, name: str | None) -> ort.NodeArg:
        """The named output; else the first float token-state output ``[b, s, d]``; else the
        first float ``[b, d]`` output (already pooled)."""
        outputs = self._session.get_outputs()
        if name is not None:
            for o in outputs:
                if o.name == name:
                    return o
            raise ValueError(f"the graph has no output {name!r}: {[o.name for o in outputs]}")
        floats = [o for o in outputs if o.type == "tensor(float)"]
        for rank in (3, 2):
            for o in floats:
                if len(o.shape) == rank:
                    return o
        raise ValueError(f"no float output of rank 2 or 3 among {[o.name for o in outputs]}")

    def _probe_dims(self) -> int:
        ids = np.array([[101, 102]], dtype=np.int64)
        return int(self.run(ids, np.ones_like(ids)).shape[1])

    @property
    def dims(self) -> int:
        return self._dims

    def run(self, input_ids: Int64Array, attention_mask: Int64Array) -> Float32Array:
        feed = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self._token_types:
            feed["token_type_ids"] = self._zeros(input_ids.shape)
        (out,) = self._session.run([self._output], feed)
        out = np.asarray(out, dtype=np.float32)
        if self._pooled_output:
            return out
        return pool(out, attention_mask, self._pooling)

    def __repr__(self) -> str:
        return f"OnnxEncoder({self._path!r}, dims={self._dims}, pooling={self._pooling!r})"
