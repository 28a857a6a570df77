"""SlotTable: longest cached prefix first, else least recently used; always decode one token."""

from __future__ import annotations

from sluiceway.engines.llama_slots import Grant, SlotTable, common_prefix


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix([1, 2], [1, 2, 3]) == 2


def test_empty_table_hands_out_least_recently_used_slots() -> None:
    t = SlotTable(2)
    assert t.acquire([1, 2]) == Grant(0, 0)
    assert t.acquire([3, 4]) == Grant(1, 0)
    assert t.acquire([5]) is None
    assert t.busy == 2


def test_longest_shared_prefix_wins_over_recency() -> None:
    t = SlotTable(3)
    for slot, cached in enumerate([(9, 9), (1, 2, 3, 4), (1, 2)]):
        g = t.acquire([100 + slot])
        assert g is not None
        t.release(g.slot, cached)
    assert t.acquire([1, 2, 3, 4, 5, 6]) == Grant(1, 4)


def test_no_shared_prefix_takes_the_least_recently_used() -> None:
    t = SlotTable(2)
    a, b = t.acquire([1]), t.acquire([2])
    assert a is not None and b is not None
    t.release(b.slot, (2,))
    t.release(a.slot, (1,))
    # slot 0 was acquired first, so it is the least recently used.
    assert t.acquire([7, 7]) == Grant(0, 0)


def test_a_fully_cached_prompt_still_decodes_its_last_token() -> None:
    t = SlotTable(1)
    g = t.acquire([1, 2, 3])
    assert g is not None
    t.release(g.slot, (1, 2, 3, 4))
    assert t.acquire([1, 2, 3]) == Grant(0, 2)
    assert t.statistics()["reused_tokens"] == 2


def test_busy_slots_are_never_granted() -> None:
    t = SlotTable(2)
    g = t.acquire([1, 2, 3])
    assert g == Grant(0, 0)
    t.release(0, (1, 2, 3))
    assert t.acquire([5]) == Grant(1, 0)  # nothing shared: the least recently used slot
    assert t.acquire([1, 2, 3]) == Grant(0, 2)
    assert t.acquire([1, 2, 3]) is None
    assert t.busy == 2


def test_equal_prefixes_go_to_the_least_busy_lane() -> None:
    t = SlotTable(4, lanes=2)  # lane 0: slots 0 and 2; lane 1: slots 1 and 3
    assert t.acquire([1]) == Grant(0, 0)
    assert t.acquire([2]) == Grant(1, 0)  # lane 1 is idle, lane 0 is not
    t.release(1, (2,))
    g = t.acquire([3])
    assert g is not None and g.slot % 2 == 1  # lane 1 again: lane 0 is still busy
    t.release(g.slot, (3,))
    t.release(0, (7,) * 40)
    assert t.acquire([9, 9]) is not None  # LRU: slot 2 (lane 0)
    # A long shared prefix beats lane load; a short one does not.
    assert t.acquire([7] * 41) == Grant(0, 40)


def test_a_short_prefix_does_not_pull_a_request_onto_a_busy_lane() -> None:
    t = SlotTable(4, lanes=2)
    for slot in range(4):
        assert t.acquire([slot + 10]) == Grant(slot, 0)
    for slot in range(4):
        t.release(slot, (5, 6))
    assert t.acquire([5, 6, 1]) is not None  # slot 0, lane 0, reuses 2 (all lanes idle)
    g = t.acquire([5, 6, 2])
    assert g is not None and g.slot % 2 == 1  # the idle lane, despite an equal prefix on lane 0
