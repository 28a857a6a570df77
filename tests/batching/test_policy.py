from sluiceway.batching.policy import BatchLimits, Cut, Wait, decide, select

LIMITS = BatchLimits(max_batch_size=4, max_batch_tokens=100, max_wait_s=0.002)


def test_nothing_waiting_waits_for_an_arrival() -> None:
    assert decide([], [], 0.0, LIMITS, engine_idle=True, incoming=0) == Wait(None)


def test_idle_engine_and_nothing_incoming_cuts_at_once() -> None:
    assert decide([5], [0.0], 0.0, LIMITS, engine_idle=True, incoming=0) == Cut([0])


def test_idle_engine_holds_the_window_open_while_inputs_are_on_their_way() -> None:
    d = decide([5], [0.0], 0.0005, LIMITS, engine_idle=True, incoming=3)
    assert isinstance(d, Wait)
    assert d.seconds is not None and abs(d.seconds - 0.0015) < 1e-9


def test_window_expiry_cuts_even_with_more_incoming() -> None:
    assert decide([5, 6], [0.0, 0.001], 0.002, LIMITS, engine_idle=True, incoming=3) == Cut([0, 1])


def test_busy_engine_keeps_collecting_until_a_full_batch() -> None:
    assert decide([5, 6], [0.0, 0.0], 9.0, LIMITS, engine_idle=False, incoming=0) == Wait(None)
    d = decide([5, 6, 7, 8, 9], [0, 1, 2, 3, 4], 9.0, LIMITS, engine_idle=False, incoming=0)
    assert isinstance(d, Cut) and len(d.indices) == 4


def test_full_by_tokens_cuts_while_busy() -> None:
    d = decide([60, 60], [0.0, 1.0], 1.0, LIMITS, engine_idle=False, incoming=0)
    assert d == Cut([0])  # 60 x 2 > 100: the oldest goes alone


def test_selection_always_contains_the_oldest_and_groups_similar_lengths() -> None:
    lengths = [10, 50, 11, 12, 49, 13]
    arrived = [5.0, 0.0, 1.0, 2.0, 3.0, 4.0]  # index 1 (length 50) is oldest
    chosen = select(lengths, arrived, BatchLimits(4, 1000, 0.0))
    assert 1 in chosen
    assert 4 in chosen  # 49 is the closest length to 50
    assert len(chosen) == 4


def test_selection_respects_token_budget_priced_as_longest_times_count() -> None:
    lengths = [30, 31, 32, 33, 34]
    chosen = select(lengths, [0, 1, 2, 3, 4], BatchLimits(8, 100, 0.0))
    assert 0 in chosen
    assert max(lengths[i] for i in chosen) * len(chosen) <= 100


def test_selection_prefers_shorter_side_when_longer_does_not_fit() -> None:
    lengths = [10, 20, 90]
    arrived = [2.0, 0.0, 1.0]  # anchor is the 20
    chosen = select(lengths, arrived, BatchLimits(8, 60, 0.0))
    assert sorted(chosen) == [0, 1]


def test_oversized_single_input_is_still_cut_alone() -> None:
    assert select([500], [0.0], BatchLimits(8, 100, 0.0)) == [0]


def test_padding_waste_cap_splits_very_different_lengths() -> None:
    lengths = [10, 11, 12, 100, 105, 110]
    limits = BatchLimits(8, 10_000, 0.0, max_padding_waste=0.3)
    first = select(lengths, [0, 1, 2, 3, 4, 5], limits)
    assert sorted(first) == [0, 1, 2]
    rest = select([100, 105, 110], [3, 4, 5], limits)
    assert sorted(rest) == [0, 1, 2]
    # Without the cap everything pads together.
    assert len(select(lengths, [0, 1, 2, 3, 4, 5], BatchLimits(8, 10_000, 0.0))) == 6
