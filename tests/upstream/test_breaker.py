"""The circuit breaker, driven by a manual clock."""

from __future__ import annotations

from sluiceway.config.upstream import BreakerSettings
from sluiceway.testing import ManualClock
from sluiceway.upstream.breaker import Breaker, BreakerState


def make() -> tuple[Breaker, ManualClock]:
    return Breaker(BreakerSettings(failure_threshold=3, open_s=10, half_open_trials=2)), (
        ManualClock()
    )


def test_opens_after_consecutive_failures_only() -> None:
    b, clock = make()
    b.on_failure(clock.now())
    b.on_failure(clock.now())
    b.on_success(clock.now())  # resets the streak
    b.on_failure(clock.now())
    b.on_failure(clock.now())
    assert b.state(clock.now()) is BreakerState.CLOSED
    b.on_failure(clock.now())
    assert b.state(clock.now()) is BreakerState.OPEN
    assert not b.allows(clock.now())


def test_half_open_admits_limited_trials_and_closes_on_success() -> None:
    b, clock = make()
    for _ in range(3):
        b.on_failure(clock.now())
    clock.advance(9.9)
    assert not b.allows(clock.now())
    clock.advance(0.2)
    assert b.state(clock.now()) is BreakerState.HALF_OPEN
    for _ in range(2):
        assert b.allows(clock.now())
        b.on_dispatch(clock.now())
    assert not b.allows(clock.now())  # both trials in flight
    b.on_success(clock.now())
    assert b.state(clock.now()) is BreakerState.HALF_OPEN
    b.on_success(clock.now())
    assert b.state(clock.now()) is BreakerState.CLOSED


def test_half_open_failure_reopens() -> None:
    b, clock = make()
    for _ in range(3):
        b.on_failure(clock.now())
    clock.advance(10)
    b.on_dispatch(clock.now())
    b.on_failure(clock.now())
    assert b.state(clock.now()) is BreakerState.OPEN
    assert b.opened == 2
    clock.advance(10)
    assert b.allows(clock.now())


def test_abandoned_trial_frees_its_slot() -> None:
    b, clock = make()
    for _ in range(3):
        b.on_failure(clock.now())
    clock.advance(10)
    b.on_dispatch(clock.now())
    b.on_dispatch(clock.now())
    assert not b.allows(clock.now())
    b.on_abandon(clock.now())
    assert b.allows(clock.now())
    assert b.statistics(clock.now())["state"] == "half_open"
