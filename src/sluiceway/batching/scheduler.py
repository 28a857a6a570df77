"""The dynamic batching scheduler of one local encoder model.

Two coroutines and one engine thread::

    submit() ─► pending ─► cutter ──(queue of 1: the prefetched batch)──► runner ─► engine thread
                             ▲ policy.decide()                              │ pad into reused
                             └────────────── wake on arrival / engine idle ◄┘ buffers, run, pool

The cutter asks the pure policy what to do; the runner hands each batch to the model's
dedicated thread and delivers the vectors back on the loop. Every job is resolved on every
path: a result, ``RequestTimeout`` (deadline passed before it ran), ``EngineError`` (its batch
failed; other batches are unaffected) or ``Unavailable`` (closed). Inputs whose job is
already done (client disconnected, deadline, an error in another batch) are skipped, never run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sluiceway.batching.buffers import PaddedBuffers
from sluiceway.batching.policy import BatchLimits, Cut, decide
from sluiceway.clock import Clock
from sluiceway.engines.protocol import EncoderEngine, Float32Array, Int64Array
from sluiceway.errors import EngineError, RequestTimeout, Unavailable

log = logging.getLogger(__name__)


@dataclass(slots=True, eq=False)
class Job:
    """One client request; each of its inputs fills one row of ``vectors``."""

    future: asyncio.Future[None]
    deadline: float
    vectors: Float32Array
    remaining: int


@dataclass(slots=True, eq=False)
class WorkItem:
    job: Job
    row: int
    ids: Int64Array
    arrived: float
    length: int = field(init=False)

    def __post_init__(self) -> None:
        self.length = len(self.ids)


class BatchScheduler:
    """Cuts waiting inputs into batches and runs them on the engine thread."""

    def __init__(
        self,
        engine: EncoderEngine,
        limits: BatchLimits,
        *,
        clock: Clock,
        max_length: int,
        name: str,
        incoming: Callable[[], int] = lambda: 0,
        on_batch: Callable[[int, int, float], None] = lambda size, tokens, seconds: None,
        on_wait: Callable[[float], None] = lambda seconds: None,
        on_drop: Callable[[str, int], None] = lambda reason, count: None,
    ) -> None:
        self._engine = engine
        self._limits = limits
        self._clock = clock
        self._incoming = incoming
        self._on_batch = on_batch
        self._on_wait = on_wait
        self._on_drop = on_drop
        self._name = name
        self._buffers = PaddedBuffers(limits.max_batch_size, max_length)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"engine-{name}")
        self._pending: list[WorkItem] = []
        self._ready: asyncio.Queue[list[WorkItem]] = asyncio.Queue(maxsize=1)
        self._wake = asyncio.Event()
        self._engine_busy = False
        self._running: list[WorkItem] = []
        self._closed = False
        self._batches = 0
        self._items_run = 0

    # --- loop side -------------------------------------------------------------------------

    def submit(self, items: list[WorkItem]) -> None:
        if self._closed:
            raise Unavailable(f"model {self._name!r} is shutting down")
        self._pending.extend(items)
        self._wake.set()

    @property
    def idle(self) -> bool:
        return not self._pending and self._ready.empty() and not self._engine_busy

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """Cut and run batches until :meth:`close`."""
        async with asyncio.TaskGroup() as tg:
            runner = tg.create_task(self._runner())
            try:
                await self._cutter()
            finally:
                runner.cancel()

    def close(self) -> None:
        """Fail everything still waiting and stop the loops; the engine thread is released."""
        self._closed = True
        gone = Unavailable(f"model {self._name!r} shut down before this request was served")
        self._fail_all(self._pending, gone)
        self._pending = []
        while not self._ready.empty():
            self._fail_all(self._ready.get_nowait(), gone)
        self._fail_all(self._running, gone)  # the engine thread's result will be dropped
        self._wake.set()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def statistics(self) -> dict[str, Any]:
        return {
            "pending": len(self._pending),
            "prefetched": self._ready.qsize(),
            "engine_busy": self._engine_busy,
            "batches": self._batches,
            "inputs_run": self._items_run,
        }

    def __repr__(self) -> str:
        return f"BatchScheduler({self._name!r}, {self.statistics()})"

    # --- internals -------------------------------------------------------------------------

    async def _cutter(self) -> None:
        while not self._closed:
            self._wake.clear()
            self._purge()
            lengths = [it.length for it in self._pending]
            arrived = [it.arrived for it in self._pending]
            engine_idle = not self._engine_busy and self._ready.empty()
            decision = decide(
                lengths,
                arrived,
                self._clock.now(),
                self._limits,
                engine_idle=engine_idle,
                incoming=self._incoming(),
            )
            if isinstance(decision, Cut):
                chosen = set(decision.indices)
                batch = [self._pending[i] for i in decision.indices]
                self._pending = [it for i, it in enumerate(self._pending) if i not in chosen]
                await self._ready.put(batch)
                continue
            if decision.seconds is None:
                await self._wake.wait()
            else:
                try:
                    async with asyncio.timeout(decision.seconds):
                        await self._wake.wait()
                except TimeoutError:
                    pass

    async def _runner(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._ready.get()
            batch = [it for it in batch if not it.job.future.done()]
            if not batch:
                continue
            now = self._clock.now()
            for it in batch:
                self._on_wait(now - it.arrived)
            self._engine_busy = True
            self._running = batch
            try:
                vectors, seconds = await loop.run_in_executor(self._executor, self._execute, batch)
            except Exception as e:  # the engine failed this batch: fail exactly its jobs
                log.exception("engine %s failed a batch of %d", self._name, len(batch))
                self._fail_all(batch, EngineError(f"the model failed on this batch: {e}"))
            else:
                self._deliver(batch, vectors)
                self._on_batch(len(batch), max(it.length for it in batch) * len(batch), seconds)
            finally:
                self._engine_busy = False
                self._running = []
                self._wake.set()

    def _execute(self, batch: list[WorkItem]) -> tuple[Float32Array, float]:
        """On the engine thread: pad into the reused buffers, run, pool."""
        start = self._clock.now()
        ids, mask = self._buffers.fill([it.ids for it in batch])
        vectors = self._engine.run(ids, mask)
        return vectors, self._clock.now() - start

    def _deliver(self, batch: list[WorkItem], vectors: Float32Array) -> None:
        self._batches += 1
        self._items_run += len(batch)
        for it, vec in zip(batch, vectors, strict=True):
            job = it.job
            if job.future.done():
                continue
            job.vectors[it.row] = vec
            job.remaining -= 1
            if job.remaining == 0:
                job.future.set_result(None)

    def _purge(self) -> None:
        """Drop inputs whose job is done; time out jobs whose deadline passed (never run)."""
        now = self._clock.now()
        keep: list[WorkItem] = []
        dropped = {"cancelled": 0, "timeout": 0, "failed": 0}
        for it in self._pending:
            job = it.job
            if not job.future.done() and job.deadline <= now:
                job.future.set_exception(
                    RequestTimeout("the request's deadline passed while it waited in the queue")
                )
                dropped["timeout"] += 1
                continue
            if job.future.done():
                dropped["cancelled" if job.future.cancelled() else "failed"] += 1
                continue
            keep.append(it)
        if len(keep) != len(self._pending):
            self._pending = keep
            for reason, count in dropped.items():
                if count:
                    self._on_drop(reason, count)

    @staticmethod
    def _fail_all(batch: list[WorkItem], exc: Exception) -> None:
        for it in batch:
            if not it.job.future.done():
                it.job.future.set_exception(exc)
