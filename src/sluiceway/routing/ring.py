"""A weighted consistent-hash ring with virtual nodes and a ranked walk.

Each node gets ``virtual_nodes x weight`` points at ``xxh3(f"{node}#{i}")``. A key lands on the
first point at or after its hash; walking on clockwise gives every node once, in order: the
ranked list of backends for that key. The ring depends only on the node names and weights, so
two routers with the same config rank every key identically (no shared state), and adding or
removing a node moves only the keys that node owned.

The ranked list of every point is computed once when the ring is built (O(points x nodes)),
so a lookup is one bisect and a tuple read.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

import xxhash

_hash = xxhash.xxh3_64_intdigest


class HashRing:
    """Immutable. ``nodes`` are ``(name, weight)``; :meth:`ranked` returns node indices."""

    __slots__ = ("_hashes", "_ranked", "names", "weights")

    def __init__(self, nodes: Sequence[tuple[str, int]], virtual_nodes: int = 160) -> None:
        self.names = tuple(name for name, _ in nodes)
        self.weights = tuple(weight for _, weight in nodes)
        if len(set(self.names)) != len(self.names):
            raise ValueError("ring node names must be unique")
        points: list[tuple[int, int]] = []
        for index, (name, weight) in enumerate(nodes):
            if weight < 1:
                raise ValueError(f"ring node {name!r}: weight must be >= 1")
            for i in range(virtual_nodes * weight):
                points.append((_hash(f"{name}#{i}".encode()), index))
        points.sort()
        self._hashes = [h for h, _ in points]
        self._ranked = self._rank_all([i for _, i in points], len(nodes))

    @staticmethod
    def _rank_all(owners: list[int], n: int) -> list[tuple[int, ...]]:
        """For each point, the nodes in clockwise order of first appearance."""
        if not owners:
            return []
        # Going backwards, ranked(p) = owner(p) + ranked(p+1) minus owner(p); the ring wraps,
        # so seed the walk with one full pass first.
        ranked: list[tuple[int, ...]] = [()] * len(owners)
        nxt: tuple[int, ...] = ()
        for _ in range(2):
            for p in range(len(owners) - 1, -1, -1):
                o = owners[p]
                nxt = (o, *(x for x in nxt if x != o))
                ranked[p] = nxt
        assert all(len(r) == n for r in ranked)
        return ranked

    def ranked(self, key: int) -> tuple[int, ...]:
        """Every node index, ordered by preference for ``key``."""
        if not self._hashes:
            return ()
        p = bisect_left(self._hashes, key)
        return self._ranked[p if p < len(self._hashes) else 0]

    def __len__(self) -> int:
        return len(self._hashes)

    def __repr__(self) -> str:
        return f"HashRing({len(self.names)} nodes, {len(self._hashes)} points)"
