"""Backend selection: a pipeline of plain filters over the pool's targets, pure and sync.

    eligible (healthy, breaker admits, not draining, not tried yet)
      → affinity: walk the key's ranked list, take the first eligible target under the load
        bound ``load_factor x (total in-flight + 1) x weight / total weight`` (consistent
        hashing with bounded loads: a hot key spills over to its next ranked backends,
        consistently, instead of herding everything onto one; see ``select`` for how hot
        and cold keys round the bound)
      → otherwise weighted least-connections, ties broken at random

``round_robin`` and ``random`` exist for comparison. Nothing here does I/O or reads a clock:
callers pass ``now`` and a ``random.Random``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

Policy = Literal["prefix_affinity", "least_connections", "round_robin", "random"]

#: Outcome labels of the ``routing_decisions`` metric (a bounded set).
Outcome = Literal[
    "affinity",  # the key's first-ranked backend
    "affinity_next",  # first-ranked ineligible (down, draining, tried): the next ranked one
    "bounded",  # first eligible ranked backend over the load bound: spilled down the ring
    "least_connections",  # no key, or policy least_connections
    "round_robin",
    "random",
]


class Target(Protocol):
    """What selection reads from a backend."""

    @property
    def weight(self) -> int: ...

    @property
    def in_flight(self) -> int: ...

    def available(self, now: float) -> bool: ...


@dataclass(frozen=True, slots=True)
class Choice:
    index: int
    outcome: Outcome


class Selector:
    """Chooses a target index for a request. Holds only the round-robin cursor."""

    __slots__ = ("_cursor", "load_factor", "policy", "rng")

    def __init__(
        self, policy: Policy, load_factor: float = 1.25, rng: random.Random | None = None
    ) -> None:
        self.policy = policy
        self.load_factor = load_factor
        self.rng = rng or random.Random()
        self._cursor = 0

    def select(
        self,
        targets: Sequence[Target],
        ranked: Sequence[int] | None,
        now: float,
        exclude: Collection[int] = (),
        hot: bool = False,
    ) -> Choice | None:
        """The chosen index, or None when no target is eligible.

        ``hot`` marks a key that alone carries more than a backend's share of the traffic:
        its bound is exact (the last fractional slot is granted at random, so the backend's
        load averages ``c x mean``). Other keys get the rounded-up bound plus one request of
        slack: at the low in-flight counts of LLM backends (a few each) momentary
        fluctuations would otherwise move cold keys off their backend and cost their prefix
        cache; the slack is one request, so it vanishes relative to the bound at scale.
        """
        eligible: list[int] = []
        total_load = 0
        total_weight = 0
        for i, t in enumerate(targets):
            if t.available(now) and i not in exclude:
                eligible.append(i)
                total_load += t.in_flight
                total_weight += t.weight
        if not eligible:
            return None
        policy = self.policy
        if policy == "round_robin":
            self._cursor += 1
            return Choice(eligible[self._cursor % len(eligible)], "round_robin")
        if policy == "random":
            weights = [targets[i].weight for i in eligible]
            return Choice(self.rng.choices(eligible, weights)[0], "random")
        if policy == "prefix_affinity" and ranked:
            # Bounded load: at most ceil(c x mean-after-this-request) per unit of weight.
            per_weight = self.load_factor * (total_load + 1) / total_weight
            first = True
            spilled = False
            for i in ranked:
                if i not in exclude:
                    t = targets[i]
                    if t.available(now):
                        if self._within(t.in_flight, per_weight * t.weight, hot):
                            if first:
                                return Choice(i, "affinity")
                            return Choice(i, "bounded" if spilled else "affinity_next")
                        spilled = True
                first = False
        return Choice(least_connections(targets, eligible, self.rng), "least_connections")

    def _within(self, in_flight: int, limit: float, hot: bool) -> bool:
        if not hot:
            return in_flight <= math.ceil(limit)
        limit = max(limit, 1.0)
        whole = math.floor(limit)
        if in_flight + 1 <= whole:
            return True
        return in_flight == whole and self.rng.random() < limit - whole

    def __repr__(self) -> str:
        return f"Selector({self.policy}, load_factor={self.load_factor})"


def least_connections(
    targets: Sequence[Target], eligible: Sequence[int], rng: random.Random
) -> int:
    """The eligible index with the fewest in-flight requests per unit of weight (random ties)."""
    best: list[int] = []
    best_score = math.inf
    for i in eligible:
        t = targets[i]
        score = (t.in_flight + 1) / t.weight
        if score < best_score:
            best_score = score
            best = [i]
        elif score == best_score:
            best.append(i)
    return best[0] if len(best) == 1 else rng.choice(best)
