"""The scheduler with a fake engine: batching, isolation of failures, skipping dead work."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator

import numpy as np
import pytest

from sluiceway.batching.policy import BatchLimits
from sluiceway.batching.scheduler import BatchScheduler, Job, WorkItem
from sluiceway.clock import Clock, SystemClock
from sluiceway.errors import EngineError, RequestTimeout, Unavailable
from sluiceway.testing import FakeEncoder, ManualClock, eventually

LIMITS = BatchLimits(max_batch_size=8, max_batch_tokens=10_000, max_wait_s=0.002)


class Harness:
    def __init__(self, engine: FakeEncoder, clock: Clock) -> None:
        self.engine = engine
        self.clock = clock
        self.scheduler = BatchScheduler(engine, LIMITS, clock=clock, max_length=64, name="t")

    def submit(self, *rows: list[int], deadline: float = 1e12) -> Job:
        loop = asyncio.get_running_loop()
        job = Job(loop.create_future(), deadline, np.empty((len(rows), 8), np.float32), len(rows))
        now = self.clock.now()
        self.scheduler.submit(
            [WorkItem(job, i, np.asarray(r, dtype=np.int64), now) for i, r in enumerate(rows)]
        )
        return job


async def _harness(engine: FakeEncoder, clock: Clock) -> AsyncIterator[Harness]:
    h = Harness(engine, clock)
    task = asyncio.ensure_future(h.scheduler.run())
    try:
        yield h
    finally:
        h.scheduler.close()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.fixture
async def gated() -> AsyncIterator[Harness]:
    gate = threading.Event()
    async for h in _harness(FakeEncoder(gate=gate), SystemClock()):
        yield h
    gate.set()


@pytest.mark.anyio
async def test_inputs_arriving_while_the_engine_is_busy_run_together(gated: Harness) -> None:
    engine = gated.engine
    first = gated.submit([1, 2, 3])
    await eventually(lambda: engine.threads)  # first batch is inside the engine, held by the gate
    others = [gated.submit([10 + i, 20 + i]) for i in range(5)]
    assert engine.gate is not None
    engine.gate.set()
    await asyncio.gather(first.future, *(j.future for j in others))
    assert [len(b) for b in engine.batches] == [1, 5]


@pytest.mark.anyio
async def test_engine_runs_on_its_own_thread_and_results_land_in_order(gated: Harness) -> None:
    assert gated.engine.gate is not None
    gated.engine.gate.set()
    job = gated.submit([5, 6], [7], [8, 9, 10])
    await job.future
    assert gated.engine.threads and threading.current_thread().name not in gated.engine.threads
    assert all(name.startswith("engine-t") for name in gated.engine.threads)
    expected = FakeEncoder().run(
        np.array([[5, 6, 0], [7, 0, 0], [8, 9, 10]]), np.array([[1, 1, 0], [1, 0, 0], [1, 1, 1]])
    )
    np.testing.assert_array_equal(job.vectors, expected)


@pytest.mark.anyio
async def test_an_engine_error_fails_exactly_the_jobs_of_that_batch() -> None:
    async for h in _harness(FakeEncoder(fail_on=666), SystemClock()):
        bad = h.submit([1, 666])
        with pytest.raises(EngineError):
            await bad.future
        good = h.submit([1, 2])
        await good.future
        assert good.vectors.shape == (1, 8)


@pytest.mark.anyio
async def test_cancelled_work_is_never_run(gated: Harness) -> None:
    engine = gated.engine
    first = gated.submit([1])
    await eventually(lambda: engine.threads)
    doomed = gated.submit([4242])
    kept = gated.submit([7])
    doomed.future.cancel()
    assert engine.gate is not None
    engine.gate.set()
    await asyncio.gather(first.future, kept.future)
    assert [4242] not in [r[1:-1] for r in engine.seen_ids] and [4242] not in engine.seen_ids


@pytest.mark.anyio
async def test_expired_work_times_out_and_is_never_run() -> None:
    clock = ManualClock()
    gate = threading.Event()
    engine = FakeEncoder(gate=gate)
    async for h in _harness(engine, clock):
        first = h.submit([1])
        await eventually(lambda: engine.threads)
        late = h.submit([999], deadline=clock.now() + 1.0)
        clock.advance(2.0)
        gate.set()
        await first.future
        with pytest.raises(RequestTimeout):
            await late.future
        assert all(999 not in row for row in h.engine.seen_ids)


@pytest.mark.anyio
async def test_close_fails_waiting_work(gated: Harness) -> None:
    first = gated.submit([1])
    await eventually(lambda: gated.engine.threads)
    waiting = gated.submit([2])
    gated.scheduler.close()
    with pytest.raises(Unavailable):
        await waiting.future
    assert gated.engine.gate is not None
    gated.engine.gate.set()
    first.future.cancel()
