"""Which routing keys are hot: each key's share of recent requests, exponentially decayed.

Pure and synchronous (time is passed in). Used only to choose how strictly the load bound
applies to a key (see ``routing.selector``): never to rank backends, so two routers still send
the same request to the same backend whenever no backend is over its bound.

Decay without touching every entry: each hit adds ``exp((now - origin) / tau)`` instead of 1,
so all counts share one scale and a key's share is its count over the total; the scale is
reset (every count divided) when it grows large. Memory is bounded: when the table is full,
the smallest half of the counts is dropped.
"""

from __future__ import annotations

import math


class KeyRates:
    """Decayed request counts per key; :meth:`hit` returns the key's share of recent traffic."""

    __slots__ = ("_counts", "_origin", "_total", "capacity", "tau")

    def __init__(self, half_life_s: float = 10.0, capacity: int = 4096) -> None:
        self.tau = half_life_s / math.log(2)
        self.capacity = capacity
        self._counts: dict[int, float] = {}
        self._origin: float | None = None
        self._total = 0.0

    def hit(self, key: int, now: float) -> float:
        """Count one request for ``key`` at ``now``; returns the key's share in [0, 1]."""
        if self._origin is None:
            self._origin = now
        exponent = (now - self._origin) / self.tau
        if exponent > 30.0:  # rescale before the weights overflow
            self._rescale(now)
            exponent = 0.0
        weight = math.exp(exponent)
        count = self._counts.get(key, 0.0) + weight
        self._counts[key] = count
        self._total += weight
        if len(self._counts) > self.capacity:
            self._shrink()
        return count / self._total

    def _rescale(self, now: float) -> None:
        assert self._origin is not None
        factor = math.exp(-(now - self._origin) / self.tau)
        self._counts = {k: c * factor for k, c in self._counts.items() if c * factor > 1e-9}
        self._total *= factor
        self._origin = now

    def _shrink(self) -> None:
        ranked = sorted(self._counts.items(), key=lambda kv: kv[1], reverse=True)
        self._counts = dict(ranked[: self.capacity // 2])

    def __len__(self) -> int:
        return len(self._counts)

    def __repr__(self) -> str:
        return f"KeyRates({len(self._counts)} keys, half_life={self.tau * math.log(2):.1f}s)"
