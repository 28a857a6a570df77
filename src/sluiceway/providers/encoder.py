"""The local encoder provider: admission → tokenization → dynamic batching → engine thread.

One instance per configured ONNX encoder; one model copy per process, shared by all requests.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from sluiceway.batching.admission import Admission
from sluiceway.batching.coalescer import Coalescer
from sluiceway.batching.policy import BatchLimits
from sluiceway.batching.scheduler import BatchScheduler, Job, WorkItem
from sluiceway.config.settings import EncoderModelSettings
from sluiceway.engines.pooling import l2_normalize
from sluiceway.engines.protocol import EncoderEngine
from sluiceway.engines.tokenizer import Direction, Encoded, TextTokenizer
from sluiceway.errors import (
    InvalidRequest,
    PayloadTooLarge,
    RequestTimeout,
    SluicewayError,
    Unavailable,
)
from sluiceway.providers.base import EmbedOptions, EmbedResult, ModelCard, ServiceContext

log = logging.getLogger(__name__)

#: Builds (tokenizer, engine), warmed up, off the event loop. Tests pass one with a fake engine.
EngineLoader = Callable[[EncoderModelSettings], tuple[TextTokenizer, EncoderEngine]]


@dataclass(frozen=True, slots=True)
class _TokenizeJob:
    inputs: list[str] | list[list[int]]
    truncate: bool
    direction: Direction


def load_onnx(settings: EncoderModelSettings) -> tuple[TextTokenizer, EncoderEngine]:
    """The real loader: resolve files, open the tokenizer and the ONNX Runtime session."""
    from sluiceway.engines.onnx_encoder import OnnxEncoder
    from sluiceway.providers.encoder_files import resolve_encoder_files

    files = resolve_encoder_files(settings)
    tokenizer = TextTokenizer(str(files.tokenizer), files.max_length)
    engine = OnnxEncoder(
        str(files.onnx),
        pooling=files.pooling,
        intra_op_threads=settings.intra_op_threads,
        output=files.output,
        allow_spinning=settings.allow_spinning,
        memory_arena=settings.memory_arena,
    )
    # Warm up: the first runs allocate arenas and pick kernels; do it before /ready says yes.
    for n, text in ((1, "warm up"), (8, "warm up " * 20)):
        enc = tokenizer.encode([text] * n, True, "right")
        ids = np.stack([e.ids for e in enc])
        engine.run(ids, np.ones_like(ids))
    return tokenizer, engine


class EncoderService:
    """Serves ``/v1/embeddings`` for one local model (implements ``Service`` and ``Embedder``)."""

    def __init__(
        self,
        settings: EncoderModelSettings,
        ctx: ServiceContext,
        loader: EngineLoader = load_onnx,
    ) -> None:
        self.settings = settings
        self._ctx = ctx
        self._loader = loader
        b = settings.batching
        self._admission = Admission(b.max_queue_items, b.max_queue_tokens)
        self._tok_executor = ThreadPoolExecutor(1, thread_name_prefix=f"tokenize-{settings.id}")
        self._tokenizer: TextTokenizer | None = None
        self._scheduler: BatchScheduler | None = None
        self._coalescer: Coalescer[_TokenizeJob, list[Encoded] | SluicewayError] | None = None
        self._dims = 0
        self._draining = False
        self._idle = asyncio.Event()
        self._idle.set()
        m = ctx.metrics
        mid = settings.id
        self._m_queue_depth = m.queue_depth.labels(mid)
        self._m_tokens = m.input_tokens.labels(mid)
        self._m_trunc = m.truncations.labels(mid)
        self._m_tokenize = m.tokenize_duration.labels(mid)

    # --- Service ---------------------------------------------------------------------------

    @property
    def names(self) -> tuple[str, ...]:
        return (self.settings.id, *self.settings.aliases)

    def cards(self) -> list[ModelCard]:
        return [ModelCard(id=name, task="embeddings") for name in self.names]

    @property
    def dims(self) -> int:
        return self._dims

    async def start(self) -> None:
        tokenizer, engine = await asyncio.to_thread(self._loader, self.settings)
        self._tokenizer = tokenizer
        self._dims = engine.dims
        b = self.settings.batching
        m = self._ctx.metrics
        mid = self.settings.id
        batch_size, batch_tokens = m.batch_size.labels(mid), m.batch_tokens.labels(mid)
        inference, wait = m.inference_duration.labels(mid), m.queue_wait.labels(mid)

        def on_batch(size: int, tokens: int, seconds: float) -> None:
            batch_size.observe(size)
            batch_tokens.observe(tokens)
            inference.observe(seconds)

        dropped_early = m.dropped.labels(mid, "tokenize", "cancelled")
        self._coalescer = Coalescer(self._tokenize, self._tok_executor, dropped_early.inc)
        coalescer = self._coalescer
        self._scheduler = BatchScheduler(
            engine,
            BatchLimits(
                b.max_batch_size, b.max_batch_tokens, b.max_wait_ms / 1000.0, b.max_padding_waste
            ),
            clock=self._ctx.clock,
            max_length=tokenizer.max_length,
            name=mid,
            incoming=lambda: coalescer.in_flight,
            on_batch=on_batch,
            on_wait=wait.observe,
            on_drop=lambda reason, n: m.dropped.labels(mid, "queue", reason).inc(n),
        )
        log.info("model %s ready: %r, %r", mid, tokenizer, engine)

    async def run(self) -> None:
        assert self._scheduler is not None, "start() first"
        await self._scheduler.run()

    async def drain(self) -> None:
        self._draining = True
        await self._idle.wait()

    async def close(self) -> None:
        self._draining = True
        if self._scheduler is not None:
            self._scheduler.close()
        self._tok_executor.shutdown(wait=False, cancel_futures=True)

    def statistics(self) -> Mapping[str, object]:
        stats: dict[str, object] = {"admission": self._admission.statistics()}
        if self._scheduler is not None:
            stats["scheduler"] = self._scheduler.statistics()
        if self._coalescer is not None:
            stats["tokenizer_calls"] = self._coalescer.calls
        return stats

    def __repr__(self) -> str:
        return f"EncoderService({self.settings.id!r}, dims={self._dims}, {self._admission!r})"

    # --- Embedder --------------------------------------------------------------------------

    async def embed(
        self, inputs: list[str] | list[list[int]], options: EmbedOptions, deadline: float
    ) -> EmbedResult:
        if self._scheduler is None or self._coalescer is None or self._tokenizer is None:
            raise Unavailable(f"model {self.settings.id!r} is not loaded yet")
        if self._draining:
            raise Unavailable("the server is shutting down")
        b = self.settings.batching
        n = len(inputs)
        if n > b.max_inputs_per_request:
            raise PayloadTooLarge(
                f"{n} inputs in one request; the limit is {b.max_inputs_per_request}",
                param="input",
            )
        if options.dimensions is not None and not 0 < options.dimensions <= self._dims:
            raise InvalidRequest(
                f"dimensions must be between 1 and {self._dims} for this model",
                param="dimensions",
            )
        truncate = self.settings.truncate if options.truncate is None else options.truncate
        self._admission.reserve_items(n)
        self._idle.clear()
        tokens = 0
        self._m_queue_depth.inc(n)
        try:
            encoded = await self._coalescer.submit(
                _TokenizeJob(inputs, truncate, options.truncation_direction)
            )
            if isinstance(encoded, SluicewayError):
                raise encoded
            tokens = self._check(encoded, truncate)
            self._admission.reserve_tokens(tokens)
            job = await self._run(encoded, deadline)
        except BaseException:
            self._admission.release(n, tokens)
            raise
        else:
            self._admission.release(n, tokens)
        finally:
            self._m_queue_depth.dec(n)
            if self._admission.items == 0:
                self._idle.set()
        truncated = sum(e.truncated for e in encoded)
        self._m_tokens.inc(tokens)
        if truncated:
            self._m_trunc.inc(truncated)
        vectors = job.vectors
        if options.dimensions is not None and options.dimensions < self._dims:
            vectors = vectors[:, : options.dimensions]
        if options.normalize:
            vectors = l2_normalize(vectors)
        return EmbedResult(vectors=vectors, prompt_tokens=tokens, truncated=truncated)

    def _check(self, encoded: list[Encoded], truncate: bool) -> int:
        assert self._tokenizer is not None
        limit = self._tokenizer.max_length
        b = self.settings.batching
        total = 0
        for i, e in enumerate(encoded):
            if not truncate and e.length > limit:
                raise InvalidRequest(
                    f"input[{i}] has {e.length} tokens, more than this model's limit of "
                    f"{limit}; shorten it or send truncate=true",
                    param=f"input[{i}]",
                    code="input_too_long",
                )
            total += len(e.ids)
        if total > b.max_tokens_per_request:
            raise PayloadTooLarge(
                f"{total} tokens in one request; the limit is {b.max_tokens_per_request}",
                param="input",
            )
        return total

    async def _run(self, encoded: list[Encoded], deadline: float) -> Job:
        assert self._scheduler is not None
        clock = self._ctx.clock
        now = clock.now()
        remaining = deadline - now
        if remaining <= 0:
            raise RequestTimeout("the request's deadline passed before it could run")
        loop = asyncio.get_running_loop()
        job = Job(
            future=loop.create_future(),
            deadline=deadline,
            vectors=np.empty((len(encoded), self._dims), dtype=np.float32),
            remaining=len(encoded),
        )
        self._scheduler.submit([WorkItem(job, row, e.ids, now) for row, e in enumerate(encoded)])
        try:
            async with asyncio.timeout(remaining):
                await job.future
        except TimeoutError:
            job.future.cancel()
            raise RequestTimeout("the request's deadline passed before it was served") from None
        return job

    # --- tokenizer thread ------------------------------------------------------------------

    def _tokenize(self, jobs: list[_TokenizeJob]) -> list[list[Encoded] | SluicewayError]:
        """All queued requests' inputs in one call (on the tokenizer thread)."""
        tokenizer = self._tokenizer
        assert tokenizer is not None
        start = self._ctx.clock.now()
        out: list[list[Encoded] | SluicewayError] = []
        for job in jobs:
            try:
                out.append(self._tokenize_one(tokenizer, job))
            except SluicewayError as e:
                out.append(e)
        self._m_tokenize.observe(self._ctx.clock.now() - start)
        return out

    @staticmethod
    def _tokenize_one(tokenizer: TextTokenizer, job: _TokenizeJob) -> list[Encoded]:
        if job.inputs and isinstance(job.inputs[0], list):
            result = []
            for i, ids in enumerate(job.inputs):
                assert isinstance(ids, list)
                bad = next((t for t in ids if not 0 <= t < tokenizer.vocab_size), None)
                if bad is not None:
                    raise InvalidRequest(
                        f"input[{i}] holds token id {bad}, outside this model's vocabulary "
                        f"(0..{tokenizer.vocab_size - 1})",
                        param=f"input[{i}]",
                    )
                result.append(tokenizer.wrap_ids(ids, job.truncate, job.direction))
            return result
        texts = job.inputs
        assert all(isinstance(t, str) for t in texts)
        return tokenizer.encode(texts, job.truncate, job.direction)  # type: ignore[arg-type]
