"""Liveness, readiness and the Prometheus exposition."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from sluiceway.api.context import ApiContext


class Meta:
    def __init__(self, ctx: ApiContext) -> None:
        self._ctx = ctx

    async def health(self, request: web.Request) -> web.Response:
        """Alive: the process answers. Never depends on models."""
        return web.json_response({"status": "ok"})

    async def ready(self, request: web.Request) -> web.Response:
        """Ready: every model loaded and warmed up, and not shutting down."""
        ctx = self._ctx
        if ctx.draining:
            return web.json_response({"status": "draining"}, status=503)
        if not ctx.ready:
            return web.json_response({"status": "loading"}, status=503)
        return web.json_response({"status": "ready"})

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=self._ctx.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )
