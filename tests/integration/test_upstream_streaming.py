"""Streaming through the gateway with real sockets: no buffering, backpressure, disconnects."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from upstream_backends import fake_backends, gateway_backends, pool_settings, settled, until

from sluiceway.app import Gateway
from sluiceway.testing import running_gateway, settings

pytestmark = pytest.mark.anyio

CHAT = {"model": "llm", "messages": [{"role": "user", "content": "hi"}]}


async def test_first_chunk_arrives_while_the_backend_still_generates() -> None:
    async with fake_backends("a") as bs:
        a = bs[0]
        a.hold_after_first = asyncio.Event()
        gw = Gateway(settings((pool_settings(a),)))
        async with running_gateway(gw), aiohttp.ClientSession() as s:
            async with s.post(gw.url + "/v1/chat/completions", json={**CHAT, "stream": True}) as r:
                assert r.status == 200
                assert r.headers["Content-Type"].startswith("text/event-stream")
                first = await asyncio.wait_for(r.content.readuntil(b"\n\n"), 5)
                assert b"a:0" in first  # passed through while the backend is held
                a.hold_after_first.set()
                rest = await r.read()
                assert rest.endswith(b"data: [DONE]\n\n")
            await settled(gw)


async def test_a_slow_client_slows_the_upstream_instead_of_buffering() -> None:
    chunks = 1024  # 64 MiB offered by the backend
    async with fake_backends("a") as bs:
        a = bs[0]
        gw = Gateway(settings((pool_settings(a),)))
        async with running_gateway(gw), aiohttp.ClientSession() as s:
            async with s.post(gw.url + "/v1/chat/completions", json={**CHAT, "flood": chunks}) as r:
                await r.content.readany()
                # Stop reading. The backend must stall once the socket/reader buffers are full.
                last = -1
                while a.written != last:
                    last = a.written
                    await asyncio.sleep(0.3)
                assert a.written < chunks * 65536 // 2
                assert a.completed == 0
                total = 0
                async for data in r.content.iter_any():
                    total += len(data)
            assert a.completed == 1
            await settled(gw)


@pytest.mark.parametrize("stream", [True, False])
async def test_client_disconnect_before_first_token_cancels_upstream(stream: bool) -> None:
    async with fake_backends("a") as bs:
        a = bs[0]
        a.hold = asyncio.Event()  # never set: the backend is "prefilling"
        gw = Gateway(settings((pool_settings(a),)))
        async with running_gateway(gw), aiohttp.ClientSession() as s:
            body = {**CHAT, "stream": stream}
            task = asyncio.ensure_future(s.post(gw.url + "/v1/chat/completions", json=body))
            await until(a.entered.is_set)
            task.cancel()  # the client goes away
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.wait_for(a.gone.wait(), 8)
            assert a.cancelled == 1
            await settled(gw)
            assert gateway_backends(gw)[0]["breaker"]["consecutive_failures"] == 0


async def test_client_disconnect_mid_stream_cancels_upstream() -> None:
    async with fake_backends("a") as bs:
        a = bs[0]
        a.chunks = 1000
        a.chunk_delay = 0.02
        gw = Gateway(settings((pool_settings(a),)))
        async with running_gateway(gw), aiohttp.ClientSession() as s:
            r = await s.post(gw.url + "/v1/chat/completions", json={**CHAT, "stream": True})
            first = await r.content.readuntil(b"\n\n")
            assert b"a:0" in first
            r.close()  # drop the connection mid-stream
            await asyncio.wait_for(a.gone.wait(), 8)
            assert a.completed == 0
            await settled(gw)
