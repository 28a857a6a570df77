"""Local text generation (llama.cpp): admission → tokenization → a slot → the decode thread.

One :class:`GeneratorService` per configured GGUF model. A request::

    generate(prompt, options, deadline)      # async context manager
      admit (bounded wait queue, else Overloaded/429)
      tokenize on the tokenizer thread (chat template, context-overflow check → 400)
      wait for a slot (FIFO; SlotTable picks the free slot with the longest cached prefix)
      submit a DecodeJob to the decoder thread  ─►  events come back on the loop
    yields a Generation: async-iterate its Deltas; leaving the block early cancels the job

Every admitted request resolves on every path: its deltas and a finish reason, or
``RequestTimeout`` (deadline), ``EngineError`` (the model failed), ``Unavailable`` (shutdown);
a cancelled consumer (client disconnect) cancels the job, which frees its slot within a step.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol

from sluiceway.config.llm import LlamaModelSettings
from sluiceway.config.resources import resolve_file
from sluiceway.engines.llama_job import (
    DecodeJob,
    Decoder,
    Event,
    Finished,
    Sampling,
    Tokenizer,
)
from sluiceway.engines.llama_slots import Grant, SlotTable
from sluiceway.errors import InvalidRequest, Overloaded, RequestTimeout, Unavailable
from sluiceway.providers.base import ModelCard, Service, ServiceContext
from sluiceway.providers.generation_stream import Delta, Generation, GenerationMetrics

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TextPrompt:
    text: str


@dataclass(frozen=True, slots=True)
class TokenPrompt:
    ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ChatPrompt:
    """Messages as ``{"role": ..., "content": ...}``, rendered by the model's chat template."""

    messages: tuple[dict[str, str], ...]


Prompt = TextPrompt | TokenPrompt | ChatPrompt


@dataclass(frozen=True, slots=True)
class GenerateOptions:
    """Per-request knobs (validated by the API edge). ``max_tokens`` None = model default."""

    max_tokens: int | None = None
    sampling: Sampling = field(default_factory=Sampling)
    stops: tuple[str, ...] = ()
    #: Also return the prompt's text (``Generation.prompt_text``).
    echo: bool = False


@dataclass(frozen=True, slots=True)
class _Tokenized:
    ids: list[int]
    text: str


#: Builds (tokenizer, decoder) off the event loop. Tests may pass one building a fake decoder.
DecoderLoader = Callable[[LlamaModelSettings], tuple[Tokenizer, Decoder]]


