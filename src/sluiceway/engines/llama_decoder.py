"""Continuous batching over one llama.cpp context: one sequence per slot, one decode thread.

Each step the thread builds one ``llama_batch`` holding the next token of every generating
slot and, with the room left (``n_batch``), chunks of prompts still being read; one
``llama_decode`` then advances them all, and each slot samples from its own logits row. A
pass over the weights thus serves every active request, which is what makes aggregate tokens/s
grow with concurrency on a CPU. Each slot's KV cache stays in the context between requests;
a job says how much of it to keep (``reuse``) and only the rest of its prompt is decoded.

A slot whose client lags ``window`` pieces behind is skipped (paused) until the client catches
up; the other slots keep decoding. A cancelled job is finished at the next step. Every job
ends with exactly one ``Finished`` event, on every path: done, cancelled, failed, closed.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import llama_cpp

from sluiceway.engines.llama_job import DecodeJob, Event, Finished, FinishReason, Piece
from sluiceway.engines.llama_model import LlamaWeights
from sluiceway.engines.llama_sampling import build_sampler, free_sampler, logprob_of
from sluiceway.engines.llama_text import TextAssembler

log = logging.getLogger(__name__)


@dataclass(slots=True, eq=False)
class _Sequence:
    """Decode-thread state of one running job."""

    job: DecodeJob
    tokens: list[int]  # prompt, then every sampled token
    n_past: int  # leading tokens whose KV is in the cache
    sampler: Any
    text: TextAssembler
    generated: int = 0
    output: int = -1  # index of its logits row in the current batch, -1 = none
    decoded: int = field(default=0)  # tokens decoded for it (prompt + generated)


class LlamaDecoder:
    """Implements the ``Decoder`` seam for a :class:`LlamaWeights` model."""

    def __init__(
        self,
        weights: LlamaWeights,
        *,
        slots: int,
        n_ctx: int,
        n_threads: int,
        n_batch: int,
        name: str,
        lanes: int = 1,
    ) -> None:
        self._weights = weights
        self._slots = slots
        #: In a lane of ``lanes``, slot ``s`` is this context's sequence ``s // lanes``.
        self._stride = lanes
        self._n_batch = max(n_batch, slots)
        self._name = name
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx * slots
        params.n_batch = self._n_batch
        params.n_ubatch = self._n_batch
        params.n_seq_max = slots
        params.n_threads = n_threads
        params.n_threads_batch = n_threads
        params.kv_unified = False  # each slot attends only to its own cells
        params.no_perf = True
        ctx = llama_cpp.llama_init_from_model(weights.model, params)
        if not ctx:
            raise ValueError(f"llama.cpp could not create a context for {weights.path}")
        self._ctx: Any = ctx
        self._memory = llama_cpp.llama_get_memory(ctx)
        self._n_ctx = min(n_ctx, int(llama_cpp.llama_n_ctx_seq(ctx)))
        self._n_vocab = weights.vocab_size
        self._batch = llama_cpp.llama_batch_init(self._n_batch, 0, 1)
        self._cond = threading.Condition()
        self._inbox: list[DecodeJob] = []
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"llama-{name}")
        self._active: dict[int, _Sequence] = {}
        self._steps = 0
        self._prompt_decoded = 0
        self._generated = 0
        self._failed = 0
        self._decode_ns = 0
        self._batched_tokens = 0

    # --- any thread ------------------------------------------------------------------------

    @property
    def slots(self) -> int:
        return self._slots

    @property
    def lanes(self) -> int:
        return 1

    @property
    def n_ctx(self) -> int:
        return self._n_ctx

    def start(self) -> None:
        self._thread.start()

    def submit(self, job: DecodeJob) -> None:
        with self._cond:
            if self._closed:
                raise RuntimeError("the decoder is closed")
            self._inbox.append(job)
            self._cond.notify()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        if self._ctx is not None:
            llama_cpp.llama_free(self._ctx)
            self._ctx = None

    def statistics(self) -> dict[str, int]:
        active = list(self._active.values())
        return {
            "active": len(active),
            "paused": sum(1 for s in active if s.job.blocked),
            "steps": self._steps,
            "prompt_tokens_decoded": self._prompt_decoded,
            "generated_tokens": self._generated,
            "failed_jobs": self._failed,
            "batched_tokens": self._batched_tokens,
            "decode_ms": self._decode_ns // 1_000_000,
        }

    def __repr__(self) -> str:
        return (
            f"LlamaDecoder({self._name!r}, slots={self._slots}, n_ctx={self._n_ctx}, "
            f"n_batch={self._n_batch}, {self.statistics()})"
        )

    # --- decode thread ---------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not (self._closed or self._inbox or self._has_work()):
                        self._cond.wait()
                    if self._closed:
                        return
                    new, self._inbox = self._inbox, []
                for job in new:
                    try:
                        self._begin(job)
                    except Exception as e:  # e.g. a sampler llama.cpp refused: this job only
                        log.exception("model %s: could not start a job", self._name)
                        _emit(job, Finished("error", "", 0, (), error=f"could not start: {e}"))
                for seq in [s for s in self._active.values() if s.job.cancelled]:
                    self._finish(seq, "cancelled")
                ready = [s for s in self._active.values() if not s.job.blocked]
                if ready:
                    self._step(ready)
        finally:
            with self._cond:
                self._closed = True
                left, self._inbox = self._inbox, []
            for job in left:
                _emit(job, Finished("cancelled", "", 0, ()))
            for seq in list(self._active.values()):
                self._finish(seq, "cancelled")

    def _has_work(self) -> bool:
        return any(s.job.cancelled or not s.job.blocked for s in self._active.values())

    def _begin(self, job: DecodeJob) -> None:
        if job.slot in self._active:  # the provider never does this; fail loudly, not silently
            _emit(job, Finished("error", "", 0, (), error=f"slot {job.slot} is busy"))
            return
        reuse = max(0, min(job.reuse, len(job.prompt) - 1))
        llama_cpp.llama_memory_seq_rm(self._memory, job.slot // self._stride, reuse, -1)
        seq = _Sequence(
            job=job,
            tokens=list(job.prompt),
            n_past=reuse,
            sampler=build_sampler(job.sampling, self._n_vocab, job.max_tokens),
            text=TextAssembler(job.stops),
        )
        self._active[job.slot] = seq

    def _step(self, ready: list[_Sequence]) -> None:
        batch = self._batch
        n = 0
        planned: list[tuple[_Sequence, int]] = []
        # Generating slots first (one token each), then prompt chunks in the room left.
        for seq in sorted(ready, key=lambda s: len(s.tokens) - s.n_past):
            todo = len(seq.tokens) - seq.n_past
            take = min(todo, self._n_batch - n)
            if take <= 0:
                break
            slot = seq.job.slot // self._stride
            for k in range(take):
                pos = seq.n_past + k
                batch.token[n] = seq.tokens[pos]
                batch.pos[n] = pos
                batch.n_seq_id[n] = 1
                batch.seq_id[n][0] = slot
                batch.logits[n] = False
                n += 1
            seq.output = -1
            if take == todo:
                batch.logits[n - 1] = True
                seq.output = n - 1
            planned.append((seq, take))
        batch.n_tokens = n
        self._steps += 1
        self._batched_tokens += n
        try:
            start = time.perf_counter_ns()
            rc = llama_cpp.llama_decode(self._ctx, batch)
            self._decode_ns += time.perf_counter_ns() - start
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc}")
        except Exception as e:
            log.exception("model %s: a decode step failed", self._name)
            for seq, _ in planned:
                self._finish(seq, "error", error=f"the model failed: {e}")
            return
        for seq, take in planned:
            was_prompt = seq.generated == 0
            seq.n_past += take
            seq.decoded += take
            if was_prompt:
                self._prompt_decoded += take
            if seq.output >= 0:
                try:
                    self._sample(seq)
                except Exception as e:
                    log.exception("model %s: sampling failed", self._name)
                    self._finish(seq, "error", error=f"sampling failed: {e}")

    def _sample(self, seq: _Sequence) -> None:
        job = seq.job
        token = int(llama_cpp.llama_sampler_sample(seq.sampler, self._ctx, seq.output))
        logprob = None
        if job.sampling.top_logprobs is not None:
            logits = llama_cpp.llama_get_logits_ith(self._ctx, seq.output)
            logprob = logprob_of(logits, self._n_vocab, token, job.sampling.top_logprobs)
        if self._weights.is_end(token):
            self._finish(seq, "stop", text=seq.text.flush())
            return
        seq.generated += 1
        self._generated += 1
        seq.tokens.append(token)
        text = seq.text.push(self._weights.piece(token))
        if seq.text.stopped:
            self._finish(seq, "stop", text=text, logprob=logprob)
        elif seq.generated >= job.max_tokens or len(seq.tokens) >= self._n_ctx:
            self._finish(seq, "length", text=text + seq.text.flush(), logprob=logprob)
        else:
            job.emitted += 1
            _emit(job, Piece(text, token, logprob))

    def _finish(
        self,
        seq: _Sequence,
        reason: FinishReason,
        *,
        text: str = "",
        logprob: Any = None,
        error: str | None = None,
    ) -> None:
        job = seq.job
        del self._active[job.slot]
        free_sampler(seq.sampler)
        if reason == "error":
            self._failed += 1
            llama_cpp.llama_memory_seq_rm(self._memory, job.slot // self._stride, -1, -1)
            cached: tuple[int, ...] = ()
        else:
            cached = tuple(seq.tokens[: seq.n_past])
        _emit(job, Finished(reason, text, seq.generated, cached, logprob=logprob, error=error))


def _emit(job: DecodeJob, event: Event) -> None:
    try:
        job.emit(event)
    except Exception:  # the loop is gone (shutdown): nobody is listening any more
        log.debug("dropped an event of slot %d", job.slot, exc_info=True)
