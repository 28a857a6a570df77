"""Which slot serves a prompt: pure bookkeeping of what each slot's KV cache holds.

A new request goes to the free slot whose cached tokens share the longest prefix with its
prompt (that prefix is not decoded again), provided the prefix is worth it (``min_reuse``
tokens or more: decode is compute-bound, so joining a busier lane costs more than recomputing
a short prefix); otherwise to the least busy lane (lanes decode in parallel), then to the
longest short prefix, then to the least recently used slot, whose cache is the least likely
to be asked for again. At least the last
prompt token is always decoded, because its logits are needed to sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Grant:
    """Serve the prompt on ``slot``, keeping its first ``reuse`` cached tokens."""

    slot: int
    reuse: int


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class SlotTable:
    """Free/busy state, cached tokens and last use of every slot. Sync; used on the loop."""

    __slots__ = (
        "_busy", "_cached", "_lanes", "_last_used", "_min_reuse", "_tick", "reused_tokens",
    )  # fmt: skip

    def __init__(self, slots: int, lanes: int = 1, min_reuse: int = 32) -> None:
        #: Slot ``s`` belongs to lane ``s % lanes``.
        self._lanes = lanes
        self._min_reuse = min_reuse
        self._busy = [False] * slots
        self._cached: list[tuple[int, ...]] = [()] * slots
        self._last_used = [0] * slots
        self._tick = 0
        self.reused_tokens = 0

    def acquire(self, prompt: Sequence[int]) -> Grant | None:
        """The best free slot for ``prompt`` (now busy), or None if every slot is busy."""
        best: Grant | None = None
        best_key: tuple[int, int, int, int] | None = None
        limit = max(len(prompt) - 1, 0)
        load = [0] * self._lanes
        for slot, busy in enumerate(self._busy):
            load[slot % self._lanes] += busy
        for slot, busy in enumerate(self._busy):
            if busy:
                continue
            shared = min(common_prefix(self._cached[slot], prompt), limit)
            worth = shared if shared >= self._min_reuse else 0
            key = (worth, -load[slot % self._lanes], shared, -self._last_used[slot])
            if best_key is None or key > best_key:
                best, best_key = Grant(slot, shared), key
        if best is not None:
            self._busy[best.slot] = True
            self._tick += 1
            self._last_used[best.slot] = self._tick
            self.reused_tokens += best.reuse
        return best

    def release(self, slot: int, cached: Sequence[int]) -> None:
        """The job on ``slot`` ended; its KV cache now holds ``cached``."""
        self._busy[slot] = False
        self._cached[slot] = tuple(cached)

    @property
    def busy(self) -> int:
        return sum(self._busy)

    @property
    def free(self) -> int:
        return len(self._busy) - self.busy

    def cached(self, slot: int) -> tuple[int, ...]:
        return self._cached[slot]

    def statistics(self) -> dict[str, int]:
        return {
            "slots": len(self._busy),
            "busy": self.busy,
            "cached_tokens": sum(len(c) for c in self._cached),
            "reused_tokens": self.reused_tokens,
        }

    def __repr__(self) -> str:
        return f"SlotTable(busy={self.busy}/{len(self._busy)})"