def layout(settings: LlamaModelSettings, cores: int) -> tuple[int, int, int]:
    """(threads per lane, lanes, slots per lane) for ``settings`` on ``cores`` cores."""
    threads = settings.n_threads or max(1, cores // 2)
    lanes = settings.lanes or max(1, cores // threads)
    lanes = min(lanes, settings.slots)
    return threads, lanes, -(-settings.slots // lanes)


def load_llama(settings: LlamaModelSettings) -> tuple[Tokenizer, Decoder]:
    """The real loader: map the GGUF file and create each lane's context."""
    from sluiceway.engines.llama_decoder import LlamaDecoder
    from sluiceway.engines.llama_lanes import DecoderLanes
    from sluiceway.engines.llama_model import LlamaWeights

    threads, lanes, per_lane = layout(settings, os.cpu_count() or 1)
    weights = LlamaWeights(str(resolve_file(settings.gguf)), chat_template=settings.chat_template)
    decoders: list[Decoder] = []
    try:
        for lane in range(lanes):
            decoders.append(
                LlamaDecoder(
                    weights,
                    slots=per_lane,
                    n_ctx=settings.n_ctx,
                    n_threads=threads,
                    n_batch=settings.n_batch,
                    name=f"{settings.id}-{lane}",
                    lanes=lanes,
                )
            )
    except BaseException:
        for decoder in decoders:
            decoder.close()
        weights.close()
        raise
    return weights, decoders[0] if lanes == 1 else DecoderLanes(decoders)


class Generator(Protocol):
    """A model that completes prompts and chats."""

    def generate(
        self, prompt: Prompt, options: GenerateOptions, deadline: float
    ) -> AbstractAsyncContextManager[Generation]: ...


class GeneratorService(Service, Generator, Protocol):
    """A served model that generates text."""


@dataclass(slots=True, eq=False)
class _Waiter:
    prompt: list[int]
    future: asyncio.Future[Grant]


class LlamaGeneratorService:
    """Serves ``/v1/completions`` and ``/v1/chat/completions`` for one GGUF model."""

    def __init__(
        self,
        settings: LlamaModelSettings,
        ctx: ServiceContext,
        loader: DecoderLoader = load_llama,
    ) -> None:
        self.settings = settings
        self.clock = ctx.clock
        self.metrics = GenerationMetrics(ctx.metrics, settings.id)
        self._loader = loader
        self._tok_executor = ThreadPoolExecutor(1, thread_name_prefix=f"tokenize-{settings.id}")
        self._tokenizer: Tokenizer | None = None
        self._decoder: Decoder | None = None
        self._table = SlotTable(settings.slots)
        self._waiters: deque[_Waiter] = deque()
        self._admitted = 0  # entered generate() and not yet out of it
        self._waiting = 0  # admitted and not yet holding a slot
        self._refused = 0
        self._draining = False
        self._closed = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    # --- Service ---------------------------------------------------------------------------

    @property
    def names(self) -> tuple[str, ...]:
        return (self.settings.id, *self.settings.aliases)

    def cards(self) -> list[ModelCard]:
        return [ModelCard(id=name, task="generation") for name in self.names]

    @property
    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            raise Unavailable(f"model {self.settings.id!r} is not loaded yet")
        return self._tokenizer

    @property
    def decoder(self) -> Decoder:
        if self._decoder is None:
            raise Unavailable(f"model {self.settings.id!r} is not loaded yet")
        return self._decoder

    async def start(self) -> None:
        tokenizer, decoder = await asyncio.to_thread(self._loader, self.settings)
        self._tokenizer, self._decoder = tokenizer, decoder
        self._table = SlotTable(decoder.slots, decoder.lanes)
        decoder.start()
        # Warm up: the first decode allocates llama.cpp's compute buffers.
        async with self.generate(
            TokenPrompt((1, 2, 3)), GenerateOptions(max_tokens=2), self.clock.now() + 60
        ) as gen:
            async for _ in gen:
                pass
        self._table = SlotTable(decoder.slots, decoder.lanes)  # forget warm-up
        log.info("model %s ready: %r", self.settings.id, decoder)

    async def run(self) -> None:
        await self._closed.wait()

    async def drain(self) -> None:
        self._draining = True
        await self._idle.wait()

    async def close(self) -> None:
        self._draining = True
        for waiter in self._waiters:
            if not waiter.future.done():
                waiter.future.set_exception(Unavailable("the model shut down"))
        self._waiters.clear()
        if self._decoder is not None:
            await asyncio.to_thread(self._decoder.close)
        if self._tokenizer is not None:
            self._tokenizer.close()
        self._tok_executor.shutdown(wait=False, cancel_futures=True)
        self._closed.set()

    def statistics(self) -> Mapping[str, object]:
        stats: dict[str, object] = {
            "admitted": self._admitted,
            "waiting": self._waiting,
            "refused": self._refused,
            "slots": self._table.statistics(),
        }
        if self._decoder is not None:
            stats["decoder"] = self._decoder.statistics()
        return stats

    def __repr__(self) -> str:
        return (
            f"LlamaGeneratorService({self.settings.id!r}, {self._table!r}, "
            f"waiting={self._waiting}/{self.settings.max_queue})"
        )

    # --- Generator -------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def generate(
        self, prompt: Prompt, options: GenerateOptions, deadline: float
    ) -> AsyncIterator[Generation]:
        decoder = self.decoder
        if self._draining:
            raise Unavailable("the server is shutting down")
        if self._waiting >= self.settings.max_queue:
            self._refused += 1
            raise Overloaded(
                f"server overloaded: {self._waiting} requests already wait for a slot of "
                f"{self.settings.id!r} (limit {self.settings.max_queue}); retry later",
                retry_after=1.0,
            )
        started = self.clock.now()
        self._enter()
        generation: Generation | None = None
        try:
            loop = asyncio.get_running_loop()
            tokenized = await loop.run_in_executor(
                self._tok_executor, self._tokenize, prompt, options.echo
            )
            max_tokens = self._budget(len(tokenized.ids), options.max_tokens, decoder.n_ctx)
            grant = await self._acquire(tokenized.ids, deadline)
            self._waiting -= 1
            self.metrics.queue.dec()
            generation = self._submit(
                decoder, grant, tokenized, max_tokens, options, deadline, started
            )
            yield generation
        finally:
            if generation is None:
                self._waiting -= 1
                self.metrics.queue.dec()
            else:
                generation.cancel()
            self._leave()

    def _enter(self) -> None:
        self._admitted += 1
        self._waiting += 1
        self.metrics.queue.inc()
        self._idle.clear()

    def _leave(self) -> None:
        self._admitted -= 1
        if self._admitted == 0:
            self._idle.set()

    def _submit(
        self,
        decoder: Decoder,
        grant: Grant,
        prompt: _Tokenized,
        max_tokens: int,
        options: GenerateOptions,
        deadline: float,
        started: float,
    ) -> Generation:
        loop = asyncio.get_running_loop()
        holder: list[Generation] = []

        def emit(event: Event) -> None:  # on the decode thread
            loop.call_soon_threadsafe(self._on_event, holder[0], grant.slot, event)

        job = DecodeJob(
            slot=grant.slot,
            prompt=prompt.ids,
            reuse=grant.reuse,
            max_tokens=max_tokens,
            sampling=options.sampling,
            stops=options.stops,
            emit=emit,
            window=self.settings.stream_window,
        )
        generation = Generation(
            job,
            decoder,
            self.tokenizer,
            self.clock,
            self.metrics,
            prompt_tokens=len(prompt.ids),
            prompt_text=prompt.text,
            cached_tokens=grant.reuse,
            deadline=deadline,
            started=started,
            echo=options.echo,
        )
        holder.append(generation)
        self.metrics.busy.set(self._table.busy)
        self.metrics.prompt.inc(len(prompt.ids))
        if grant.reuse:
            self.metrics.cached.inc(grant.reuse)
        try:
            decoder.submit(job)
        except RuntimeError:
            self._table.release(grant.slot, ())
            raise Unavailable("the model shut down") from None
        return generation

    def _on_event(self, generation: Generation, slot: int, event: Event) -> None:
        if isinstance(event, Finished):
            self._table.release(slot, event.cached)
            self.metrics.busy.set(self._table.busy)
            self.metrics.generated.inc(event.completion_tokens)
            self._grant_next()
        generation.deliver(event)

    # --- slots -----------------------------------------------------------------------------

    async def _acquire(self, prompt: list[int], deadline: float) -> Grant:
        if not self._waiters:
            grant = self._table.acquire(prompt)
            if grant is not None:
                return grant
        waiter = _Waiter(prompt, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        remaining = deadline - self.clock.now()
        try:
            if remaining <= 0:
                raise TimeoutError
            async with asyncio.timeout(remaining):
                return await waiter.future
        except TimeoutError:
            raise RequestTimeout(
                "the request's deadline passed while it waited for a slot"
            ) from None
        except BaseException:
            fut = waiter.future
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                # Granted while being cancelled: give the slot back untouched.
                grant = fut.result()
                self._table.release(grant.slot, self._table.cached(grant.slot))
                self._grant_next()
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)

    def _grant_next(self) -> None:
        while self._waiters and self._table.free:
            waiter = self._waiters.popleft()
            if waiter.future.done():
                continue
            grant = self._table.acquire(waiter.prompt)
            assert grant is not None
            waiter.future.set_result(grant)

    # --- tokenizer thread ------------------------------------------------------------------

    def _tokenize(self, prompt: Prompt, echo: bool) -> _Tokenized:
        tokenizer = self._tokenizer
        assert tokenizer is not None
        if isinstance(prompt, TokenPrompt):
            ids = list(prompt.ids)
            vocab = tokenizer.vocab_size
            bad = next((t for t in ids if not 0 <= t < vocab), None)
            if bad is not None:
                raise InvalidRequest(
                    f"the prompt holds token id {bad}, outside this model's vocabulary "
                    f"(0..{vocab - 1})",
                    param="prompt",
                )
            text = (
                b"".join(tokenizer.piece(t) for t in ids).decode(errors="replace") if echo else ""
            )
        elif isinstance(prompt, ChatPrompt):
            try:
                text = tokenizer.render_chat(prompt.messages)
            except Exception as e:  # template errors (e.g. roles it rejects) are the client's
                raise InvalidRequest(f"the chat template rejected the messages: {e}") from None
            ids = tokenizer.tokenize(text, add_special=False, parse_special=True)
        else:
            text = prompt.text
            ids = tokenizer.tokenize(text, add_special=True, parse_special=True)
        if not ids:
            raise InvalidRequest("the prompt is empty", param="prompt")
        return _Tokenized(ids, text)

    def _budget(self, prompt_tokens: int, max_tokens: int | None, n_ctx: int) -> int:
        """``max_tokens`` for the job, or a 400 naming the numbers if they cannot fit."""
        if max_tokens is not None and prompt_tokens + max_tokens > n_ctx:
            raise InvalidRequest(
                f"this model's context is {n_ctx} tokens; the prompt has {prompt_tokens} and "
                f"max_tokens asks for {max_tokens} more ({prompt_tokens + max_tokens} in all); "
                "shorten the prompt or lower max_tokens",
                param="max_tokens",
                code="context_length_exceeded",
            )
        if prompt_tokens >= n_ctx:
            raise InvalidRequest(
                f"this model's context is {n_ctx} tokens; the prompt alone has {prompt_tokens}",
                code="context_length_exceeded",
            )
        if max_tokens is None:
            return min(self.settings.default_max_tokens, n_ctx - prompt_tokens)
        return max_tokens


def build_generator(settings: LlamaModelSettings, ctx: ServiceContext) -> GeneratorService:
    return LlamaGeneratorService(settings, ctx)


__all__ = [
    "ChatPrompt",
    "Delta",
    "GenerateOptions",
    "Generation",
    "Generator",
    "GeneratorService",
    "LlamaGeneratorService",
    "Prompt",
    "TextPrompt",
    "TokenPrompt",
    "build_generator",
    "load_llama",
]
