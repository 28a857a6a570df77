"""Routing through a real gateway: affinity, bounded load, replicas agree, health, accounting."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from typing import Any

import aiohttp
import pytest
from upstream_backends import (
    FakeBackend,
    fake_backends,
    free_port,
    gateway_backends,
    pool_settings,
    settled,
    until,
)

from sluiceway.app import Gateway
from sluiceway.config.upstream import HealthSettings
from sluiceway.testing import running_gateway, settings

pytestmark = pytest.mark.anyio


def conversation(topic: int, turns: int) -> dict[str, Any]:
    messages: list[dict[str, str]] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": f"tell me about topic {topic}"},
    ]
    for t in range(1, turns):
        messages += [
            {"role": "assistant", "content": f"answer {t}"},
            {"role": "user", "content": f"follow-up {t}"},
        ]
    return {"model": "llm", "messages": messages}


async def chat(s: aiohttp.ClientSession, gw: Gateway, body: dict[str, Any], **kw: Any) -> str:
    async with s.post(gw.url + "/v1/chat/completions", json=body, **kw) as r:
        assert r.status == 200, await r.text()
        data = await r.json()
        return str(data["choices"][0]["message"]["content"])


async def test_every_turn_of_a_conversation_hits_the_same_backend() -> None:
    async with fake_backends("a", "b", "c") as bs:
        gw = Gateway(settings((pool_settings(*bs),)))
        async with running_gateway(gw), aiohttp.ClientSession() as s:
            owners: dict[int, set[str]] = {}
            for topic in range(12):
                for turns in (1, 2, 3):
                    owner = await chat(s, gw, conversation(topic, turns))
                    owners.setdefault(topic, set()).add(owner)
            assert all(len(o) == 1 for o in owners.values())
            assert len({next(iter(o)) for o in owners.values()}) >= 2  # keys spread
            # the session header overrides the prompt
            pinned = {
                await chat(s, gw, conversation(t, 1), headers={"X-Session-Id": "u1"})
                for t in range(6)
            }
            assert len(pinned) == 1
            await settled(gw)
        text = gw.metrics.render().decode()
        assert 'sluiceway_routing_decisions_total{model="llm",outcome="affinity"}' in text


async def test_two_gateways_with_the_same_config_agree() -> None:
    async with fake_backends("a", "b", "c") as bs:
        cfg = settings((pool_settings(*bs),))
        one, two = Gateway(cfg), Gateway(cfg)
        async with running_gateway(one), running_gateway(two), aiohttp.ClientSession() as s:
            for topic in range(15):
                body = conversation(topic, 1)
                assert await chat(s, one, body) == await chat(s, two, body)


async def test_a_hot_key_is_bounded_not_herded() -> None:
    async with fake_backends("a", "b", "c") as bs:
        hold = asyncio.Event()
        for b in bs:
            b.hold = hold
        gw = Gateway(settings((pool_settings(*bs),)))
        n = 30
        async with running_gateway(gw), aiohttp.ClientSession() as s:
            tasks = [asyncio.ensure_future(chat(s, gw, conversation(7, 1))) for _ in range(n)]
            try:
                await until(lambda: sum(b.in_flight for b in bs) == n)
                loads = [b.in_flight for b in bs]
                assert max(loads) <= math.ceil(1.25 * n / 3)
                seen = [b["in_flight"] for b in gateway_backends(gw)]
                assert seen == loads  # the gateway's counts match reality
            finally:
                hold.set()
                await asyncio.gather(*tasks)
            await settled(gw)
        text = gw.metrics.render().decode()
        assert 'outcome="bounded"' in text


async def test_no_key_spreads_by_least_connections() -> None:
    async with fake_backends("a", "b") as bs:
        hold = asyncio.Event()
        for b in bs:
            b.hold = hold
        gw = Gateway(settings((pool_settings(*bs),)))
        async with running_gateway(gw), aiohttp.ClientSession() as s:

            async def embed() -> None:
                async with s.post(gw.url + "/v1/embeddings", json={"model": "llm"}) as r:
                    assert r.status == 200

            tasks = [asyncio.ensure_future(embed()) for _ in range(10)]
            try:
                await until(lambda: sum(b.in_flight for b in bs) == 10)
                assert [b.in_flight for b in bs] == [5, 5]
            finally:
                hold.set()
                await asyncio.gather(*tasks)
            await settled(gw)


async def test_a_dead_backend_is_ejected_and_readmitted() -> None:
    # (A backend stopped while probes hit it races with aiohttp's listener shutdown in the
    # fake, so "dead" here is a port nobody listens on yet.)
    async with fake_backends("b") as bs:
        b = bs[0]
        a = FakeBackend("a")
        port = free_port()
        a_url = f"http://127.0.0.1:{port}"
        health = HealthSettings(interval_s=0.05, timeout_s=0.5, healthy_threshold=2)
        gw = Gateway(settings((pool_settings(a_url, b, health=health),)))
        try:
            async with running_gateway(gw), aiohttp.ClientSession() as s:

                def healthy() -> bool:
                    return bool(gateway_backends(gw)[0]["healthy"])

                await until(lambda: not healthy())  # TCP connect fails: ejected
                for topic in range(8):
                    assert await chat(s, gw, conversation(topic, 1)) == "b"
                await a.start(port)
                await until(healthy)
                a.sick = True  # HTTP /health answers 503
                await until(lambda: not healthy())
                a.sick = False
                await until(healthy)
                owners = Counter([await chat(s, gw, conversation(t, 1)) for t in range(20)])
                assert owners["a"] > 0
                await settled(gw)
        finally:
            await a.stop()
        text = gw.metrics.render().decode()
        assert 'sluiceway_backend_up{backend="127.0.0.1:' in text


async def test_retryable_status_fails_over_and_oom_trips_the_breaker() -> None:
    async with fake_backends("a", "b") as bs:
        a, b = bs
        a.status = 503
        a.status_body = b'{"error": {"message": "CUDA out of memory"}}'
        from sluiceway.config.upstream import BreakerSettings

        gw = Gateway(
            settings(
                (
                    pool_settings(
                        a,
                        b,
                        health=HealthSettings(enabled=False),
                        breaker=BreakerSettings(failure_threshold=2, open_s=60),
                    ),
                )
            )
        )
        async with running_gateway(gw), aiohttp.ClientSession() as s:
            t = 0
            while len(a.requests) < 2 and t < 200:  # conversations whose key lands on a
                assert await chat(s, gw, conversation(t, 1)) == "b"
                t += 1
            state = next(x for x in gateway_backends(gw) if x["url"] == a.url)
            assert state["breaker"]["state"] == "open"
            for t in range(200, 220):
                assert await chat(s, gw, conversation(t, 1)) == "b"
            assert len(a.requests) == 2  # once open, a gets no more traffic
            b.status = 503  # every backend refuses: the last 503 is passed through
            async with s.post(gw.url + "/v1/chat/completions", json=conversation(1, 1)) as r:
                assert r.status == 503
            await settled(gw)
