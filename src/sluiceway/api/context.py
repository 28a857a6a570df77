"""What the HTTP edge needs from the composition root, passed explicitly to the handlers."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from aiohttp import web

from sluiceway.clock import Clock
from sluiceway.config.settings import ServerSettings
from sluiceway.observability.metrics import Metrics
from sluiceway.providers.registry import Registry

#: The served model a request named (metrics label; only known names, so the set is bounded).
MODEL = web.RequestKey("model", str)


@dataclass(slots=True)
class ApiContext:
    """Shared by every handler. ``registry`` is swapped as one reference on hot reload."""

    metrics: Metrics
    clock: Clock
    server: ServerSettings
    registry: Registry
    ready: bool = False
    draining: bool = False
    in_flight: int = 0
    _idle: asyncio.Event = field(default_factory=asyncio.Event)

    def request_started(self) -> None:
        self.in_flight += 1
        self._idle.clear()

    def request_done(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:
            self._idle.set()

    async def wait_idle(self) -> None:
        """Resolves once no HTTP request is being served."""
        if self.in_flight:
            await self._idle.wait()

    def deadline(self, header: str | None) -> float:
        """The request's deadline: the server default, shortened by ``X-Request-Timeout``."""
        timeout = self.server.request_timeout_s
        if header:
            try:
                asked = float(header)
            except ValueError:
                asked = timeout
            if 0 < asked < timeout:
                timeout = asked
        return self.clock.now() + timeout
