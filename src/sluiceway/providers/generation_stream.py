"""One running generation as the event loop sees it: an async iterator of text deltas.

The decode thread hands each event to the loop (``deliver``); the consumer (an HTTP handler)
pulls them with ``async for``. Taking a piece gives the decode thread credit to run ahead again
(backpressure); leaving early, or missing the deadline, cancels the job at its next step.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from sluiceway.clock import Clock
from sluiceway.engines.llama_job import (
    DecodeJob,
    Decoder,
    Event,
    Finished,
    Piece,
    Tokenizer,
    TokenLogprob,
)
from sluiceway.errors import EngineError, RequestTimeout, Unavailable
from sluiceway.observability.metrics import Metrics


@dataclass(frozen=True, slots=True)
class Delta:
    """Text released by one or more generated tokens (may be empty) and the token's logprob."""

    text: str
    logprob: TokenLogprob | None = None


class GenerationMetrics:
    """The generation metrics of one model, labelled once."""

    def __init__(self, m: Metrics, model: str) -> None:
        self.ttft = m.ttft.labels(model, "local")
        self.inter_token = m.inter_token.labels(model)
        self.generated = m.generated_tokens.labels(model)
        self.cached = m.cached_prompt_tokens.labels(model)
        self.prompt = m.input_tokens.labels(model)
        self.busy = m.busy_slots.labels(model)
        self.queue = m.queue_depth.labels(model)


class Generation:
    """One running request, seen from the loop: async-iterate it for :class:`Delta` values.

    After the iteration ends, ``finish_reason`` is ``"stop"`` or ``"length"`` and
    ``completion_tokens`` counts the generated tokens.
    """

    def __init__(
        self,
        job: DecodeJob,
        decoder: Decoder,
        tokenizer: Tokenizer,
        clock: Clock,
        metrics: GenerationMetrics,
        *,
        prompt_tokens: int,
        prompt_text: str,
        cached_tokens: int,
        deadline: float,
        started: float,
        echo: bool = False,
    ) -> None:
        self._job = job
        self._decoder = decoder
        self._tokenizer = tokenizer
        self._clock = clock
        self._metrics = metrics
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self.prompt_tokens = prompt_tokens
        self.prompt_text = prompt_text
        self.echo = echo
        self.cached_tokens = cached_tokens
        self.deadline = deadline
        self._started = started
        self._last: float | None = None
        self.finish_reason: str | None = None
        self.completion_tokens = 0
        self.done = False

    def token_bytes(self, token: int) -> bytes:
        """The bytes of one of the model's tokens (for logprobs)."""
        return self._tokenizer.piece(token)

    def __aiter__(self) -> Generation:
        return self

    async def __anext__(self) -> Delta:
        if self.done:
            raise StopAsyncIteration
        remaining = self.deadline - self._clock.now()
        try:
            if remaining <= 0:
                raise TimeoutError
            async with asyncio.timeout(remaining):
                event = await self._queue.get()
        except TimeoutError:
            self.cancel()
            raise RequestTimeout("the request's deadline passed while generating") from None
        self._tick(event)
        if isinstance(event, Piece):
            job = self._job
            job.consumed += 1
            if job.emitted - job.consumed == job.window - 1:
                self._decoder.wake()  # it may have paused this slot for us
            return Delta(event.text, event.logprob)
        self.done = True
        self.completion_tokens = event.completion_tokens
        if event.reason == "error":
            raise EngineError(event.error or "the model failed on this request")
        if event.reason == "cancelled":
            raise Unavailable("the model shut down while generating")
        self.finish_reason = event.reason
        if event.text or event.logprob is not None:
            return Delta(event.text, event.logprob)
        raise StopAsyncIteration

    def _tick(self, event: Event) -> None:
        if isinstance(event, Finished) and event.completion_tokens == 0:
            return
        now = self._clock.now()
        m = self._metrics
        if self._last is None:
            m.ttft.observe(now - self._started)
        else:
            m.inter_token.observe(now - self._last)
        self._last = now

    def deliver(self, event: Event) -> None:
        """On the loop: an event from the decode thread."""
        self._queue.put_nowait(event)

    def cancel(self) -> None:
        if not self.done:
            self.done = True
            self._job.cancelled = True
            self._decoder.wake()

    def __repr__(self) -> str:
        return (
            f"Generation(slot={self._job.slot}, prompt={self.prompt_tokens}, "
            f"cached={self.cached_tokens}, emitted={self._job.emitted}, done={self.done})"
        )
