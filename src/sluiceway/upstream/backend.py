"""One backend of a pool: its settings, health, breaker, drain flag and in-flight count.

A :class:`Backend` lives as long as its URL stays in the pool: a hot reload that keeps the URL
keeps the object (and so its in-flight count, health and breaker). Requests hold the Backend
they started on, so a reload or an admin removal never disturbs them.

Every selection calls :meth:`acquire` and every request end calls :meth:`release` exactly
once (success, upstream error, client disconnect, timeout, failover), so the load balancer
never goes blind.
"""

from __future__ import annotations

import contextlib
from typing import Literal

from sluiceway.config.upstream import BackendSettings, BreakerSettings, HealthSettings
from sluiceway.observability.metrics import Metrics
from sluiceway.upstream.breaker import Breaker, BreakerState

Verdict = Literal["success", "failure", "abandoned"]


def backend_name(url: str) -> str:
    """The metrics/admin label of a backend: its URL without the scheme."""
    return url.partition("://")[2].rstrip("/") or url


class Backend:
    """Mutable state of one backend (implements ``routing.selector.Target``)."""

    def __init__(
        self,
        settings: BackendSettings,
        model: str,
        health: HealthSettings,
        breaker: BreakerSettings,
        metrics: Metrics,
    ) -> None:
        self.settings = settings
        self.url = settings.base
        self.name = backend_name(self.url)
        self.model = model
        self.health_settings = health
        self.breaker = Breaker(breaker)
        self.healthy = True  # optimistic until probes say otherwise
        self.draining = False
        self.in_flight = 0
        self.requests = 0
        self.failures = 0
        self._probe_ok = 0  # consecutive probe results
        self._probe_fail = 0
        self._m_in_flight = metrics.backend_in_flight.labels(model, self.name)
        self._m_up = metrics.backend_up.labels(model, self.name)
        self._m_breaker = metrics.breaker_state.labels(model, self.name)
        self._m_up.set(1)
        self._m_breaker.set(0)

    @property
    def weight(self) -> int:
        return self.settings.weight

    def reconfigure(
        self, settings: BackendSettings, health: HealthSettings, breaker: BreakerSettings
    ) -> None:
        """Hot reload of the same URL: new weight/labels/knobs, same state."""
        self.settings = settings
        self.health_settings = health
        self.breaker.settings = breaker

    # --- selection -------------------------------------------------------------------------

    def available(self, now: float) -> bool:
        return self.healthy and not self.draining and self.breaker.allows(now)

    def acquire(self, now: float) -> None:
        self.in_flight += 1
        self.requests += 1
        self.breaker.on_dispatch(now)
        self._m_in_flight.inc()

    def release(self, now: float, verdict: Verdict) -> None:
        self.in_flight -= 1
        self._m_in_flight.dec()
        before = self.breaker.state(now)
        if verdict == "success":
            self.breaker.on_success(now)
        elif verdict == "failure":
            self.failures += 1
            self.breaker.on_failure(now)
        else:
            self.breaker.on_abandon(now)
        if self.breaker.state(now) is not before:
            self.refresh(now)

    # --- active health ---------------------------------------------------------------------

    def record_probe(self, ok: bool) -> bool:
        """Apply one probe result; returns True if ``healthy`` changed."""
        h = self.health_settings
        if ok:
            self._probe_ok += 1
            self._probe_fail = 0
            if not self.healthy and self._probe_ok >= h.healthy_threshold:
                self.healthy = True
                return True
        else:
            self._probe_fail += 1
            self._probe_ok = 0
            if self.healthy and self._probe_fail >= h.unhealthy_threshold:
                self.healthy = False
                return True
        return False

    def refresh(self, now: float) -> None:
        """Push health and breaker state to the gauges."""
        state = self.breaker.state(now)
        self._m_breaker.set(int(state))
        self._m_up.set(1 if self.healthy and state is not BreakerState.OPEN else 0)

    def statistics(self, now: float) -> dict[str, object]:
        return {
            "url": self.url,
            "name": self.name,
            "weight": self.weight,
            "labels": dict(self.settings.labels),
            "healthy": self.healthy,
            "draining": self.draining,
            "available": self.available(now),
            "in_flight": self.in_flight,
            "requests": self.requests,
            "failures": self.failures,
            "breaker": self.breaker.statistics(now),
        }

    def __repr__(self) -> str:
        state = "healthy" if self.healthy else "unhealthy"
        drain = ", draining" if self.draining else ""
        return f"Backend({self.url}, w={self.weight}, {state}{drain}, in_flight={self.in_flight})"

    def forget(self, metrics: Metrics) -> None:
        """Drop this backend's gauge series (it left the pool)."""
        for gauge in (metrics.backend_in_flight, metrics.backend_up, metrics.breaker_state):
            with contextlib.suppress(KeyError):
                gauge.remove(self.model, self.name)
