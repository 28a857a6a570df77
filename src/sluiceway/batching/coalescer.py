"""Run small jobs on a worker thread, merging whatever queued up into one call.

Under light load every submission is its own call; under heavy load submissions that arrive
while a call runs are handled together by the next one. One executor hop per call, not per job.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Coalescer(Generic[T, R]):
    """``await submit(x)`` → ``fn([... x ...])[i]``, computed on ``executor``.

    ``fn`` maps a list to a list of the same length; it must not raise for one bad item
    (return an error value instead). If it raises anyway, every job of that call fails.
    """

    def __init__(
        self,
        fn: Callable[[list[T]], list[R]],
        executor: Executor,
        on_skip: Callable[[int], None] = lambda n: None,
    ) -> None:
        self._fn = fn
        self._on_skip = on_skip
        self._executor = executor
        self._waiting: list[tuple[T, asyncio.Future[R]]] = []
        self._busy = False
        self.calls = 0
        self.in_flight = 0

    async def submit(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[R] = loop.create_future()
        self._waiting.append((item, fut))
        self.in_flight += 1
        if not self._busy:
            self._dispatch(loop)
        try:
            return await fut
        finally:
            self.in_flight -= 1

    def _dispatch(self, loop: asyncio.AbstractEventLoop) -> None:
        batch = [(item, fut) for item, fut in self._waiting if not fut.done()]
        if len(batch) != len(self._waiting):
            self._on_skip(len(self._waiting) - len(batch))  # cancelled before they ran
        self._waiting = []
        if not batch:
            self._busy = False
            return
        self._busy = True
        self.calls += 1
        items = [item for item, _ in batch]
        call = loop.run_in_executor(self._executor, self._fn, items)
        call.add_done_callback(lambda f: self._finish(loop, batch, f))

    def _finish(
        self,
        loop: asyncio.AbstractEventLoop,
        batch: list[tuple[T, asyncio.Future[R]]],
        call: asyncio.Future[list[R]],
    ) -> None:
        exc = call.exception() if not call.cancelled() else asyncio.CancelledError()
        if exc is not None:
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
        else:
            for (_, fut), result in zip(batch, call.result(), strict=True):
                if not fut.done():
                    fut.set_result(result)
        self._dispatch(loop)
