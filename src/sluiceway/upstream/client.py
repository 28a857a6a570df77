"""Proxy I/O towards a pool: one keep-alive aiohttp session, selection, failover, accounting.

:meth:`Forwarder.exchange` is an async context manager that yields an :class:`Exchange` — a
backend's response whose headers have arrived — and guarantees, on every way out (success,
upstream error, client disconnect → CancelledError, timeout), that the response is released or
closed and the backend's in-flight count goes back down exactly once.

Failover happens only inside ``exchange``, i.e. before the caller wrote a byte to the client:
on a connect error, a timeout before the headers, or a retryable status (502/503/504), the next
backend of the ranked list is tried, at most ``max_attempts`` in all.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

import aiohttp
from prometheus_client import Counter, Histogram

from sluiceway.clock import Clock
from sluiceway.config.upstream import UpstreamModelSettings
from sluiceway.errors import Unavailable
from sluiceway.observability.metrics import Metrics
from sluiceway.upstream.backend import Backend, Verdict
from sluiceway.upstream.pool import Pool, PoolSnapshot

log = logging.getLogger(__name__)

RETRYABLE = frozenset({502, 503, 504})
#: A 503 whose body says this is a failure signal (the backend ran out of memory).
_OOM_MARKERS = (b"out of memory", b"outofmemory", b"oom")
_ERROR_BODY_LIMIT = 65536


@dataclass(slots=True)
class Exchange:
    """A response from the chosen backend, headers received, body not yet read."""

    backend: Backend
    response: aiohttp.ClientResponse
    attempts: int
    started: float  # perf_counter at selection of the first backend
    #: Set by the caller: the upstream broke mid-body ("failure") or the body ended cleanly.
    verdict: Verdict = "success"
    #: Body bytes already read (an error body inspected during failover): send them first.
    head: bytes = b""
    finished: bool = False
    #: perf_counter when the first body chunk arrived (streams: time to first token).
    first_byte: float = 0.0

    def fail(self) -> None:
        self.verdict = "failure"

    def done(self) -> None:
        """The whole body was read: the connection can go back to the keep-alive pool."""
        self.finished = True


async def _read_bounded(response: aiohttp.ClientResponse) -> bytes:
    """Up to ``_ERROR_BODY_LIMIT`` bytes of a (small, error) body."""
    data = b""
    while len(data) < _ERROR_BODY_LIMIT:
        chunk = await response.content.read(_ERROR_BODY_LIMIT - len(data))
        if not chunk:
            break
        data += chunk
    return data


def make_session(settings: UpstreamModelSettings) -> aiohttp.ClientSession:
    """One session per pool: keep-alive connections per backend, bytes passed through."""
    connector = aiohttp.TCPConnector(
        limit=0,
        limit_per_host=settings.max_connections_per_backend,
        keepalive_timeout=settings.keepalive_s,
        ttl_dns_cache=60,
    )
    return aiohttp.ClientSession(
        connector=connector,
        auto_decompress=False,
        read_bufsize=settings.stream_buffer_bytes,
        skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
        timeout=aiohttp.ClientTimeout(
            total=None, sock_connect=settings.connect_timeout_s, sock_read=settings.read_timeout_s
        ),
        trust_env=False,
    )


class Forwarder:
    """Sends requests of one upstream model to its pool."""

    def __init__(
        self, pool: Pool, session: aiohttp.ClientSession, clock: Clock, metrics: Metrics
    ) -> None:
        self.pool = pool
        self.session = session
        self.clock = clock
        self.metrics = metrics
        model = pool.model
        self._m_decisions = {
            o: metrics.routing_decisions.labels(model, o)
            for o in (
                "affinity", "affinity_next", "bounded", "least_connections", "round_robin",
                "random",
            )
        }  # fmt: skip
        self._m_retries = metrics.retries.labels
        # Label children cached per (backend, status): .labels() is costly on the hot path.
        self._m_upstream_cache: dict[tuple[str, str], Counter] = {}
        self._m_ttft_cache: dict[str, Histogram] = {}
        self._m_duration_cache: dict[str, Histogram] = {}

    def _m_upstream(self, backend: str, status: str) -> Counter:
        child = self._m_upstream_cache.get((backend, status))
        if child is None:
            child = self.metrics.upstream_requests.labels(self.pool.model, backend, status)
            self._m_upstream_cache[(backend, status)] = child
        return child

    def _m_ttft(self, backend: str) -> Histogram:
        child = self._m_ttft_cache.get(backend)
        if child is None:
            child = self._m_ttft_cache[backend] = self.metrics.ttft.labels(self.pool.model, backend)
        return child

    def _m_duration(self, backend: str) -> Histogram:
        child = self._m_duration_cache.get(backend)
        if child is None:
            child = self.metrics.upstream_duration.labels(self.pool.model, backend)
            self._m_duration_cache[backend] = child
        return child

    @contextlib.asynccontextmanager
    async def exchange(
        self, path: str, body: bytes, headers: Mapping[str, str], key: int | None
    ) -> AsyncIterator[Exchange]:
        snapshot = self.pool.snapshot
        started = time.perf_counter()
        ex = await self._connect(snapshot, path, body, headers, key, started)
        try:
            yield ex
        finally:
            # An exception from the caller's body copy is the client's doing (disconnect →
            # CancelledError, reset) unless the caller marked the upstream as failed.
            verdict: Verdict = (
                ex.verdict if (ex.finished or ex.verdict == "failure") else ("abandoned")
            )
            # Close (not release) unless the body was read to the end: the backend sees the
            # connection go away and stops generating.
            if ex.finished and verdict != "failure":
                ex.response.release()
            else:
                ex.response.close()
            self._finish(ex, verdict)

    def _finish(self, ex: Exchange, verdict: Verdict) -> None:
        backend = ex.backend
        backend.release(self.clock.now(), verdict)
        if ex.first_byte:
            self._m_ttft(backend.name).observe(ex.first_byte - ex.started)
        if verdict == "success":
            self._m_duration(backend.name).observe(time.perf_counter() - ex.started)

    async def _connect(
        self,
        snapshot: PoolSnapshot,
        path: str,
        body: bytes,
        headers: Mapping[str, str],
        key: int | None,
        started: float,
    ) -> Exchange:
        settings = snapshot.settings
        model = self.pool.model
        tried: set[int] = set()
        reasons: list[str] = []
        attempts = 0
        hot = self.pool.is_hot(key, self.clock.now())
        choice = self.pool.select(snapshot, key, self.clock.now(), tried, hot)
        while choice is not None:
            backend = snapshot.backends[choice.index]
            tried.add(choice.index)
            attempts += 1
            self._m_decisions[choice.outcome].inc()
            backend.acquire(self.clock.now())
            response: aiohttp.ClientResponse | None = None
            handed = False
            verdict: Verdict = "abandoned"  # if cancelled here, the backend is not to blame
            try:
                response, verdict, reason = await self._send(backend, path, body, headers)
                if response is not None and response.status not in RETRYABLE:
                    handed = True  # exchange() releases it from here on
                    return Exchange(backend, response, attempts, started, verdict)
                nxt = None
                if attempts < settings.max_attempts:
                    nxt = self.pool.select(snapshot, key, self.clock.now(), tried, hot)
                if response is not None:
                    head = await _read_bounded(response)
                    oom = any(m in head.lower() for m in _OOM_MARKERS)
                    if response.status == 503 and not oom:
                        verdict = "abandoned"  # busy, not broken
                    if nxt is None:
                        # Nothing left to try: pass this response through as it is.
                        handed = True
                        return Exchange(backend, response, attempts, started, verdict, head=head)
                    reason = f"status_{response.status}"
                log.info("upstream %s of %r failed (%s)", backend.name, model, reason)
                reasons.append(f"{backend.name}: {reason}")
                if nxt is not None:
                    self._m_retries(model, reason).inc()
                choice = nxt
            finally:
                if not handed:
                    if response is not None:
                        response.close()
                    backend.release(self.clock.now(), verdict)
        if not reasons:
            raise Unavailable(self._none_available(snapshot), code="no_backend")
        raise Unavailable(
            f"no backend of model {model!r} could answer after {attempts} attempt(s): "
            + "; ".join(reasons),
            code="upstream_unavailable",
        )

    async def _send(
        self, backend: Backend, path: str, body: bytes, headers: Mapping[str, str]
    ) -> tuple[aiohttp.ClientResponse | None, Verdict, str]:
        """One attempt: the response (headers read) or None, the breaker verdict, a reason."""
        sent = time.perf_counter()
        try:
            response = await self.session.post(backend.url + path, data=body, headers=headers)
        except aiohttp.ServerDisconnectedError:
            # Often a stale keep-alive connection the backend closed: not its fault.
            self._m_upstream(backend.name, "disconnected").inc()
            return None, "abandoned", "disconnected"
        except (aiohttp.ClientError, TimeoutError) as e:
            reason = "timeout" if isinstance(e, TimeoutError) else "connect"
            self._m_upstream(backend.name, reason).inc()
            return None, "failure", reason
        status = response.status
        self._m_upstream(backend.name, str(status)).inc()
        slow = time.perf_counter() - sent > backend.breaker.settings.slow_s
        return response, "failure" if status >= 500 or slow else "success", str(status)

    def _none_available(self, snapshot: PoolSnapshot) -> str:
        now = self.clock.now()
        down = sum(not b.healthy for b in snapshot.backends)
        draining = sum(b.draining for b in snapshot.backends)
        tripped = sum(not b.breaker.allows(now) for b in snapshot.backends)
        return (
            f"no backend of model {self.pool.model!r} is available "
            f"({len(snapshot.backends)} configured: {down} unhealthy, {tripped} circuit open, "
            f"{draining} draining)"
        )
