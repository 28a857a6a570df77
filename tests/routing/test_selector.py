"""Selection: eligibility, affinity with bounded load, weighted least-connections, others."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from sluiceway.routing.selector import Selector


@dataclass
class T:
    weight: int = 1
    in_flight: int = 0
    up: bool = True

    def available(self, now: float) -> bool:
        return self.up


def sel(policy: str = "prefix_affinity", c: float = 1.25) -> Selector:
    return Selector(policy, c, random.Random(7))  # type: ignore[arg-type]


def test_affinity_takes_the_first_ranked_backend() -> None:
    ts = [T(), T(), T()]
    choice = sel().select(ts, (2, 0, 1), 0.0)
    assert choice is not None and (choice.index, choice.outcome) == (2, "affinity")


def test_ineligible_first_choice_walks_the_ranked_list() -> None:
    ts = [T(), T(), T(up=False)]
    choice = sel().select(ts, (2, 0, 1), 0.0)
    assert choice is not None and (choice.index, choice.outcome) == (0, "affinity_next")
    choice = sel().select([T(), T(), T()], (2, 0, 1), 0.0, exclude={2})
    assert choice is not None and choice.index == 0


def test_bounded_load_spills_a_hot_key_down_the_ring() -> None:
    ts = [T(in_flight=0), T(in_flight=0), T(in_flight=6)]
    # total 6 → bound 1.25 x 7 / 3 = 2.9 (+1 slack for a cold key); backend 2 would be at 7
    choice = sel().select(ts, (2, 0, 1), 0.0)
    assert choice is not None and (choice.index, choice.outcome) == (0, "bounded")


def test_hot_key_never_exceeds_the_bound() -> None:
    """Only one key, requests never finish: loads stay within c x mean (+1 for rounding)."""
    for hot, slack in ((True, 1), (False, 2)):
        ts = [T(), T(), T(), T()]
        s = sel(c=1.25)
        for _ in range(400):
            choice = s.select(ts, (1, 3, 0, 2), 0.0, hot=hot)
            assert choice is not None
            ts[choice.index].in_flight += 1
        mean = sum(t.in_flight for t in ts) / len(ts)
        assert max(t.in_flight for t in ts) <= 1.25 * mean + slack


def test_a_hot_key_gets_the_exact_bound_on_average() -> None:
    # 3 targets, 8 in flight elsewhere: bound 1.25 x 9 / 3 = 3.75 → 3 always, a 4th 75% of the time
    accepted = 0
    s = sel()
    for _ in range(2000):
        ts = [T(in_flight=3), T(in_flight=3), T(in_flight=2)]
        choice = s.select(ts, (0, 1, 2), 0.0, hot=True)
        assert choice is not None
        accepted += choice.index == 0
    assert 0.6 < accepted / 2000 < 0.9
    cold = s.select([T(in_flight=3), T(in_flight=3), T(in_flight=2)], (0, 1, 2), 0.0)
    assert cold is not None and cold.index == 0  # cold keys: ceil(3.75) + 1 slack


def test_no_key_is_weighted_least_connections() -> None:
    ts = [T(in_flight=3), T(in_flight=1), T(weight=4, in_flight=4)]
    choice = sel().select(ts, None, 0.0)
    # scores: 4/1, 2/1, 5/4 → index 2
    assert choice is not None and (choice.index, choice.outcome) == (2, "least_connections")


def test_least_connections_breaks_ties_at_random() -> None:
    ts = [T(), T(), T()]
    s = sel("least_connections")
    picks = Counter(c.index for c in (s.select(ts, (0, 1, 2), 0.0) for _ in range(300)) if c)
    assert set(picks) == {0, 1, 2}


def test_round_robin_and_random() -> None:
    ts = [T(), T(up=False), T()]
    rr = sel("round_robin")
    seq = [c.index for c in (rr.select(ts, None, 0.0) for _ in range(4)) if c]
    assert sorted(set(seq)) == [0, 2] and seq[0] != seq[1]
    rnd = sel("random")
    weighted = [T(weight=1), T(weight=9)]
    picks = Counter(c.index for c in (rnd.select(weighted, None, 0.0) for _ in range(1000)) if c)
    assert picks[1] > picks[0] * 4


def test_nothing_eligible_is_none() -> None:
    assert sel().select([T(up=False)], (0,), 0.0) is None
    assert sel().select([T()], (0,), 0.0, exclude={0}) is None
