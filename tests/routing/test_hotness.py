"""Hot-key detection: decayed shares with a manual clock."""

from __future__ import annotations

from sluiceway.routing.hotness import KeyRates
from sluiceway.testing import ManualClock


def test_a_key_carrying_half_the_traffic_has_half_the_share() -> None:
    rates, clock = KeyRates(half_life_s=10), ManualClock()
    for i in range(1000):
        clock.advance(0.01)
        rates.hit(7 if i % 2 == 0 else 1000 + i, clock.now())
    assert 0.45 < rates.hit(7, clock.now()) < 0.56


def test_old_traffic_decays() -> None:
    rates, clock = KeyRates(half_life_s=1), ManualClock()
    for _ in range(100):
        rates.hit(7, clock.now())
    clock.advance(60)  # 60 half-lives, and a rescale
    for i in range(100):
        rates.hit(i + 100, clock.now())
    assert rates.hit(7, clock.now()) < 0.05


def test_memory_is_bounded() -> None:
    rates, clock = KeyRates(capacity=64), ManualClock()
    for i in range(1000):
        rates.hit(i, clock.now())
    assert len(rates) <= 64
