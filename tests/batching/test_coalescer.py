import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from sluiceway.batching.coalescer import Coalescer


@pytest.mark.anyio
async def test_submissions_during_a_call_are_merged_into_the_next() -> None:
    gate = threading.Event()
    calls: list[list[int]] = []

    def fn(items: list[int]) -> list[int]:
        calls.append(list(items))
        gate.wait(5)
        return [i * 2 for i in items]

    with ThreadPoolExecutor(1) as ex:
        c: Coalescer[int, int] = Coalescer(fn, ex)
        first = asyncio.ensure_future(c.submit(1))
        await asyncio.sleep(0.05)
        rest = [asyncio.ensure_future(c.submit(i)) for i in (2, 3, 4)]
        await asyncio.sleep(0.05)
        gate.set()
        assert await first == 2
        assert await asyncio.gather(*rest) == [4, 6, 8]
    assert calls == [[1], [2, 3, 4]]


@pytest.mark.anyio
async def test_cancelled_submission_is_never_processed() -> None:
    gate = threading.Event()
    seen: list[int] = []

    def fn(items: list[int]) -> list[int]:
        seen.extend(items)
        gate.wait(5)
        return items

    with ThreadPoolExecutor(1) as ex:
        c: Coalescer[int, int] = Coalescer(fn, ex)
        first = asyncio.ensure_future(c.submit(1))
        await asyncio.sleep(0.05)
        doomed = asyncio.ensure_future(c.submit(2))
        kept = asyncio.ensure_future(c.submit(3))
        await asyncio.sleep(0)
        doomed.cancel()
        gate.set()
        assert await first == 1 and await kept == 3
    assert seen == [1, 3]
    assert c.in_flight == 0


@pytest.mark.anyio
async def test_a_raising_function_fails_every_job_of_that_call() -> None:
    def fn(items: list[int]) -> list[int]:
        raise ValueError("boom")

    with ThreadPoolExecutor(1) as ex:
        c: Coalescer[int, int] = Coalescer(fn, ex)
        with pytest.raises(ValueError):
            await c.submit(1)


@pytest.mark.anyio
async def test_skipped_submissions_are_counted() -> None:
    gate = threading.Event()
    skipped: list[int] = []

    def fn(items: list[int]) -> list[int]:
        gate.wait(5)
        return items

    with ThreadPoolExecutor(1) as ex:
        c: Coalescer[int, int] = Coalescer(fn, ex, skipped.append)
        first = asyncio.ensure_future(c.submit(1))
        await asyncio.sleep(0.05)
        doomed = [asyncio.ensure_future(c.submit(i)) for i in (2, 3)]
        await asyncio.sleep(0)
        for d in doomed:
            d.cancel()
        gate.set()
        assert await first == 1
        await asyncio.sleep(0.05)
    assert skipped == [2]
