"""Overload, disconnect, deadlines, engine failure, a free event loop and draining shutdown.

A real server on 127.0.0.1 with the real tokenizer and a fake engine whose batches can be held
in flight (``gate``), so each scenario is deterministic.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator

import aiohttp
import pytest

from sluiceway.app import Gateway
from sluiceway.config.settings import BatchingSettings, EncoderModelSettings
from sluiceway.testing import (
    MINILM_TOKENIZER,
    FakeEncoder,
    eventually,
    fake_encoder_gateway,
    running_gateway,
)

MODEL = "fake-encoder"


def _model(**batching: int) -> EncoderModelSettings:
    return EncoderModelSettings(
        id=MODEL, tokenizer_file=MINILM_TOKENIZER, batching=BatchingSettings(**batching)
    )


async def _post(
    s: aiohttp.ClientSession, url: str, body: object, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, object], dict[str, str]]:
    async with s.post(url + "/v1/embeddings", json=body, headers=headers) as r:
        return r.status, await r.json(), dict(r.headers)


@contextlib.asynccontextmanager
async def serving(gateway: Gateway) -> AsyncIterator[tuple[str, aiohttp.ClientSession]]:
    async with running_gateway(gateway) as g, aiohttp.ClientSession() as s:
        yield g.url, s


@pytest.mark.anyio
async def test_overload_is_refused_at_once_while_admitted_work_completes() -> None:
    gate = threading.Event()
    engine = FakeEncoder(gate=gate)
    gw = fake_encoder_gateway(engine, model=_model(max_queue_items=4))
    async with serving(gw) as (url, s):
        admitted = [
            asyncio.ensure_future(_post(s, url, {"model": MODEL, "input": f"text {i}"}))
            for i in range(4)
        ]
        await eventually(lambda: engine.threads)  # the first batch is held inside the engine
        status, err, headers = await _post(s, url, {"model": MODEL, "input": "one too many"})
        assert status == 429
        assert err["error"]["type"] == "rate_limit_error"  # type: ignore[index]
        assert int(headers["Retry-After"]) >= 1
        gate.set()
        results = await asyncio.gather(*admitted)
        assert [r[0] for r in results] == [200, 200, 200, 200]
        assert await _post(s, url, {"model": MODEL, "input": "after"}) == (200, *_ANY)


class _Any:
    def __eq__(self, other: object) -> bool:
        return True


_ANY = (_Any(), _Any())


@pytest.mark.anyio
async def test_disconnected_client_work_is_dropped_before_it_runs() -> None:
    gate = threading.Event()
    engine = FakeEncoder(gate=gate)
    gw = fake_encoder_gateway(engine)
    async with serving(gw) as (url, s):
        first = asyncio.ensure_future(_post(s, url, {"model": MODEL, "input": "first"}))
        await eventually(lambda: engine.threads)
        # A second client sends a request and hangs up while it waits in the queue.
        async with aiohttp.ClientSession() as other:
            doomed = asyncio.ensure_future(_post(other, url, {"model": MODEL, "input": "zebra"}))
            await asyncio.sleep(0.3)
            doomed.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await doomed
        await asyncio.sleep(0.3)  # the server notices the closed connection
        gate.set()
        assert (await first)[0] == 200
        status, _, _ = await _post(s, url, {"model": MODEL, "input": "later"})
        assert status == 200
        zebra = 29145  # "zebra" in the MiniLM vocabulary
        assert all(zebra not in row for row in engine.seen_ids)
        async with s.get(url + "/metrics") as r:
            metrics = await r.text()
        assert (
            'sluiceway_dropped_inputs_total{model="fake-encoder",reason="cancelled",stage="queue"} 1.0'
            in metrics
        )


@pytest.mark.anyio
async def test_event_loop_stays_responsive_while_the_engine_is_busy() -> None:
    gate = threading.Event()
    engine = FakeEncoder(gate=gate)
    gw = fake_encoder_gateway(engine)
    async with serving(gw) as (url, s):
        held = asyncio.ensure_future(_post(s, url, {"model": MODEL, "input": "busy"}))
        await eventually(lambda: engine.threads)
        for _ in range(5):
            async with s.get(url + "/health") as r:
                assert r.status == 200
            async with s.get(url + "/v1/models") as r:
                assert r.status == 200
        assert not held.done()
        gate.set()
        assert (await held)[0] == 200


@pytest.mark.anyio
async def test_deadline_passes_while_queued_gives_504_and_never_runs() -> None:
    gate = threading.Event()
    engine = FakeEncoder(gate=gate)
    gw = fake_encoder_gateway(engine)
    async with serving(gw) as (url, s):
        held = asyncio.ensure_future(_post(s, url, {"model": MODEL, "input": "first"}))
        await eventually(lambda: engine.threads)
        status, err, _ = await _post(
            s, url, {"model": MODEL, "input": "zebra"}, headers={"X-Request-Timeout": "0.2"}
        )
        assert status == 504 and err["error"]["type"] == "timeout_error"  # type: ignore[index]
        gate.set()
        assert (await held)[0] == 200
        await _post(s, url, {"model": MODEL, "input": "after"})
        assert all(29145 not in row for row in engine.seen_ids)


@pytest.mark.anyio
async def test_engine_failure_fails_only_its_batch_and_the_server_keeps_serving() -> None:
    engine = FakeEncoder(fail_on=29145)
    gw = fake_encoder_gateway(engine)
    async with serving(gw) as (url, s):
        status, err, _ = await _post(s, url, {"model": MODEL, "input": ["fine", "zebra"]})
        assert status == 500 and err["error"]["code"] == "engine_error"  # type: ignore[index]
        status, body, _ = await _post(s, url, {"model": MODEL, "input": ["fine", "horse"]})
        assert status == 200 and len(body["data"]) == 2  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_api_keys_are_enforced() -> None:
    gw = fake_encoder_gateway(FakeEncoder(), api_keys=("k1",))
    async with serving(gw) as (url, s):
        status, err, _ = await _post(s, url, {"model": MODEL, "input": "x"})
        assert status == 401 and err["error"]["type"] == "authentication_error"  # type: ignore[index]
        auth = {"Authorization": "Bearer k1"}
        assert (await _post(s, url, {"model": MODEL, "input": "x"}, headers=auth))[0] == 200


@pytest.mark.anyio
async def test_shutdown_refuses_new_work_and_drains_admitted_work() -> None:
    gate = threading.Event()
    engine = FakeEncoder(gate=gate)
    gw = fake_encoder_gateway(engine)
    stop = asyncio.Event()
    server = asyncio.ensure_future(_serve_until(gw, stop))
    await eventually(lambda: gw.api.ready)
    async with aiohttp.ClientSession() as s:
        held = asyncio.ensure_future(_post(s, gw.url, {"model": MODEL, "input": "in flight"}))
        await eventually(lambda: engine.threads)
        stop.set()  # SIGTERM equivalent: leave the serving block
        await eventually(lambda: gw.api.draining)
        async with s.get(gw.url + "/ready") as r:
            assert r.status == 503
        async with aiohttp.ClientSession() as fresh:
            status, err, _ = await _post(fresh, gw.url, {"model": MODEL, "input": "late"})
        assert status == 503 and err["error"]["type"] == "service_unavailable"  # type: ignore[index]
        gate.set()
        status, body, _ = await held
        assert status == 200 and len(body["data"]) == 1  # type: ignore[arg-type]
    await server


@pytest.mark.anyio
async def test_work_still_running_when_the_grace_period_ends_gets_a_503() -> None:
    gate = threading.Event()
    engine = FakeEncoder(gate=gate)
    gw = fake_encoder_gateway(engine, shutdown_grace_s=0.3)
    stop = asyncio.Event()
    server = asyncio.ensure_future(_serve_until(gw, stop))
    await eventually(lambda: gw.api.ready)
    try:
        async with aiohttp.ClientSession() as s:
            held = asyncio.ensure_future(_post(s, gw.url, {"model": MODEL, "input": "stuck"}))
            await eventually(lambda: engine.threads)
            stop.set()
            status, err, _ = await held
            assert status == 503 and "shut down" in err["error"]["message"]  # type: ignore[index]
        await server
    finally:
        gate.set()


@pytest.mark.anyio
async def test_ready_is_503_while_models_load_and_health_is_200() -> None:
    from sluiceway.app import Gateway
    from sluiceway.clock import SystemClock
    from sluiceway.observability.metrics import Metrics
    from sluiceway.providers.base import ServiceContext
    from sluiceway.providers.encoder import EncoderService
    from sluiceway.providers.registry import Registry
    from sluiceway.testing import fake_loader, settings

    loaded = threading.Event()
    inner = fake_loader(FakeEncoder())

    def slow_loader(model: EncoderModelSettings):  # type: ignore[no-untyped-def]
        loaded.wait(30)
        return inner(model)

    model = _model()
    s = settings((model,))
    metrics, clock = Metrics(), SystemClock()
    registry = Registry()
    registry.add_embedder(
        EncoderService(model, ServiceContext(metrics, clock, s.server), slow_loader)
    )
    gw = Gateway(s, clock=clock, metrics=metrics, registry=registry)
    stop = asyncio.Event()
    serving_task = asyncio.ensure_future(_serve_until(gw, stop))
    try:
        await eventually(lambda: gw.url)
        async with aiohttp.ClientSession() as c:
            async with c.get(gw.url + "/health") as r:
                assert r.status == 200
            async with c.get(gw.url + "/ready") as r:
                assert r.status == 503
            status, _, _ = await _post(c, gw.url, {"model": MODEL, "input": "early"})
            assert status == 503
            loaded.set()
            await eventually(lambda: gw.api.ready)
            async with c.get(gw.url + "/ready") as r:
                assert r.status == 200
            assert (await _post(c, gw.url, {"model": MODEL, "input": "now"}))[0] == 200
    finally:
        loaded.set()
        stop.set()
        await serving_task


async def _serve_until(gw: Gateway, stop: asyncio.Event) -> None:
    """Serve in the background until ``stop`` is set (the SIGTERM path of ``serve``)."""
    async with running_gateway(gw):
        await stop.wait()
