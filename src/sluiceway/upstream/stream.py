"""Pass an upstream body (SSE or not) through to the client, chunk by chunk, never buffering.

Backpressure without a queue: each chunk is read from the upstream and then awaited into the
client's transport before the next read. ``write`` waits while the client's socket buffer is
above its high-water mark, so a slow client stops our reads; aiohttp's reader then stops
reading the upstream socket once its ``read_bufsize`` buffer is full, and TCP flow control
slows the backend. Memory per stream is bounded by those two buffers, with no extra task and
no hand-off latency (a bounded asyncio.Queue between a reader task and a writer would give the
same bound at the cost of a task and a context switch per chunk).

A backend that breaks mid-stream (reset, truncated chunked body, read timeout) ends the client
stream with one SSE error event — ``data: {"error": {...}}`` — and a clean end, never a hang.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

import aiohttp
import msgspec

from sluiceway.errors import UpstreamError
from sluiceway.upstream.client import Exchange

log = logging.getLogger(__name__)


class Sink(Protocol):
    """Where the body goes (an aiohttp ``StreamResponse``)."""

    async def write(self, data: bytes) -> None: ...


def error_event(message: str, code: str = "upstream_disconnected") -> bytes:
    """An SSE event carrying an OpenAI-shaped error."""
    err = UpstreamError(message, code=code)
    return b"data: " + msgspec.json.encode(err.body()) + b"\n\n"


async def pump(ex: Exchange, sink: Sink) -> None:
    """Copy the body of ``ex`` into ``sink``; on an upstream failure, send an error event.

    Errors writing to the client (disconnect) propagate; the caller's ``exchange`` then closes
    the upstream connection.
    """
    content = ex.response.content
    last = b"\n\n"
    if ex.head:
        ex.first_byte = time.perf_counter()
        await sink.write(ex.head)
        last = ex.head
    while True:
        try:
            chunk = await content.readany()
        except (aiohttp.ClientError, TimeoutError) as e:
            ex.fail()
            log.info("upstream %s broke mid-stream: %r", ex.backend.name, e)
            what = "timed out" if isinstance(e, TimeoutError) else "closed the connection"
            event = error_event(f"the upstream backend {what} in the middle of the response")
            await sink.write(event if last.endswith(b"\n\n") else b"\n\n" + event)
            return
        if not chunk:
            ex.done()
            return
        if not ex.first_byte:
            ex.first_byte = time.perf_counter()
        await sink.write(chunk)
        last = chunk


async def read_all(ex: Exchange) -> bytes:
    """The whole (non-streamed) body, or :class:`UpstreamError` if the backend breaks."""
    try:
        rest = await ex.response.read()
    except (aiohttp.ClientError, TimeoutError) as e:
        ex.fail()
        raise UpstreamError(
            f"the upstream backend {ex.backend.name} failed while sending its response: {e!r}"
        ) from None
    ex.done()
    return ex.head + rest if ex.head else rest
