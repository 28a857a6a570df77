"""Active health probes: every ``interval_s``, a fresh TCP connection and ``GET <path>`` per
backend; ``unhealthy_threshold`` failures in a row eject it, ``healthy_threshold`` successes
readmit it. The threshold logic is pure (:meth:`Backend.record_probe`); this module only does
the I/O and refreshes the pool's gauges (health, breaker, availability, connections).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

import aiohttp
from yarl import URL

from sluiceway.clock import Clock
from sluiceway.observability.metrics import Metrics
from sluiceway.upstream.backend import Backend
from sluiceway.upstream.pool import Pool

log = logging.getLogger(__name__)


def probe_session() -> aiohttp.ClientSession:
    """A session that opens a new connection per probe, so each probe also tests TCP connect."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(force_close=True, limit=0), trust_env=False
    )


class Prober:
    """Probes every backend of one pool until :meth:`stop`."""

    def __init__(
        self,
        pool: Pool,
        session: aiohttp.ClientSession,
        clock: Clock,
        metrics: Metrics,
        traffic: aiohttp.ClientSession | None = None,
    ) -> None:
        self.pool = pool
        self.session = session
        self.clock = clock
        self.metrics = metrics
        self.traffic = traffic  # the forwarding session, for the connection gauge
        self.rounds = 0
        self._stop = asyncio.Event()

    async def run(self) -> None:
        while not self._stop.is_set():
            settings = self.pool.settings.health
            try:
                if settings.enabled:
                    await self.probe_all()
                self.refresh()
            except Exception:
                # A bug here must not take the gateway down: log it and probe again later.
                log.exception("health round of %r failed", self.pool.model)
            try:
                async with asyncio.timeout(settings.interval_s):
                    await self._stop.wait()
            except TimeoutError:
                pass

    def stop(self) -> None:
        self._stop.set()

    async def probe_all(self) -> None:
        backends = self.pool.snapshot.backends
        async with asyncio.TaskGroup() as tg:
            probes = [tg.create_task(self.probe(b)) for b in backends]
        for backend, probe in zip(backends, probes, strict=True):
            ok = probe.result()
            if backend.record_probe(ok):
                if backend.healthy:
                    log.warning("backend %s of %r is healthy again", backend.name, backend.model)
                else:
                    log.warning("backend %s of %r is down: ejected", backend.name, backend.model)
        self.rounds += 1

    async def probe(self, backend: Backend) -> bool:
        h = backend.health_settings
        try:
            async with (
                asyncio.timeout(h.timeout_s),
                self.session.get(backend.url + h.path, allow_redirects=False) as response,
            ):
                await response.read()
                return 200 <= response.status < 300
        except (aiohttp.ClientError, OSError, TimeoutError):
            return False

    def refresh(self) -> None:
        self.pool.refresh(self.clock.now())
        if self.traffic is None:
            return
        counts = connection_counts(self.traffic.connector)
        gauge = self.metrics.upstream_connections
        for b in self.pool.snapshot.backends:
            url = URL(b.url)
            gauge.labels(b.model, b.name).set(counts.get((url.host or "", url.port or 0), 0))

    def __repr__(self) -> str:
        return f"Prober({self.pool.model!r}, rounds={self.rounds})"


def connection_counts(connector: aiohttp.BaseConnector | None) -> Mapping[tuple[str, int], int]:
    """Open connections (idle + in use) per (host, port); best effort over aiohttp internals."""
    counts: dict[tuple[str, int], int] = {}
    if connector is None:
        return counts
    try:
        for name in ("_conns", "_acquired_per_host"):
            for key, conns in getattr(connector, name, {}).items():
                hp = (str(getattr(key, "host", "")), int(getattr(key, "port", 0) or 0))
                counts[hp] = counts.get(hp, 0) + len(conns)
    except (TypeError, AttributeError, ValueError):
        return {}  # aiohttp changed its internals: the gauge stays at 0
    return counts
