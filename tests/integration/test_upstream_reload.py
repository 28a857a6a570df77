"""Hot reload of a pool from a watched TOML file, with a stream in flight."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from upstream_backends import fake_backends, gateway_backends, settled, until

from sluiceway.app import Gateway
from sluiceway.config import load_settings

pytestmark = pytest.mark.anyio


def write_config(path: Path, *urls: str, weight: int = 1) -> None:
    backends = ", ".join(f'{{ url = "{u}", weight = {weight} }}' for u in urls)
    path.write_text(
        f"""
[server]
port = 0
shutdown_grace_s = 5.0

[[models]]
engine = "upstream"
id = "llm"
backends = [{backends}]
[models.health]
interval_s = 0.1
"""
    )


async def test_reload_swaps_the_pool_and_keeps_streams_and_state(tmp_path: Path) -> None:
    path = tmp_path / "sluiceway.toml"
    async with fake_backends("a", "b", "c") as bs:
        a, b, c = bs
        write_config(path, a.url, c.url)
        gw = Gateway(load_settings(path, env={}))
        async with gw.running(host="127.0.0.1", port=0), aiohttp.ClientSession() as s:
            assert gw.watcher is not None
            url = gw.url + "/v1/chat/completions"
            c_backend = gw.registry.upstream("llm").pool.find(c.url)  # type: ignore[union-attr]
            # A stream in flight on a: pin it with a session key owned by a.
            a.hold_after_first = asyncio.Event()
            key = ""
            for i in range(200):
                if await owner(s, url, f"s{i}") == "a":
                    key = f"s{i}"
                    break
            stream = await s.post(
                url,
                json={"model": "llm", "stream": True, "messages": []},
                headers={"X-Session-Id": key},
            )
            assert b"a:0" in await stream.content.readuntil(b"\n\n")

            write_config(path, b.url, c.url)  # a leaves, b joins, c stays
            await until(lambda: gw.watcher is not None and gw.watcher.applied == 1)
            urls = [x["url"] for x in gateway_backends(gw)]
            assert urls == [b.url, c.url]
            assert gw.registry.upstream("llm").pool.find(c.url) is c_backend  # type: ignore[union-attr]
            assert {await owner(s, url, f"k{i}") for i in range(20)} == {"b", "c"}

            a.hold_after_first.set()  # the old stream finishes on its old backend
            rest = await stream.read()
            assert rest.endswith(b"data: [DONE]\n\n") and b"a:2" in rest
            stream.release()
            assert a.completed >= 1

            path.write_text(path.read_text().replace("weight = 1", "weight = 0"))
            await until(lambda: gw.watcher is not None and gw.watcher.rejected == 1)
            assert [x["url"] for x in gateway_backends(gw)] == [b.url, c.url]
            path.write_text("this is [not toml")
            await until(lambda: gw.watcher is not None and gw.watcher.rejected == 2)
            assert await owner(s, url, "x") in ("b", "c")
            await settled(gw)
        text = gw.metrics.render().decode()
        assert 'sluiceway_config_reloads_total{result="applied"} 1.0' in text
        assert 'sluiceway_config_reloads_total{result="rejected"} 2.0' in text


async def owner(s: aiohttp.ClientSession, url: str, key: str) -> str:
    body = {"model": "llm", "messages": [{"role": "user", "content": "q"}]}
    async with s.post(url, json=body, headers={"X-Session-Id": key}) as r:
        assert r.status == 200
        return str((await r.json())["choices"][0]["message"]["content"])
