"""GeneratorService with the fake decoder: admission, slots, deadlines, failures, shutdown."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable

import pytest

from sluiceway.clock import SystemClock
from sluiceway.config.llm import LlamaModelSettings
from sluiceway.config.settings import ServerSettings
from sluiceway.engines.llama_fake import ByteTokenizer, FakeDecoder
from sluiceway.engines.llama_job import Decoder, Tokenizer
from sluiceway.errors import (
    EngineError,
    InvalidRequest,
    Overloaded,
    RequestTimeout,
    Unavailable,
)
from sluiceway.observability.metrics import Metrics
from sluiceway.providers.base import ServiceContext
from sluiceway.providers.generation import (
    ChatPrompt,
    GenerateOptions,
    LlamaGeneratorService,
    TextPrompt,
    TokenPrompt,
)
from sluiceway.testing import eventually

FAR = 1e9


def make(decoder: FakeDecoder, **kw: object) -> tuple[LlamaGeneratorService, Callable[[], float]]:
    settings = LlamaModelSettings(id="fake", gguf="unused.gguf", **kw)  # type: ignore[arg-type]
    clock = SystemClock()
    ctx = ServiceContext(Metrics(), clock, ServerSettings())

    def loader(_: LlamaModelSettings) -> tuple[Tokenizer, Decoder]:
        return ByteTokenizer(), decoder

    return LlamaGeneratorService(settings, ctx, loader), clock.now


async def text_of(svc: LlamaGeneratorService, prompt: str, max_tokens: int = 4) -> str:
    async with svc.generate(TextPrompt(prompt), GenerateOptions(max_tokens=max_tokens), FAR) as g:
        return "".join([d.text async for d in g])


@pytest.fixture
async def started() -> AsyncIterator[tuple[LlamaGeneratorService, FakeDecoder]]:
    decoder = FakeDecoder(n_slots=2)
    svc, _ = make(decoder, slots=2)
    await svc.start()
    yield svc, decoder
    await svc.close()


@pytest.mark.anyio
async def test_generates_and_reports_usage(
    started: tuple[LlamaGeneratorService, FakeDecoder],
) -> None:
    svc, _ = started
    async with svc.generate(TextPrompt("abc"), GenerateOptions(max_tokens=5), FAR) as g:
        text = "".join([d.text async for d in g])
    assert text == "abcab"
    assert g.finish_reason == "length"
    assert g.completion_tokens == 5
    assert g.prompt_tokens == 3


@pytest.mark.anyio
async def test_stop_sequence_and_chat_template(
    started: tuple[LlamaGeneratorService, FakeDecoder],
) -> None:
    svc, _ = started
    prompt = ChatPrompt(({"role": "user", "content": "hi"},))
    options = GenerateOptions(max_tokens=50, stops=(": h",))
    async with svc.generate(prompt, options, FAR) as g:
        text = "".join([d.text async for d in g])
    assert text == "user"
    assert g.finish_reason == "stop"


@pytest.mark.anyio
async def test_prompt_goes_to_the_slot_holding_its_prefix(
    started: tuple[LlamaGeneratorService, FakeDecoder],
) -> None:
    svc, decoder = started
    await text_of(svc, "first prompt")
    await text_of(svc, "other words")
    first_slot = decoder.jobs[-2].slot
    async with svc.generate(
        TextPrompt("first prompt, longer"), GenerateOptions(max_tokens=1), FAR
    ) as g:
        assert g.cached_tokens == len("first prompt")
        async for _ in g:
            pass
    assert decoder.jobs[-1].slot == first_slot
    assert decoder.jobs[-1].reuse == len("first prompt")


@pytest.mark.anyio
async def test_context_overflow_and_bad_token_ids_are_invalid(
    started: tuple[LlamaGeneratorService, FakeDecoder],
) -> None:
    svc, _ = started
    with pytest.raises(InvalidRequest, match="256 tokens; the prompt has 3 and max_tokens asks"):
        async with svc.generate(TextPrompt("abc"), GenerateOptions(max_tokens=254), FAR):
            pass
    with pytest.raises(InvalidRequest, match="the prompt alone has 300"):
        async with svc.generate(TextPrompt("x" * 300), GenerateOptions(), FAR):
            pass
    with pytest.raises(InvalidRequest, match="token id 999"):
        async with svc.generate(TokenPrompt((1, 999)), GenerateOptions(), FAR):
            pass
    assert svc.statistics()["waiting"] == 0


@pytest.mark.anyio
async def test_overload_is_refused_and_waiters_are_served_in_order() -> None:
    gate = threading.Event()
    gate.set()
    decoder = FakeDecoder(n_slots=1, gate=gate)
    svc, _ = make(decoder, slots=1, max_queue=1)
    await svc.start()
    try:
        gate.clear()
        async with svc.generate(TextPrompt("hold"), GenerateOptions(max_tokens=3), FAR) as held:
            waiter = asyncio.ensure_future(text_of(svc, "next", 2))
            await eventually(lambda: svc.statistics()["waiting"] == 1)
            with pytest.raises(Overloaded):
                async with svc.generate(TextPrompt("x"), GenerateOptions(), FAR):
                    pass
            gate.set()
            assert "".join([d.text async for d in held]) == "hol"
        assert await waiter == "ne"
    finally:
        await svc.close()


@pytest.mark.anyio
async def test_deadline_while_waiting_for_a_slot() -> None:
    gate = threading.Event()
    decoder = FakeDecoder(n_slots=1, gate=gate)
    gate.set()
    svc, now = make(decoder, slots=1)
    await svc.start()
    try:
        gate.clear()
        async with svc.generate(TextPrompt("hold"), GenerateOptions(max_tokens=3), FAR):
            with pytest.raises(RequestTimeout, match="waited for a slot"):
                async with svc.generate(TextPrompt("late"), GenerateOptions(), now() + 0.05):
                    pass
            assert svc.statistics()["waiting"] == 0
            gate.set()
    finally:
        await svc.close()


@pytest.mark.anyio
async def test_deadline_while_generating_cancels_the_job(
    started: tuple[LlamaGeneratorService, FakeDecoder],
) -> None:
    svc, decoder = started
    decoder.gate = threading.Event()
    with pytest.raises(RequestTimeout, match="while generating"):
        async with svc.generate(
            TextPrompt("slow"), GenerateOptions(max_tokens=9), asyncio.get_running_loop().time()
        ) as g:
            async for _ in g:
                pass
    assert decoder.jobs[-1].cancelled
    decoder.gate.set()
    await eventually(lambda: svc.statistics()["slots"]["busy"] == 0)  # type: ignore[index]


@pytest.mark.anyio
async def test_consumer_leaving_early_cancels_and_frees_the_slot(
    started: tuple[LlamaGeneratorService, FakeDecoder],
) -> None:
    svc, decoder = started
    async with svc.generate(TextPrompt("abc"), GenerateOptions(max_tokens=200), FAR) as g:
        async for _ in g:
            break
    assert decoder.jobs[-1].cancelled
    await eventually(lambda: svc.statistics()["slots"]["busy"] == 0)  # type: ignore[index]
    assert await text_of(svc, "ok", 2) == "ok"


@pytest.mark.anyio
async def test_slow_consumer_pauses_only_its_own_job() -> None:
    decoder = FakeDecoder(n_slots=2)
    svc, _ = make(decoder, slots=2, stream_window=2)
    await svc.start()
    try:
        async with svc.generate(TextPrompt("slow"), GenerateOptions(max_tokens=100), FAR) as slow:
            job = decoder.jobs[-1]
            await eventually(lambda: job.emitted == 2)
            assert await text_of(svc, "fast", 30) == ("fast" * 8)[:30]
            assert job.emitted == 2  # paused at the window while the other job ran
            assert (await slow.__anext__()).text == "s"
            await eventually(lambda: job.emitted == 3)
    finally:
        await svc.close()


@pytest.mark.anyio
async def test_engine_error_fails_the_request_and_the_service_keeps_serving() -> None:
    decoder = FakeDecoder(n_slots=1, fail_on=ord("!"))
    svc, _ = make(decoder, slots=1)
    await svc.start()
    try:
        with pytest.raises(EngineError, match="injected"):
            await text_of(svc, "boom!")
        assert await text_of(svc, "fine", 3) == "fin"
    finally:
        await svc.close()


@pytest.mark.anyio
async def test_close_fails_running_and_waiting_requests() -> None:
    gate = threading.Event()
    gate.set()
    decoder = FakeDecoder(n_slots=1, gate=gate)
    svc, _ = make(decoder, slots=1)
    await svc.start()
    gate.clear()

    async def running() -> str:
        return await text_of(svc, "run", 50)

    first = asyncio.ensure_future(running())
    await eventually(lambda: svc.statistics()["slots"]["busy"] == 1)  # type: ignore[index]
    second = asyncio.ensure_future(running())
    await eventually(lambda: svc.statistics()["waiting"] == 1)
    await svc.close()
    for task in (first, second):
        with pytest.raises(Unavailable):
            await task
    with pytest.raises(Unavailable):
        await text_of(svc, "after")


@pytest.mark.anyio
async def test_drain_waits_for_admitted_work(
    started: tuple[LlamaGeneratorService, FakeDecoder],
) -> None:
    svc, decoder = started
    decoder.gate = threading.Event()
    task = asyncio.ensure_future(text_of(svc, "work", 3))
    await eventually(lambda: svc.statistics()["admitted"] == 1)
    drained = asyncio.ensure_future(svc.drain())
    await asyncio.sleep(0.05)
    assert not drained.done()
    decoder.gate.set()
    assert await task == "wor"
    await drained
    with pytest.raises(Unavailable):
        await text_of(svc, "new")
