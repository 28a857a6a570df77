"""Server-sent events in the OpenAI framing: ``data: <json>\\n\\n`` frames, then ``data: [DONE]``.

A failure after the first byte cannot change the status code any more, so it is sent as one
``data: {"error": {...}}`` frame (the OpenAI clients raise it) and the stream ends without
``[DONE]``. Writes wait while the client's socket buffer is full: a slow client slows only
its own producer.
"""

from __future__ import annotations

from aiohttp import web

from sluiceway.errors import SluicewayError

DONE = b"data: [DONE]\n\n"


class EventStream:
    """One SSE response. :meth:`open` sends the headers; nothing is sent before it."""

    __slots__ = ("_request", "_response", "frames")

    def __init__(self, request: web.Request) -> None:
        self._request = request
        self._response = web.StreamResponse(
            status=200,
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            },
        )
        self.frames = 0

    @property
    def response(self) -> web.StreamResponse:
        return self._response

    @property
    def opened(self) -> bool:
        return self._response.prepared

    async def open(self) -> None:
        await self._response.prepare(self._request)

    async def send(self, payload: bytes) -> None:
        """One ``data:`` frame holding ``payload`` (a JSON document without newlines)."""
        self.frames += 1
        await self._response.write(b"data: " + payload + b"\n\n")

    async def done(self) -> None:
        await self._response.write(DONE)
        await self._response.write_eof()

    async def fail(self, error: SluicewayError) -> None:
        """Report ``error`` in-band and end the stream (no ``[DONE]``)."""
        await self.send(error.encode())
        await self._response.write_eof()

    def __repr__(self) -> str:
        return f"EventStream(opened={self.opened}, frames={self.frames})"
