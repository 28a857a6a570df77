"""Small, controllable OpenAI-compatible backends on 127.0.0.1 for upstream tests.

Each :class:`FakeBackend` answers ``/v1/chat/completions``, ``/v1/completions`` and
``/v1/embeddings`` (JSON or SSE) with its own name in the body, records what it received, and
notices when a client goes away (its handlers are cancelled on disconnect). Knobs: ``hold``
(keep requests in flight until set), ``sick`` (``/health`` → 503), ``status`` (answer every
request with that status), ``die_after`` (abort the connection after N stream chunks),
``chunk_delay`` (seconds between stream chunks).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
from aiohttp import web
from multidict import CIMultiDict


@dataclass
class FakeBackend:
    name: str
    url: str = ""
    hold: asyncio.Event | None = None
    sick: bool = False
    status: int | None = None
    status_body: bytes = b'{"error": {"message": "busy"}}'
    die_after: int | None = None
    chunks: int = 3
    chunk_delay: float = 0.0
    hold_after_first: asyncio.Event | None = None
    written: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[CIMultiDict[str]] = field(default_factory=list)
    in_flight: int = 0
    cancelled: int = 0
    completed: int = 0
    probes: int = 0
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    gone: asyncio.Event = field(default_factory=asyncio.Event)
    runner: web.AppRunner | None = None
    port: int = 0

    # --- handlers --------------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        self.probes += 1
        return web.json_response({"ok": not self.sick}, status=503 if self.sick else 200)

    async def generate(self, request: web.Request) -> web.StreamResponse:
        body = msgspec.json.decode(await request.read())
        self.requests.append(body)
        self.headers.append(request.headers.copy())
        self.in_flight += 1
        self.entered.set()
        try:
            if self.status is not None:
                return web.Response(
                    status=self.status, body=self.status_body, content_type="application/json"
                )
            if self.hold is not None:
                await self.hold.wait()
            if body.get("flood"):
                return await self._flood(request, int(body["flood"]))
            if body.get("stream"):
                return await self._stream(request, body)
            return web.json_response(self._completion(request.path, body))
        except asyncio.CancelledError:
            self.cancelled += 1
            self.gone.set()
            raise
        finally:
            self.in_flight -= 1

    def _completion(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path.endswith("embeddings"):
            return {
                "object": "list",
                "model": body.get("model"),
                "data": [{"object": "embedding", "index": 0, "embedding": [0.5, 0.5]}],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        self.completed += 1
        if path.endswith("chat/completions"):
            return {
                "id": "c-" + self.name,
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": self.name},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        return {
            "id": "c-" + self.name,
            "object": "text_completion",
            "created": 0,
            "model": body.get("model"),
            "choices": [{"index": 0, "text": self.name, "finish_reason": "stop"}],
        }

    async def _stream(self, request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i in range(self.chunks):
            if self.die_after is not None and i >= self.die_after:
                assert request.transport is not None
                request.transport.abort()
                return response
            chunk = {
                "id": "c-" + self.name,
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": f"{self.name}:{i} "},
                        "finish_reason": None,
                    }
                ],
            }
            await response.write(b"data: " + msgspec.json.encode(chunk) + b"\n\n")
            if i == 0 and self.hold_after_first is not None:
                await self.hold_after_first.wait()
            if self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
        await response.write(b"data: [DONE]\n\n")
        self.completed += 1
        return response

    async def _flood(self, request: web.Request, chunks: int) -> web.StreamResponse:
        """``chunks`` SSE events of 64 KiB, written as fast as the reader allows."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        event = b"data: " + b"x" * (65536 - 8) + b"\n\n"
        for _ in range(chunks):
            await response.write(event)
            self.written += len(event)
        self.completed += 1
        return response

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self, port: int = 0) -> None:
        app = web.Application()
        app.router.add_get("/health", self.health)
        app.router.add_post("/v1/{tail:.+}", self.generate)
        self.runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", port, reuse_address=True)
        await site.start()
        self.port = self.runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{self.port}"

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None


@contextlib.asynccontextmanager
async def fake_backends(*names: str) -> AsyncIterator[list[FakeBackend]]:
    backends = [FakeBackend(n) for n in names]
    try:
        for b in backends:
            await b.start()
        yield backends
    finally:
        for b in backends:
            if b.hold is not None:
                b.hold.set()
            await b.stop()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pool_settings(*backends: FakeBackend | str, **kw: Any) -> Any:
    """An ``UpstreamModelSettings`` named ``llm`` over ``backends`` with fast health probes."""
    from sluiceway.config.upstream import BackendSettings, HealthSettings, UpstreamModelSettings

    urls = [b if isinstance(b, str) else b.url for b in backends]
    kw.setdefault("health", HealthSettings(interval_s=0.1, timeout_s=0.5))
    return UpstreamModelSettings(id="llm", backends=tuple(BackendSettings(u) for u in urls), **kw)


def gateway_backends(gw: Any, model: str = "llm") -> list[dict[str, Any]]:
    """The gateway's view of the pool's backends (admin statistics)."""
    upstream = gw.registry.upstream(model)
    assert upstream is not None
    return list(upstream.statistics()["backends"])


async def until(predicate: Any, within: float = 8.0) -> None:
    """Wait until ``predicate()`` is true (behaviour, not speed: generous limit)."""
    async with asyncio.timeout(within):
        while not predicate():  # noqa: ASYNC110 - polling state owned by other objects
            await asyncio.sleep(0.02)


async def settled(gw: Any, model: str = "llm") -> None:
    """Every backend's in-flight count is back to zero."""
    await until(lambda: all(b["in_flight"] == 0 for b in gateway_backends(gw, model)))
