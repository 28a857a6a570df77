"""Composition root: settings → every long-lived object, owned by one task group.

``serve(settings)`` is the whole life of a gateway process::

    build services ─► start (load + warm up) ─► listen ─► ready ── SIGTERM ──► shutdown
    shutdown: 1. stop admitting (ready → 503, new /v1 requests → 503)
              2. drain: admitted work finishes (bounded by shutdown_grace_s)
              3. close services: anything left fails with 503 (every request is answered)
              4. stop listening and close client connections
              5. cancel background loops
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from sluiceway.api.admin import admin_routes
from sluiceway.api.context import ApiContext
from sluiceway.api.server import create_web_app
from sluiceway.clock import Clock, SystemClock
from sluiceway.config.settings import Settings
from sluiceway.observability.metrics import Metrics
from sluiceway.providers.base import Service, ServiceContext
from sluiceway.providers.factory import build_registry
from sluiceway.providers.registry import Registry
from sluiceway.upstream.reload import ConfigWatcher

log = logging.getLogger(__name__)


class Gateway:
    """Owns the registry, the HTTP site and the background loops of one process."""

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        registry: Registry | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.metrics = metrics or Metrics()
        self.service_ctx = ServiceContext(self.metrics, self.clock, settings.server)
        registry = registry or build_registry(settings.models, self.service_ctx)
        self.api = ApiContext(self.metrics, self.clock, settings.server, registry)
        self.url = ""
        self.watcher: ConfigWatcher | None = None

    @property
    def registry(self) -> Registry:
        return self.api.registry

    @contextlib.asynccontextmanager
    async def running(
        self, *, host: str | None = None, port: int | None = None
    ) -> AsyncIterator[Gateway]:
        """Listen, load the models, serve while the block runs, then shut down in order.

        The socket opens first, so ``/health`` answers (200) and ``/ready`` says 503 while
        models load; ``/ready`` turns 200 once every model is loaded and warmed up.
        """
        server = self.settings.server
        runner = web.AppRunner(
            create_web_app(self.api, self._extra_routes()),
            handle_signals=False,
            handler_cancellation=True,
            access_log=None,
            shutdown_timeout=1.0,
        )
        await runner.setup()
        services = list(self.registry.services)
        try:
            site = web.TCPSite(
                runner,
                host if host is not None else server.host,
                server.port if port is None else port,
                backlog=1024,
                reuse_address=True,
            )
            await site.start()
            h, p = runner.addresses[0][0], runner.addresses[0][1]
            self.url = f"http://{h}:{p}"
            log.info("sluiceway listening on %s; loading %s", self.url, self.registry)
            await asyncio.gather(*(s.start() for s in services))
        except BaseException:
            # A port in use or a model that cannot load stops the start with its own error.
            for s in services:
                await s.close()
            await runner.cleanup()
            raise
        async with asyncio.TaskGroup() as tg:
            loops = [tg.create_task(s.run(), name=f"service-{s.names[0]}") for s in services]
            if self.settings.source and server.watch_config:
                # Hot reload of upstream pools (sluiceway.upstream.reload).
                self.watcher = ConfigWatcher(
                    self.settings.source, lambda: self.registry, self.metrics
                )
                loops.append(tg.create_task(self.watcher.run(), name="config-watcher"))
            self.api.ready = True
            log.info("sluiceway ready on %s", self.url)
            try:
                yield self
            finally:
                await self._shutdown(runner, services, loops)

    def _extra_routes(self) -> Callable[[web.Application], None] | None:
        admin = admin_routes(self.api)  # None unless server.admin_key is set
        return admin.install if admin is not None else None

    async def _shutdown(
        self,
        runner: web.AppRunner,
        services: list[Service],
        loops: list[asyncio.Task[None]],
    ) -> None:
        # 1. Stop admitting: /ready and new /v1 requests answer 503.
        self.api.ready = False
        self.api.draining = True
        # 2. Drain admitted work, bounded by the grace period.
        grace = self.settings.server.shutdown_grace_s
        try:
            async with asyncio.timeout(grace):
                await asyncio.gather(*(s.drain() for s in services))
                await self.api.wait_idle()
        except TimeoutError:
            log.warning("shutdown: work still in flight after %.1fs; cancelling it", grace)
        # 3. Close services: whatever is left fails with a 503 its handler can still send.
        for s in services:
            await s.close()
        # 4. Stop listening; give handlers up to the runner's shutdown_timeout to answer, then
        #    close client connections.
        await runner.cleanup()
        # 5. Stop the background loops.
        for task in loops:
            task.cancel()


async def serve(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT, then shut down gracefully."""
    sys.setswitchinterval(settings.server.switch_interval_s)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    gateway = Gateway(settings)
    async with gateway.running():
        print(f"sluiceway: serving on {gateway.url}", flush=True)
        await stop.wait()
        log.info("signal received: draining")
