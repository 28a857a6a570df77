"""The generation endpoints' wire format, on a real server with the fake decoder (exact text)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from sluiceway.app import Gateway
from sluiceway.clock import SystemClock
from sluiceway.config.llm import LlamaModelSettings
from sluiceway.engines.llama_fake import ByteTokenizer, FakeDecoder
from sluiceway.engines.llama_job import Decoder, Tokenizer
from sluiceway.observability.metrics import Metrics
from sluiceway.providers.base import ServiceContext
from sluiceway.providers.generation import LlamaGeneratorService
from sluiceway.providers.registry import Registry
from sluiceway.testing import running_gateway, settings

MODEL = "fake-llm"


@contextlib.asynccontextmanager
async def serving(decoder: FakeDecoder) -> AsyncIterator[tuple[str, aiohttp.ClientSession]]:
    model = LlamaModelSettings(id=MODEL, gguf="unused.gguf", slots=decoder.n_slots)
    s = settings((model,))
    metrics, clock = Metrics(), SystemClock()

    def loader(_: LlamaModelSettings) -> tuple[Tokenizer, Decoder]:
        return ByteTokenizer(), decoder

    registry = Registry()
    registry.add_generator(
        LlamaGeneratorService(model, ServiceContext(metrics, clock, s.server), loader)
    )
    gw = Gateway(s, clock=clock, metrics=metrics, registry=registry)
    async with running_gateway(gw) as g, aiohttp.ClientSession() as session:
        yield g.url, session


async def sse(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any]
) -> tuple[int, list[Any]]:
    async with session.post(url, json=body) as r:
        raw = await r.read()
    frames = [f for f in raw.decode().split("\n\n") if f]
    assert all(f.startswith("data: ") for f in frames), frames
    return r.status, [f[6:] if f == "data: [DONE]" else json.loads(f[6:]) for f in frames]


@pytest.mark.anyio
async def test_chat_stream_frames_and_usage() -> None:
    async with serving(FakeDecoder()) as (url, s):
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 4,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        status, frames = await sse(s, url + "/v1/chat/completions", body)
    assert status == 200
    assert frames[-1] == "[DONE]"
    first, *middle, finish, usage, _ = frames
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(f["choices"][0]["delta"]["content"] for f in middle) == "user"
    assert finish["choices"][0]["finish_reason"] == "length"
    assert finish["choices"][0]["delta"] == {}
    assert all(f["usage"] is None for f in (first, *middle, finish))
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] == 4
    assert usage["usage"]["prompt_tokens"] == len("user: hi\nassistant:")
    assert usage["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    assert len({f["id"] for f in frames[:-1]}) == 1


@pytest.mark.anyio
async def test_completions_several_prompts_and_n() -> None:
    async with serving(FakeDecoder(n_slots=2)) as (url, s):
        body = {"model": MODEL, "prompt": ["ab", "cd"], "n": 2, "max_tokens": 3}
        async with s.post(url + "/v1/completions", json=body) as r:
            assert r.status == 200
            doc = await r.json()
    assert [c["index"] for c in doc["choices"]] == [0, 1, 2, 3]
    assert [c["text"] for c in doc["choices"]] == ["aba", "aba", "cdc", "cdc"]
    assert doc["usage"]["completion_tokens"] == 12
    assert doc["usage"]["prompt_tokens"] == 8


@pytest.mark.anyio
async def test_completions_echo_and_stop() -> None:
    async with serving(FakeDecoder()) as (url, s):
        body = {"model": MODEL, "prompt": "hello", "max_tokens": 20, "echo": True, "stop": "lo"}
        async with s.post(url + "/v1/completions", json=body) as r:
            doc = await r.json()
    assert doc["choices"][0]["text"] == "hellohel"
    assert doc["choices"][0]["finish_reason"] == "stop"


@pytest.mark.anyio
async def test_engine_failure_before_and_after_the_first_byte() -> None:
    async with serving(FakeDecoder(fail_on=ord("!"))) as (url, s):
        body: dict[str, Any] = {"model": MODEL, "prompt": "boom!", "max_tokens": 3}
        async with s.post(url + "/v1/completions", json=body) as r:
            assert r.status == 500
            assert (await r.json())["error"]["code"] == "engine_error"
        status, frames = await sse(s, url + "/v1/completions", {**body, "stream": True})
        assert status == 200
        assert frames[-1]["error"]["code"] == "engine_error"
        assert "[DONE]" not in frames


@pytest.mark.anyio
async def test_unsupported_and_mistyped_fields() -> None:
    async with serving(FakeDecoder()) as (url, s):
        body: dict[str, Any] = {"model": MODEL, "prompt": "x", "suffix": "y"}
        async with s.post(url + "/v1/completions", json=body) as r:
            assert r.status == 400
            err = (await r.json())["error"]
            assert err["code"] == "unsupported_parameter"
            assert "suffix" in err["message"]
        async with s.post(
            url + "/v1/completions", json={"model": MODEL, "prompt": "x", "max_tokens": "many"}
        ) as r:
            assert r.status == 422
        async with s.post(
            url + "/v1/completions",
            json={"model": MODEL, "prompt": "x", "stream_options": {"include_usage": True}},
        ) as r:
            assert r.status == 400
            assert (await r.json())["error"]["param"] == "stream"
