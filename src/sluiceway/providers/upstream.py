"""Upstream provider: a model served by a pool of remote OpenAI-compatible backends.

:class:`UpstreamService` ties the pieces together — the :class:`~sluiceway.upstream.pool.Pool`
(snapshot swapped on reload), the :class:`~sluiceway.upstream.client.Forwarder` (keep-alive
session, selection, failover) and the :class:`~sluiceway.upstream.health.Prober` (active
probes, run by :meth:`run` until :meth:`close`). The API edge only calls :meth:`exchange`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any, Protocol

import aiohttp
import msgspec

from sluiceway.config.upstream import BackendSettings, UpstreamModelSettings
from sluiceway.errors import InvalidRequest, NotFound
from sluiceway.providers.base import ModelCard, ServiceContext
from sluiceway.routing.key import routing_key
from sluiceway.upstream.client import Exchange, Forwarder, make_session
from sluiceway.upstream.health import Prober, probe_session
from sluiceway.upstream.pool import Pool, PoolSnapshot

log = logging.getLogger(__name__)


class Upstream(Protocol):
    """A pool of OpenAI-compatible backends serving one model."""

    @property
    def settings(self) -> UpstreamModelSettings: ...

    def exchange(
        self, tail: str, path: str, body: bytes, model: str, headers: Mapping[str, str]
    ) -> contextlib.AbstractAsyncContextManager[Exchange]:
        """Send ``POST path`` to a backend (failover before the first byte); yields the
        response with its headers read. Raises ``Unavailable`` when no backend answers."""
        ...

    def prepare(self, settings: UpstreamModelSettings) -> PoolSnapshot:
        """Validate new settings for this pool (raises ValueError) without applying them."""
        ...

    def apply(self, snapshot: PoolSnapshot) -> None:
        """Swap to a prepared snapshot (hot reload)."""
        ...

    def add_backend(self, backend: BackendSettings) -> None: ...

    def remove_backend(self, url: str) -> None: ...

    def set_draining(self, url: str, draining: bool) -> None: ...

    def statistics(self) -> Mapping[str, object]: ...


class UpstreamService:
    """Serves one upstream model (implements ``Service`` and ``Upstream``)."""

    def __init__(self, settings: UpstreamModelSettings, ctx: ServiceContext) -> None:
        self._ctx = ctx
        self.pool = Pool(settings, ctx.metrics)
        self._session: aiohttp.ClientSession | None = None
        self._forwarder: Forwarder | None = None
        self._prober: Prober | None = None
        self._names = (settings.id, *settings.aliases)

    # --- Service ---------------------------------------------------------------------------

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    @property
    def settings(self) -> UpstreamModelSettings:
        return self.pool.settings

    def cards(self) -> list[ModelCard]:
        return [ModelCard(id=n, task="upstream", owned_by="upstream") for n in self._names]

    async def start(self) -> None:
        self._session = make_session(self.settings)
        self._forwarder = Forwarder(self.pool, self._session, self._ctx.clock, self._ctx.metrics)
        self._prober = Prober(
            self.pool, probe_session(), self._ctx.clock, self._ctx.metrics, self._session
        )
        self.pool.refresh(self._ctx.clock.now())

    async def run(self) -> None:
        if self._prober is None:
            raise RuntimeError("start() first")
        await self._prober.run()

    async def drain(self) -> None:
        """Nothing to flush: the HTTP edge waits for its requests (and so for our streams)."""

    async def close(self) -> None:
        if self._prober is not None:
            self._prober.stop()
            await self._prober.session.close()
        if self._session is not None:
            await self._session.close()

    def statistics(self) -> Mapping[str, object]:
        return self.pool.statistics(self._ctx.clock.now())

    # --- Upstream --------------------------------------------------------------------------

    def exchange(
        self, tail: str, path: str, body: bytes, model: str, headers: Mapping[str, str]
    ) -> contextlib.AbstractAsyncContextManager[Exchange]:
        forwarder = self._forwarder
        if forwarder is None:
            raise RuntimeError("start() first")
        s = self.pool.settings
        key = None
        if s.policy == "prefix_affinity":
            key = routing_key(tail, body, headers.get(s.session_header), s.prefix_chars)
        if s.upstream_model and s.upstream_model != model:
            body = _with_model(body, s.upstream_model)
        return forwarder.exchange(path, body, headers, key)

    def prepare(self, settings: UpstreamModelSettings) -> PoolSnapshot:
        if (settings.id, *settings.aliases) != self._names:
            raise ValueError(f"the names of upstream model {settings.id!r} cannot change live")
        return self.pool.prepare(settings)

    def apply(self, snapshot: PoolSnapshot) -> None:
        gone = self.pool.swap(snapshot)
        for b in gone:
            log.info("backend %s left pool %r (%d in flight)", b.name, b.model, b.in_flight)
        self.pool.refresh(self._ctx.clock.now())

    def add_backend(self, backend: BackendSettings) -> None:
        try:
            self.apply(self.pool.with_backend(backend))
        except ValueError as e:
            raise InvalidRequest(str(e)) from None

    def remove_backend(self, url: str) -> None:
        try:
            self.apply(self.pool.without_backend(url))
        except KeyError:
            raise NotFound(f"no backend {url!r} in pool {self.pool.model!r}") from None
        except ValueError as e:
            raise InvalidRequest(str(e)) from None

    def set_draining(self, url: str, draining: bool) -> None:
        backend = self.pool.find(url)
        if backend is None:
            raise NotFound(f"no backend {url!r} in pool {self.pool.model!r}")
        backend.draining = draining
        self.pool.refresh(self._ctx.clock.now())

    def __repr__(self) -> str:
        return f"UpstreamService({self.pool!r})"


def _with_model(body: bytes, model: str) -> bytes:
    """Rewrite ``model`` for the backend (only when ``upstream_model`` is configured)."""
    try:
        data: Any = msgspec.json.decode(body)
    except msgspec.DecodeError as e:
        raise InvalidRequest(f"the body is not valid JSON: {e}") from None
    if isinstance(data, dict):
        data["model"] = model
    return msgspec.json.encode(data)


def build_upstream(settings: UpstreamModelSettings, ctx: ServiceContext) -> UpstreamService:
    return UpstreamService(settings, ctx)
