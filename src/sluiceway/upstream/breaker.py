"""A per-backend circuit breaker, pure and synchronous (time is passed in as ``now``).

::

    closed ──failure_threshold consecutive failures──► open
      ▲                                                 │ open_s elapsed
      │                                                 ▼
      └──half_open_trials successes── half-open ──any failure──► open

In half-open at most ``half_open_trials`` requests are in flight at once; the rest of the
traffic goes elsewhere.
"""

from __future__ import annotations

from enum import IntEnum

from sluiceway.config.upstream import BreakerSettings


class BreakerState(IntEnum):
    """Values match the ``backend_breaker_state`` gauge."""

    CLOSED = 0
    HALF_OPEN = 1
    OPEN = 2


class Breaker:
    """Counts passive failure signals of one backend and decides whether it may be used."""

    __slots__ = ("_failures", "_opened_at", "_state", "_successes", "_trials", "opened", "settings")

    def __init__(self, settings: BreakerSettings) -> None:
        self.settings = settings
        self._state = BreakerState.CLOSED
        self._failures = 0  # consecutive, while closed
        self._opened_at = 0.0
        self._trials = 0  # half-open requests in flight
        self._successes = 0  # half-open successes
        self.opened = 0  # times opened (statistics)

    def state(self, now: float) -> BreakerState:
        if self._state is BreakerState.OPEN and now >= self._opened_at + self.settings.open_s:
            self._state = BreakerState.HALF_OPEN
            self._trials = 0
            self._successes = 0
        return self._state

    def allows(self, now: float) -> bool:
        """Whether a request may be sent now (no side effect beyond the open → half-open turn)."""
        if self._state is BreakerState.CLOSED:  # the hot path
            return True
        state = self.state(now)
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.HALF_OPEN:
            return self._trials < self.settings.half_open_trials
        return False

    def on_dispatch(self, now: float) -> None:
        """A request was sent to the backend."""
        if self._state is not BreakerState.CLOSED and self.state(now) is BreakerState.HALF_OPEN:
            self._trials += 1

    def on_success(self, now: float) -> None:
        if self._state is BreakerState.CLOSED:
            self._failures = 0
            return
        state = self.state(now)
        if state is BreakerState.CLOSED:
            self._failures = 0
        elif state is BreakerState.HALF_OPEN:
            self._trials = max(0, self._trials - 1)
            self._successes += 1
            if self._successes >= self.settings.half_open_trials:
                self._state = BreakerState.CLOSED
                self._failures = 0

    def on_failure(self, now: float) -> None:
        state = self.state(now)
        if state is BreakerState.CLOSED:
            self._failures += 1
            if self._failures >= self.settings.failure_threshold:
                self._open(now)
        elif state is BreakerState.HALF_OPEN:
            self._open(now)

    def on_abandon(self, now: float) -> None:
        """A request ended without a verdict (the client left): free its half-open trial."""
        if self.state(now) is BreakerState.HALF_OPEN:
            self._trials = max(0, self._trials - 1)

    def _open(self, now: float) -> None:
        self._state = BreakerState.OPEN
        self._opened_at = now
        self._failures = 0
        self._trials = 0
        self._successes = 0
        self.opened += 1

    def statistics(self, now: float) -> dict[str, object]:
        return {
            "state": self.state(now).name.lower(),
            "consecutive_failures": self._failures,
            "half_open_trials": self._trials,
            "times_opened": self.opened,
        }

    def __repr__(self) -> str:
        return f"Breaker({self._state.name.lower()}, failures={self._failures})"
