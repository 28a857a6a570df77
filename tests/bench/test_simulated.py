"""The simulated backend fleet as a real server on 127.0.0.1: cache, queueing, streams, faults."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import msgspec
import pytest

from sluiceway.bench.simulated import SimulatedFleet, main
from sluiceway.bench.simulated_engine import EngineSettings, Fault
from sluiceway.errors import InvalidRequest

FAST = EngineSettings(
    prefill_us_per_token=0, overhead_ms=0, decode_tps=0, cache_blocks=64, block_tokens=4
)
SYSTEM = " ".join(f"sys{i}" for i in range(40))


def chat_body(user: str, *, system: str = SYSTEM, **extra: Any) -> dict[str, Any]:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    return {"model": "sim", "messages": messages, "max_tokens": 4, **extra}


@pytest.fixture
async def fleet() -> AsyncIterator[SimulatedFleet]:
    async with SimulatedFleet(FAST, backends=2) as f:
        yield f


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
        yield s


async def post(session: aiohttp.ClientSession, url: str, body: object) -> tuple[int, Any]:
    async with session.post(url, data=msgspec.json.encode(body)) as resp:
        return resp.status, msgspec.json.decode(await resp.read())


async def sse_events(resp: aiohttp.ClientResponse) -> list[bytes]:
    return [line[5:].strip() async for line in resp.content if line.startswith(b"data:")]


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


@pytest.mark.anyio
async def test_repeated_prefix_is_reported_as_cached(
    fleet: SimulatedFleet, session: aiohttp.ClientSession
) -> None:
    url = fleet.backends[0].url + "/v1/chat/completions"
    status, first = await post(session, url, chat_body("first question here"))
    assert status == 200
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    status, second = await post(session, url, chat_body("another question"))
    usage = second["usage"]
    # "<|system|>" + 40 words = 41 tokens shared: 10 full blocks of 4.
    assert usage["prompt_tokens_details"]["cached_tokens"] == 40
    assert usage["prompt_tokens"] == 41 + 1 + 2
    assert second["choices"][0]["message"]["role"] == "assistant"
    assert second["choices"][0]["finish_reason"] == "length"
    # The other backend has its own cache.
    _, third = await post(session, fleet.backends[1].url + "/v1/chat/completions", chat_body("q"))
    assert third["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    stats = fleet.backends[0].engine.statistics()
    assert stats["cached_tokens"] == 40
    assert stats["prompt_tokens"] == first["usage"]["prompt_tokens"] + usage["prompt_tokens"]
    assert stats["prefill_tokens"] == stats["prompt_tokens"] - 40


@pytest.mark.anyio
async def test_completions_prompt_and_multi_turn_extend_the_cache(
    fleet: SimulatedFleet, session: aiohttp.ClientSession
) -> None:
    url = fleet.backends[0].url + "/v1/completions"
    prompt = " ".join(f"w{i}" for i in range(33))
    _, first = await post(session, url, {"model": "m", "prompt": prompt, "max_tokens": 3})
    assert first["object"] == "text_completion"
    assert first["choices"][0]["text"] == "the model says"
    _, again = await post(session, url, {"model": "m", "prompt": prompt + " more", "max_tokens": 3})
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == 32
    # Chat: turn 2 repeats turn 1 and adds to it, so turn 1's full blocks are cached.
    chat = fleet.backends[1].url + "/v1/chat/completions"
    turn1 = chat_body("hello there")
    await post(session, chat, turn1)
    turn2 = dict(turn1)
    turn2["messages"] = [
        *turn1["messages"],
        {"role": "assistant", "content": "the model says hello"},
        {"role": "user", "content": "and then"},
    ]
    _, reply = await post(session, chat, turn2)
    # turn 1 had 44 tokens: 43 cacheable, so 10 full blocks of 4
    assert reply["usage"]["prompt_tokens_details"]["cached_tokens"] == 40


@pytest.mark.anyio
async def test_lru_eviction_forgets_the_oldest_prefix(session: aiohttp.ClientSession) -> None:
    small = EngineSettings(
        prefill_us_per_token=0, overhead_ms=0, decode_tps=0, cache_blocks=12, block_tokens=4
    )
    async with SimulatedFleet(small) as fleet:
        url = fleet.backends[0].url + "/v1/chat/completions"
        a = " ".join(f"a{i}" for i in range(40))
        b = " ".join(f"b{i}" for i in range(40))
        await post(session, url, chat_body("x", system=a))
        _, hit = await post(session, url, chat_body("y", system=a))
        assert hit["usage"]["prompt_tokens_details"]["cached_tokens"] == 40
        await post(session, url, chat_body("x", system=b))  # 11 blocks: a is mostly evicted
        _, miss = await post(session, url, chat_body("z", system=a))
        assert miss["usage"]["prompt_tokens_details"]["cached_tokens"] < 40
        stats = fleet.backends[0].engine.statistics()
        cache = stats["cache"]
        assert isinstance(cache, dict)
        assert cache["evictions"] > 0
        assert cache["blocks"] <= 12


@pytest.mark.anyio
async def test_sequences_beyond_max_seqs_wait_in_a_queue(session: aiohttp.ClientSession) -> None:
    one = EngineSettings(prefill_us_per_token=0, overhead_ms=0, decode_tps=20, max_seqs=1)
    async with SimulatedFleet(one) as fleet:
        backend = fleet.backends[0]
        url = backend.url + "/v1/chat/completions"
        engine = backend.engine

        async def queued_two() -> bool:
            return engine.running == 1 and engine.queued == 2

        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(post(session, url, chat_body(f"q{i}"))) for i in range(3)]
            await eventually(queued_two)
            async with session.get(backend.url + "/metrics") as resp:
                text = await resp.text()
            assert "sim_running_sequences 1\n" in text
            assert "sim_queued_sequences 2\n" in text
        assert all(t.result()[0] == 200 for t in tasks)
        stats = engine.statistics()
        assert stats["peak_running"] == 1
        assert stats["completed"] == 3
        assert engine.queued == 0 and engine.running == 0


@pytest.mark.anyio
async def test_streaming_shape_chat_and_completions(
    fleet: SimulatedFleet, session: aiohttp.ClientSession
) -> None:
    url = fleet.backends[0].url
    body = chat_body("q", stream=True, stream_options={"include_usage": True})
    async with session.post(url + "/v1/chat/completions", data=msgspec.json.encode(body)) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        events = await sse_events(resp)
    assert events[-1] == b"[DONE]"
    chunks = [msgspec.json.decode(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "the"}
    content = [c["choices"][0]["delta"].get("content", "") for c in chunks[:-1]]
    assert "".join(content) == "the model says hello"
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 4
    assert "cached_tokens" in chunks[-1]["usage"]["prompt_tokens_details"]
    # Completions stream, no usage chunk unless asked.
    cbody = {"model": "m", "prompt": "a b c", "max_tokens": 2, "stream": True}
    async with session.post(url + "/v1/completions", data=msgspec.json.encode(cbody)) as resp:
        events = await sse_events(resp)
    docs = [msgspec.json.decode(e) for e in events[:-1]]
    assert [d["choices"][0]["text"] for d in docs] == ["the", " model", ""]
    assert docs[-1]["choices"][0]["finish_reason"] == "length"
    assert all("usage" not in d for d in docs)


@pytest.mark.anyio
async def test_fault_refuse_really_refuses_connections(
    fleet: SimulatedFleet, session: aiohttp.ClientSession
) -> None:
    backend = fleet.backends[0]
    await backend.set_fault(Fault("refuse"))
    assert not backend.listening
    with pytest.raises(aiohttp.ClientConnectorError):
        async with aiohttp.ClientSession() as fresh, fresh.get(backend.url + "/health"):
            pass
    await backend.set_fault(Fault("none"))
    async with session.get(backend.url + "/health") as resp:
        assert resp.status == 200


@pytest.mark.anyio
async def test_fault_refuse_drops_open_connections_and_reverts(
    fleet: SimulatedFleet, session: aiohttp.ClientSession
) -> None:
    backend = fleet.backends[1]
    async with session.get(backend.url + "/health") as resp:  # a kept-alive connection
        assert resp.status == 200
    status, doc = await post(
        session, backend.url + "/_fault", {"mode": "refuse", "duration_s": 0.3}
    )
    assert status == 200 and doc["mode"] == "refuse"
    await eventually(lambda: _false_when_refused(session, backend.url))

    async def back() -> bool:
        return backend.listening

    await eventually(back)
    async with session.get(backend.url + "/health") as resp:
        assert resp.status == 200


async def _false_when_refused(session: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with session.get(url + "/health") as resp:
            await resp.read()
    except aiohttp.ClientConnectionError:
        return True
    return False


@pytest.mark.anyio
async def test_fault_oom_answers_503(fleet: SimulatedFleet, session: aiohttp.ClientSession) -> None:
    backend = fleet.backends[0]
    status, _ = await post(session, backend.url + "/_fault", {"mode": "oom"})
    assert status == 200
    status, body = await post(session, backend.url + "/v1/chat/completions", chat_body("q"))
    assert status == 503
    assert "out of memory" in body["error"]["message"]
    async with session.get(backend.url + "/health") as resp:
        assert resp.status == 200  # the process is alive; only generation fails
    async with session.get(backend.url + "/metrics") as resp:
        assert 'sim_faults_injected_total{mode="oom"} 1' in await resp.text()
    await post(session, backend.url + "/_fault", {"mode": "oom", "rate": 0.0})
    status, _ = await post(session, backend.url + "/v1/chat/completions", chat_body("q"))
    assert status == 200


@pytest.mark.anyio
async def test_fault_slow_delays_the_first_byte(
    fleet: SimulatedFleet, session: aiohttp.ClientSession
) -> None:
    backend = fleet.backends[0]
    await backend.set_fault(Fault("slow", delay_ms=300))
    t0 = time.monotonic()
    status, _ = await post(session, backend.url + "/v1/chat/completions", chat_body("q"))
    assert status == 200
    assert time.monotonic() - t0 >= 0.29
    assert backend.engine.counters.faults == {"slow": 1}


@pytest.mark.anyio
async def test_fault_die_mid_stream_drops_the_connection(
    fleet: SimulatedFleet, session: aiohttp.ClientSession
) -> None:
    backend = fleet.backends[0]
    await backend.set_fault(Fault("die_mid_stream", after_chunks=2))
    url = backend.url + "/v1/chat/completions"
    received: list[bytes] = []
    with pytest.raises(aiohttp.ClientPayloadError):
        async with session.post(url, data=msgspec.json.encode(chat_body("q", stream=True))) as r:
            assert r.status == 200
            async for line in r.content:
                if line.startswith(b"data:"):
                    received.append(line)
    assert len(received) == 2
    assert all(b"[DONE]" not in line for line in received)
    # Not streamed: the connection closes with no response.
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await post(session, url, chat_body("q"))
    assert backend.engine.counters.aborted == 2


@pytest.mark.anyio
async def test_fault_unhealthy_and_reset(
    fleet: SimulatedFleet, session: aiohttp.ClientSession
) -> None:
    backend = fleet.backends[0]
    await post(session, backend.url + "/v1/chat/completions", chat_body("q"))
    await backend.set_fault(Fault("unhealthy"))
    async with session.get(backend.url + "/health") as resp:
        assert resp.status == 503
    async with session.get(backend.url + "/_fault") as resp:
        assert (await resp.json())["mode"] == "unhealthy"
    status, stats = await post(session, backend.url + "/_reset", {})
    assert status == 200
    assert stats["requests"] == 0 and stats["cache"]["blocks"] == 0
    status, _ = await post(session, backend.url + "/_fault", {"mode": "explode"})
    assert status == 400


@pytest.mark.anyio
async def test_client_disconnect_aborts_the_sequence(session: aiohttp.ClientSession) -> None:
    slow = EngineSettings(prefill_us_per_token=0, overhead_ms=0, decode_tps=10)
    async with SimulatedFleet(slow) as fleet:
        backend = fleet.backends[0]
        body = chat_body("q", stream=True, max_tokens=100)
        async with session.post(
            backend.url + "/v1/chat/completions", data=msgspec.json.encode(body)
        ) as resp:
            await resp.content.readline()  # the first chunk arrived
            resp.close()

        async def aborted() -> bool:
            return backend.engine.counters.aborted == 1 and backend.engine.running == 0

        await eventually(aborted)
        assert backend.engine.counters.completed == 0


@pytest.mark.anyio
async def test_bad_requests_get_openai_errors(
    fleet: SimulatedFleet, session: aiohttp.ClientSession
) -> None:
    url = fleet.backends[0].url
    for path, body in [
        ("/v1/chat/completions", {"model": "m"}),
        ("/v1/chat/completions", {"model": "m", "messages": [{"content": "x"}]}),
        ("/v1/completions", {"model": "m", "prompt": 3}),
        ("/v1/completions", {"model": "m", "prompt": "x", "max_tokens": 0}),
        ("/v1/embeddings", {"model": "m"}),
    ]:
        status, doc = await post(session, url + path, body)
        assert status == 400, (path, body)
        assert doc["error"]["type"] == "invalid_request_error"
    async with session.post(url + "/v1/chat/completions", data=b"{not json") as resp:
        assert resp.status == 400


@pytest.mark.anyio
async def test_models_embeddings_and_control_port(session: aiohttp.ClientSession) -> None:
    async with SimulatedFleet(FAST, backends=2, control_port=0) as fleet:
        url = fleet.backends[0].url
        async with session.get(url + "/v1/models") as resp:
            assert (await resp.json())["data"][0]["id"] == "sim"
        status, doc = await post(session, url + "/v1/embeddings", {"input": ["a b", "c"]})
        assert status == 200
        assert [len(d["embedding"]) for d in doc["data"]] == [8, 8]
        assert doc["usage"]["prompt_tokens"] == 3
        control = fleet.control_url
        assert control is not None
        status, _ = await post(session, control + "/backends/1/_fault", {"mode": "refuse"})
        assert status == 200 and not fleet.backends[1].listening
        status, _ = await post(session, control + "/backends/1/_fault", {"mode": "none"})
        assert status == 200 and fleet.backends[1].listening
        status, _ = await post(session, control + "/backends/7/_fault", {"mode": "none"})
        assert status == 404
        async with session.get(control + "/backends") as resp:
            assert [b["listening"] for b in await resp.json()] == [True, True]
        assert [s["listening"] for s in fleet.statistics()] == [True, True]
        assert "SimulatedFleet(2 backends" in repr(fleet)
        assert "listening=True" in repr(fleet.backends[0])


def test_fleet_and_fault_validation() -> None:
    with pytest.raises(InvalidRequest):
        SimulatedFleet(FAST, backends=0)
    with pytest.raises(InvalidRequest):
        Fault("slow", rate=2.0)
    with pytest.raises(InvalidRequest):
        EngineSettings(max_seqs=0)
    assert main(["--backends", "1", "--max-seqs", "0"]) == 2


@pytest.mark.anyio
async def test_command_line_fleet_with_a_fault_at_start(session: aiohttp.ClientSession) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sluiceway.bench.simulated",
        "--backends",
        "2",
        "--base-port",
        "0",
        "--fault",
        "oom",
        "--fault-backends",
        "1",
        "--decode-tps",
        "0",
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert line.startswith("simulate: 2 backends:")
        urls = line.split(": ", 2)[2].split()
        status, _ = await post(session, urls[0] + "/v1/chat/completions", chat_body("q"))
        assert status == 200
        status, body = await post(session, urls[1] + "/v1/chat/completions", chat_body("q"))
        assert status == 503 and "out of memory" in body["error"]["message"]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 30)
    assert code == 0
