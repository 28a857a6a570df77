"""A real aiohttp server on 127.0.0.1 (ephemeral port) for the load generator to hit.

Routes:
    POST /v1/embeddings        200, one vector per input text
    POST /flaky                503 for every third request, else 200
    POST /slow?s=5             sleeps s seconds (client timeouts, open-loop drops)
    POST /v1/chat/completions  non-stream JSON, or SSE of 5 data chunks then [DONE]
    POST /stream-error         SSE: one chunk, then an error event
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import msgspec
import pytest
from aiohttp import web


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class BenchServer:
    url: str
    hits: dict[str, int] = field(default_factory=dict)
    active: int = 0  # requests inside /slow now
    max_active: int = 0


def _sse(chunk: bytes) -> bytes:
    return b"data: " + chunk + b"\n\n"


def make_app(server: BenchServer) -> web.Application:
    def count(request: web.Request) -> int:
        n = server.hits.get(request.path, 0) + 1
        server.hits[request.path] = n
        return n

    async def embeddings(request: web.Request) -> web.Response:
        count(request)
        body = msgspec.json.decode(await request.read())
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        data = [{"index": i, "embedding": [0.5, 0.5]} for i in range(len(texts))]
        return web.Response(
            body=msgspec.json.encode({"object": "list", "data": data}),
            content_type="application/json",
        )

    async def flaky(request: web.Request) -> web.Response:
        if count(request) % 3 == 0:
            return web.json_response({"error": {"message": "busy"}}, status=503)
        return web.json_response({"ok": True})

    async def slow(request: web.Request) -> web.Response:
        count(request)
        server.active += 1
        server.max_active = max(server.max_active, server.active)
        try:
            await asyncio.sleep(float(request.query.get("s", "5")))
        finally:
            server.active -= 1
        return web.json_response({"ok": True})

    async def chat(request: web.Request) -> web.StreamResponse:
        count(request)
        body = msgspec.json.decode(await request.read())
        if not body.get("stream"):
            return web.json_response({"choices": [{"message": {"content": "hello"}}]})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for _ in range(5):
            await resp.write(_sse(b'{"choices":[{"delta":{"content":"x"}}]}'))
        await resp.write(_sse(b"[DONE]"))
        return resp

    async def stream_error(request: web.Request) -> web.StreamResponse:
        count(request)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(_sse(b'{"choices":[{"delta":{"content":"x"}}]}'))
        await resp.write(b"event: error\n" + _sse(b'{"error":{"message":"backend died"}}'))
        return resp

    app = web.Application()
    app.router.add_post("/v1/embeddings", embeddings)
    app.router.add_post("/flaky", flaky)
    app.router.add_post("/slow", slow)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/stream-error", stream_error)
    return app


@pytest.fixture
async def server() -> AsyncIterator[BenchServer]:
    srv = BenchServer(url="")
    runner = web.AppRunner(make_app(srv), shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    srv.url = f"http://127.0.0.1:{port}"
    try:
        yield srv
    finally:
        await runner.cleanup()


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port
