"""The HTTP edge of upstream models: request headers in, backend response out.

``forward`` is called by ``V1.post`` once the body is read (size-capped) and its ``model``
decoded. It builds the upstream headers (hop-by-hop dropped, ``X-Request-Id`` and
``X-Forwarded-For`` set), lets the model's pool pick a backend (failover happens there, before
a byte is written here), then passes the response through: ``text/event-stream`` chunk by chunk
(see ``sluiceway.upstream.stream``), anything else as one body.
"""

from __future__ import annotations

import os

from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from sluiceway.api.context import ApiContext
from sluiceway.providers.upstream import Upstream
from sluiceway.upstream.stream import pump, read_all

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
#: Request headers never copied upstream (the client session sets them itself).
_DROP_REQUEST = HOP_BY_HOP | {"host", "content-length", "expect"}
_DROP_RESPONSE = HOP_BY_HOP | {"content-length"}


def _connection_tokens(value: str | None) -> set[str]:
    return {t.strip().lower() for t in value.split(",")} if value else set()


def upstream_headers(
    request: web.Request, upstream: Upstream, ctx: ApiContext, request_id: str
) -> CIMultiDict[str]:
    drop = _DROP_REQUEST | _connection_tokens(request.headers.get("Connection"))
    api_key = upstream.settings.api_key
    if api_key or ctx.server.api_keys:
        # Our own key is not the backend's; never leak it upstream.
        drop = drop | {"authorization"}
    headers: CIMultiDict[str] = CIMultiDict()
    for name, value in request.headers.items():
        if name.lower() not in drop:
            headers.add(name, value)
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    if "Content-Type" not in headers:
        headers["Content-Type"] = "application/json"
    headers["X-Request-Id"] = request_id
    remote = request.remote or ""
    prior = headers.get("X-Forwarded-For")
    headers["X-Forwarded-For"] = f"{prior}, {remote}" if prior else remote
    return headers


def response_headers(upstream: CIMultiDictProxy[str], request_id: str) -> CIMultiDict[str]:
    out: CIMultiDict[str] = CIMultiDict()
    drop = _DROP_RESPONSE | _connection_tokens(upstream.get("Connection"))
    for name, value in upstream.items():
        if name.lower() not in drop:
            out.add(name, value)
    out["X-Request-Id"] = request_id
    return out


async def forward(
    request: web.Request, body: bytes, model: str, upstream: Upstream, ctx: ApiContext
) -> web.StreamResponse:
    """Proxy one ``POST /v1/...`` request to the pool of ``model``."""
    request_id = request.headers.get("X-Request-Id") or os.urandom(12).hex()
    headers = upstream_headers(request, upstream, ctx, request_id)
    tail = request.match_info["tail"]
    async with upstream.exchange(tail, request.raw_path, body, model, headers) as ex:
        response = ex.response
        out_headers = response_headers(response.headers, request_id)
        out_headers["X-Sluiceway-Backend"] = ex.backend.name
        if response.content_type == "text/event-stream":
            stream = web.StreamResponse(status=response.status, headers=out_headers)
            await stream.prepare(request)
            await pump(ex, stream)
            await stream.write_eof()
            return stream
        data = await read_all(ex)
        return web.Response(status=response.status, body=data, headers=out_headers)
