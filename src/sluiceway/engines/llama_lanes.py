"""Several decode lanes behind one ``Decoder``: one context and one thread per lane.

On a CPU a small model's decode is compute-bound: a batch of n sequences costs about n single
steps, so one context cannot use more cores than its ``n_threads``, and llama.cpp's threads
spin at every barrier, which collapses when they share cores with anything else. Lanes give
each core its own single-threaded context instead: slot ``s`` lives in lane ``s % lanes``,
each lane batches its own slots, and concurrent requests on different lanes run in parallel.
All lanes read the same memory-mapped weights.
"""

from __future__ import annotations

from collections.abc import Sequence

from sluiceway.engines.llama_job import DecodeJob, Decoder


class DecoderLanes:
    """Implements ``Decoder`` over lane decoders; lane ``i`` of ``k`` serves slots ``s`` with
    ``s % k == i`` (as its sequence ``s // k``)."""

    def __init__(self, lanes: Sequence[Decoder]) -> None:
        if not lanes:
            raise ValueError("at least one lane")
        self._lanes = list(lanes)
        self._per_lane = lanes[0].slots

    @property
    def slots(self) -> int:
        return self._per_lane * len(self._lanes)

    @property
    def lanes(self) -> int:
        return len(self._lanes)

    @property
    def n_ctx(self) -> int:
        return min(lane.n_ctx for lane in self._lanes)

    def lane_of(self, slot: int) -> int:
        return slot % len(self._lanes)

    def start(self) -> None:
        for lane in self._lanes:
            lane.start()

    def submit(self, job: DecodeJob) -> None:
        self._lanes[job.slot % len(self._lanes)].submit(job)

    def wake(self) -> None:
        for lane in self._lanes:
            lane.wake()

    def close(self) -> None:
        for lane in self._lanes:
            lane.close()

    def statistics(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for lane in self._lanes:
            for key, value in lane.statistics().items():
                total[key] = total.get(key, 0) + value
        total["lanes"] = len(self._lanes)
        return total

    def __repr__(self) -> str:
        return f"DecoderLanes({self._lanes!r})"
