"""The admin API: bearer admin key, list / add / drain / remove backends at run time."""

from __future__ import annotations

import aiohttp
import pytest

from sluiceway.app import Gateway
from sluiceway.config.upstream import BackendSettings, HealthSettings, UpstreamModelSettings
from sluiceway.testing import running_gateway, settings

pytestmark = pytest.mark.anyio

POOL = UpstreamModelSettings(
    id="llm",
    backends=(BackendSettings("http://127.0.0.1:9"), BackendSettings("http://127.0.0.1:10")),
    health=HealthSettings(enabled=False),
)
AUTH = {"Authorization": "Bearer s3cret"}


async def test_admin_api_manages_backends() -> None:
    gw = Gateway(settings((POOL,), admin_key="s3cret"))
    async with running_gateway(gw), aiohttp.ClientSession(base_url=gw.url) as s:
        async with s.get("/admin/backends") as r:
            assert r.status == 401
        async with s.get("/admin/backends", headers={"Authorization": "Bearer nope"}) as r:
            assert r.status == 401
        async with s.get("/admin/backends", headers=AUTH) as r:
            assert r.status == 200
            pools = (await r.json())["pools"]
            assert [b["url"] for b in pools[0]["backends"]] == [
                "http://127.0.0.1:9",
                "http://127.0.0.1:10",
            ]
            first = pools[0]["backends"][0]
            assert {"healthy", "draining", "in_flight", "weight", "breaker"} <= set(first)

        new = {"model": "llm", "url": "http://127.0.0.1:11", "weight": 3}
        async with s.post("/admin/backends", json=new, headers=AUTH) as r:
            assert r.status == 201
            assert (await r.json())["backends"][-1]["weight"] == 3
        async with s.post("/admin/backends", json=new, headers=AUTH) as r:
            assert r.status == 400  # already there

        drain = {"model": "llm", "url": "http://127.0.0.1:11"}
        async with s.post("/admin/backends/drain", json=drain, headers=AUTH) as r:
            assert r.status == 200
            assert (await r.json())["backends"][-1]["draining"] is True
        async with s.delete("/admin/backends", json=drain, headers=AUTH) as r:
            assert r.status == 200
            assert len((await r.json())["backends"]) == 2

        async with s.delete("/admin/backends", json=drain, headers=AUTH) as r:
            assert r.status == 404
        bad = {"model": "llm", "url": "ftp://x"}
        async with s.post("/admin/backends", json=bad, headers=AUTH) as r:
            assert r.status == 400
        other = {"model": "nope", "url": "http://127.0.0.1:12"}
        async with s.post("/admin/backends", json=other, headers=AUTH) as r:
            assert r.status == 404
        for url in ("http://127.0.0.1:9", "http://127.0.0.1:10"):
            async with s.delete("/admin/backends", json={"model": "llm", "url": url}) as r:
                assert r.status == 401
        await s.delete("/admin/backends", json={"model": "llm", "url": "http://127.0.0.1:9"},
                       headers=AUTH)  # fmt: skip
        last = {"model": "llm", "url": "http://127.0.0.1:10"}
        async with s.delete("/admin/backends", json=last, headers=AUTH) as r:
            assert r.status == 400  # a pool keeps at least one backend


async def test_admin_api_is_off_without_a_key() -> None:
    gw = Gateway(settings((POOL,)))
    async with (
        running_gateway(gw),
        aiohttp.ClientSession(base_url=gw.url) as s,
        s.get("/admin/backends", headers=AUTH) as r,
    ):
        assert r.status == 404
