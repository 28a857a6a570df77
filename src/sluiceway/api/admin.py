"""The admin API (``/admin/*``), behind ``Authorization: Bearer <server.admin_key>``.

::

    GET    /admin/backends               every upstream pool with its backends' state
    POST   /admin/backends               {"model", "url", "weight"?, "labels"?}  add a backend
    DELETE /admin/backends               {"model", "url"}                         remove one
    POST   /admin/backends/drain         {"model", "url", "draining"?: true}      (un)drain one

Changes made here live until the next config reload, which makes the file the truth again.
With an empty ``admin_key`` the routes are not installed at all.
"""

from __future__ import annotations

import hmac

import msgspec
from aiohttp import web

from sluiceway.api.context import ApiContext
from sluiceway.api.decode import decode
from sluiceway.config.upstream import BackendSettings
from sluiceway.errors import InvalidRequest, NotFound, Unauthorized
from sluiceway.providers.upstream import Upstream


class _Target(msgspec.Struct, forbid_unknown_fields=True):
    model: str
    url: str
    weight: int = 1
    labels: dict[str, str] = {}
    draining: bool = True


_target = msgspec.json.Decoder(_Target)


class Admin:
    """Handlers of the admin API; the context is passed in, nothing global."""

    def __init__(self, ctx: ApiContext, key: str) -> None:
        self._ctx = ctx
        self._key = key.encode()

    def install(self, app: web.Application) -> None:
        app.router.add_get("/admin/backends", self.list)
        app.router.add_post("/admin/backends", self.add)
        app.router.add_delete("/admin/backends", self.remove)
        app.router.add_post("/admin/backends/drain", self.drain)

    def _authenticate(self, request: web.Request) -> None:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self._key):
            raise Unauthorized("the admin API needs Authorization: Bearer <admin key>")

    def _upstreams(self) -> dict[str, Upstream]:
        registry = self._ctx.registry
        found: dict[str, Upstream] = {}
        for card in registry.cards():
            upstream = registry.upstream(card.id)
            if upstream is not None:
                found.setdefault(upstream.settings.id, upstream)
        return found

    async def _target(self, request: web.Request) -> tuple[_Target, Upstream]:
        self._authenticate(request)
        target = decode(await request.read(), _target)
        upstream = self._ctx.registry.upstream(target.model)
        if upstream is None:
            raise NotFound(f"{target.model!r} is not an upstream model", param="model")
        return target, upstream

    def _pool(self, upstream: Upstream) -> web.Response:
        return web.json_response(dict(upstream.statistics()))

    async def list(self, request: web.Request) -> web.Response:
        self._authenticate(request)
        pools = [dict(u.statistics()) for u in self._upstreams().values()]
        return web.json_response({"pools": pools})

    async def add(self, request: web.Request) -> web.Response:
        target, upstream = await self._target(request)
        try:
            backend = BackendSettings(target.url, target.weight, dict(target.labels))
        except ValueError as e:
            raise InvalidRequest(str(e), param="url") from None
        upstream.add_backend(backend)
        response = self._pool(upstream)
        response.set_status(201)
        return response

    async def remove(self, request: web.Request) -> web.Response:
        target, upstream = await self._target(request)
        upstream.remove_backend(target.url)
        return self._pool(upstream)

    async def drain(self, request: web.Request) -> web.Response:
        target, upstream = await self._target(request)
        upstream.set_draining(target.url, target.draining)
        return self._pool(upstream)


def admin_routes(ctx: ApiContext) -> Admin | None:
    """The admin API for ``ctx``, or None when no admin key is configured."""
    key = ctx.server.admin_key
    return Admin(ctx, key) if key else None
