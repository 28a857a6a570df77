"""The weighted consistent-hash ring: deterministic, weighted, minimal disruption."""

from __future__ import annotations

from collections import Counter

import pytest

from sluiceway.routing.ring import HashRing

NODES = [("http://a:1", 1), ("http://b:1", 1), ("http://c:1", 1)]
KEYS = [hash((i, "k")) & (2**64 - 1) for i in range(20_000)]


def test_ranked_lists_every_node_once() -> None:
    ring = HashRing(NODES, 50)
    for key in KEYS[:500]:
        ranked = ring.ranked(key)
        assert sorted(ranked) == [0, 1, 2]


def test_same_config_same_ranking_in_two_rings() -> None:
    a, b = HashRing(NODES, 100), HashRing(list(NODES), 100)
    assert all(a.ranked(k) == b.ranked(k) for k in KEYS[:2000])


def test_weights_shape_the_share_of_keys() -> None:
    ring = HashRing([("x", 1), ("y", 3)], 160)
    share = Counter(ring.ranked(k)[0] for k in KEYS)
    assert 0.15 < share[0] / len(KEYS) < 0.35
    assert 0.65 < share[1] / len(KEYS) < 0.85


def test_removing_a_node_moves_only_its_keys() -> None:
    before = HashRing(NODES, 160)
    after = HashRing(NODES[:2], 160)
    for k in KEYS[:3000]:
        first = before.ranked(k)[0]
        if first != 2:
            assert after.ranked(k)[0] == first
        else:
            # its keys go to the node that was next in the ranked list
            assert after.ranked(k)[0] == before.ranked(k)[1]


def test_adding_a_node_moves_about_its_share() -> None:
    before = HashRing(NODES, 160)
    after = HashRing([*NODES, ("http://d:1", 1)], 160)
    moved = sum(before.ranked(k)[0] != after.ranked(k)[0] for k in KEYS)
    assert 0.15 < moved / len(KEYS) < 0.35


def test_empty_ring_and_bad_nodes() -> None:
    assert HashRing([], 10).ranked(5) == ()
    with pytest.raises(ValueError):
        HashRing([("a", 0)], 10)
    with pytest.raises(ValueError):
        HashRing([("a", 1), ("a", 2)], 10)


def test_key_beyond_last_point_wraps() -> None:
    ring = HashRing(NODES, 10)
    assert ring.ranked(2**64 - 1) == ring.ranked(0)
