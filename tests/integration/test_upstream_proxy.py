"""The upstream provider end to end: real gateway and backends on 127.0.0.1."""

from __future__ import annotations

import asyncio

import aiohttp
import openai
import pytest
from upstream_backends import FakeBackend, fake_backends, free_port, gateway_backends, settled

from sluiceway.app import Gateway
from sluiceway.config.upstream import BackendSettings, HealthSettings, UpstreamModelSettings
from sluiceway.testing import running_gateway, settings

pytestmark = pytest.mark.anyio


def pool(*backends: FakeBackend | str, **kw: object) -> UpstreamModelSettings:
    urls = [b if isinstance(b, str) else b.url for b in backends]
    kw.setdefault("health", HealthSettings(interval_s=0.1, timeout_s=0.5))
    return UpstreamModelSettings(
        id="llm",
        backends=tuple(BackendSettings(u) for u in urls),
        **kw,  # type: ignore[arg-type]
    )


def client(gw: Gateway) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="k", max_retries=0)


async def test_openai_client_non_stream_and_stream() -> None:
    async with fake_backends("a", "b") as bs:
        gw = Gateway(settings((pool(*bs),)))
        async with running_gateway(gw), client(gw) as c:
            r = await c.chat.completions.create(
                model="llm", messages=[{"role": "user", "content": "hi"}]
            )
            assert r.choices[0].message.content in ("a", "b")
            stream = await c.chat.completions.create(
                model="llm", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            parts = [ch.choices[0].delta.content async for ch in stream]
            assert len(parts) == 3 and all(parts)
            comp = await c.completions.create(model="llm", prompt="once upon a time")
            assert comp.choices[0].text in ("a", "b")
            emb = await c.embeddings.create(model="llm", input="x")
            assert emb.data[0].embedding == [0.5, 0.5]
            models = await c.models.list()
            assert "llm" in [m.id for m in models.data]
        seen = [h for b in bs for h in b.headers]
        assert all("X-Request-Id" in h and h["X-Forwarded-For"] for h in seen)


async def test_connection_refused_fails_over_before_first_byte() -> None:
    async with fake_backends("a") as bs:
        dead = f"http://127.0.0.1:{free_port()}"
        gw = Gateway(settings((pool(dead, bs[0].url, health=HealthSettings(enabled=False)),)))
        async with running_gateway(gw), client(gw) as c:
            for i in range(30):  # some keys rank the dead backend first
                r = await c.chat.completions.create(
                    model="llm", messages=[{"role": "user", "content": f"q{i}"}]
                )
                assert r.choices[0].message.content == "a"
        text = gw.metrics.render().decode()
        assert 'sluiceway_upstream_retries_total{model="llm",reason="connect"}' in text


async def test_no_backend_available_is_503() -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    gw = Gateway(settings((pool(dead, health=HealthSettings(enabled=False)),)))
    async with (
        running_gateway(gw),
        aiohttp.ClientSession() as s,
        s.post(gw.url + "/v1/chat/completions", json={"model": "llm"}) as r,
    ):
        assert r.status == 503
        body = await r.json()
        assert "llm" in body["error"]["message"]


async def test_backend_dies_mid_stream_client_gets_error_event() -> None:
    async with fake_backends("a") as bs:
        bs[0].die_after = 1
        gw = Gateway(settings((pool(*bs),)))
        async with running_gateway(gw), client(gw) as c:
            stream = await c.chat.completions.create(
                model="llm", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            got = []
            with pytest.raises(openai.APIError, match="upstream"):
                async with asyncio.timeout(10):
                    async for ch in stream:
                        got.append(ch.choices[0].delta.content)
            assert got == ["a:0 "]


async def test_timeouts_release_the_backend_on_every_path() -> None:
    async with fake_backends("a") as bs:
        a = bs[0]
        a.hold = asyncio.Event()  # no headers within read_timeout_s
        gw = Gateway(settings((pool(a, read_timeout_s=0.3, max_attempts=1),)))
        async with running_gateway(gw), aiohttp.ClientSession() as s:
            body = {"model": "llm", "messages": [{"role": "user", "content": "x"}]}
            async with s.post(gw.url + "/v1/chat/completions", json=body) as r:
                assert r.status == 503
                assert "timeout" in (await r.json())["error"]["message"]
            a.hold = None
            a.hold_after_first = asyncio.Event()  # silent after the first chunk
            async with s.post(gw.url + "/v1/chat/completions", json={**body, "stream": True}) as r:
                text = await asyncio.wait_for(r.text(), 10)
            assert text.startswith("data: ") and '"error"' in text.splitlines()[-2]
            await settled(gw)
            assert gateway_backends(gw)[0]["failures"] == 2
