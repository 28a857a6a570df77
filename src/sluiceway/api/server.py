"""The aiohttp application: the whole URL map, the edge middleware and the /v1 dispatcher."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import cast

from aiohttp import web
from aiohttp.typedefs import Middleware

from sluiceway.api.context import MODEL, ApiContext
from sluiceway.api.decode import model_of, read_body
from sluiceway.api.embeddings import handle_embeddings
from sluiceway.api.errors import error_response, reason_of
from sluiceway.api.generation import ENDPOINTS as GENERATION_ENDPOINTS
from sluiceway.api.meta import Meta
from sluiceway.api.proxy import forward
from sluiceway.errors import (
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    SluicewayError,
    Unauthorized,
    Unavailable,
)

log = logging.getLogger(__name__)

#: /v1 paths with their own metrics label (bounded label set).
KNOWN_V1 = frozenset({"embeddings", "completions", "chat/completions"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: Endpoints served by local providers: path → handler(request, body, ctx).
LOCAL_ENDPOINTS: dict[
    str, Callable[[web.Request, bytes, ApiContext], Awaitable[web.StreamResponse]]
] = {"embeddings": handle_embeddings, **GENERATION_ENDPOINTS}


def _endpoint_label(request: web.Request) -> str:
    info = request.match_info
    route = info.route if info is not None else None
    if route is None or route.resource is None:
        return "other"
    if route.resource.canonical == "/v1/{tail}":
        tail = info.get("tail", "")
        return "/v1/" + tail if tail in KNOWN_V1 else "/v1/other"
    return route.resource.canonical


class V1:
    """``/v1/*``: authenticate, read the body once, route by model: upstream pool or local."""

    def __init__(self, ctx: ApiContext) -> None:
        self._ctx = ctx

    async def models(self, request: web.Request) -> web.Response:
        self._authenticate(request)
        cards = self._ctx.registry.cards()
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {"id": c.id, "object": "model", "created": c.created, "owned_by": c.owned_by}
                    for c in cards
                ],
            }
        )

    async def post(self, request: web.Request) -> web.StreamResponse:
        ctx = self._ctx
        self._authenticate(request)
        if ctx.draining or not ctx.ready:
            raise Unavailable("the server is not ready or is shutting down")
        tail = request.match_info["tail"]
        body = await read_body(request, ctx.server.max_body_bytes)
        model = model_of(body)
        if ctx.registry.knows(model):
            request[MODEL] = model
        upstream = ctx.registry.upstream(model)
        if upstream is not None:
            response: web.StreamResponse = await forward(request, body, model, upstream, ctx)
            return response
        handler = LOCAL_ENDPOINTS.get(tail)
        if handler is None:
            raise NotFound(f"no local endpoint /v1/{tail}", code="unknown_url")
        return await handler(request, body, ctx)

    def _authenticate(self, request: web.Request) -> None:
        keys = self._ctx.server.api_keys
        if not keys:
            return
        auth = request.headers.get("Authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or token.strip() not in keys:
            raise Unauthorized("a valid API key is required (Authorization: Bearer <key>)")


def edge_middleware(
    ctx: ApiContext,
) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """Maps every failure to the OpenAI error shape and records request metrics."""
    m = ctx.metrics

    @web.middleware
    async def edge(request: web.Request, handler: Handler) -> web.StreamResponse:
        start = time.perf_counter()
        ctx.request_started()
        endpoint = _endpoint_label(request)
        gauge = m.in_flight.labels(endpoint)
        gauge.inc()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except SluicewayError as e:
            status = e.status
            m.failures.labels(request.get(MODEL, "-"), reason_of(e)).inc()
            return error_response(e)
        except web.HTTPException as e:
            mapped = _map_http(e)
            status = mapped.status
            return error_response(mapped)
        except asyncio.CancelledError:
            status = 499  # client closed the connection
            m.failures.labels(request.get(MODEL, "-"), "cancelled").inc()
            raise
        except Exception:
            log.exception("unhandled error on %s %s", request.method, request.path)
            status = 500
            return error_response(SluicewayError("internal error; see the server log"))
        finally:
            ctx.request_done()
            gauge.dec()
            model = request.get(MODEL, "-")
            m.requests.labels(model, endpoint, str(status)).inc()
            if endpoint.startswith("/v1/") and status < 400:
                m.request_duration.labels(model, endpoint).observe(time.perf_counter() - start)

    return edge


def _map_http(e: web.HTTPException) -> SluicewayError:
    if isinstance(e, web.HTTPNotFound):
        return NotFound("no such endpoint", code="unknown_url")
    if isinstance(e, web.HTTPMethodNotAllowed):
        return MethodNotAllowed(f"method {e.method} is not allowed here")
    if isinstance(e, web.HTTPRequestEntityTooLarge):
        return PayloadTooLarge("request body too large")
    err = InvalidRequest(e.reason or "bad request")
    err.status = e.status
    return err


def create_web_app(
    ctx: ApiContext, extra: Callable[[web.Application], None] | None = None
) -> web.Application:
    """The URL map. ``extra`` lets the composition root add routes (admin API)."""
    app = web.Application(
        middlewares=[cast(Middleware, edge_middleware(ctx))],
        client_max_size=ctx.server.max_body_bytes,
        handler_args={"max_field_size": 65536},
    )
    meta = Meta(ctx)
    v1 = V1(ctx)
    app.router.add_get("/health", meta.health)
    app.router.add_get("/ready", meta.ready)
    app.router.add_get("/metrics", meta.metrics)
    app.router.add_get("/v1/models", v1.models)
    app.router.add_post("/v1/{tail:.+}", v1.post)
    if extra is not None:
        extra(app)
    return app
