from __future__ import annotations

import asyncio
import io

import pytest

from sluiceway.bench.progress import LiveStats, format_progress, showing_progress

pytestmark = pytest.mark.anyio


class _Pipe(io.StringIO):
    """An output that tells when something was written."""

    def __init__(self) -> None:
        super().__init__()
        self.written = asyncio.Event()

    def write(self, s: str) -> int:
        self.written.set()
        return super().write(s)


class _Terminal(_Pipe):
    def isatty(self) -> bool:
        return True


def test_format() -> None:
    stats = LiveStats(label="c=4", warmup=2.0, done=10, errors=1, inflight=4)
    assert format_progress(stats, 1.0, 5.0).startswith("[c=4 warm-up]    1.0s  done 10")
    line = format_progress(stats, 3.0, 5.0)
    assert line == "[c=4]    3.0s  done 10      5.0 req/s  err 1  inflight 4"
    stats.dropped = 3
    assert format_progress(stats, 3.0, 5.0).endswith("dropped 3")
    assert stats.statistics()["done"] == 10


async def test_lines_on_a_pipe() -> None:
    out = _Pipe()
    stats = LiveStats(label="7/s")
    async with showing_progress(stats, out, interval=0.01):
        await out.written.wait()
    first = out.getvalue().splitlines()[0]
    assert first.startswith("[7/s]") and "req/s" in first
    assert "\r" not in out.getvalue()


async def test_redrawn_in_place_on_a_terminal() -> None:
    out = _Terminal()
    async with showing_progress(LiveStats(label="c=1"), out, interval=0.01):
        await out.written.wait()
    text = out.getvalue()
    assert text.startswith("\r[c=1]")
    assert text.endswith("\r\x1b[K")  # the line is cleared at the end
    assert "\n" not in text


async def test_nothing_without_an_output() -> None:
    async with showing_progress(LiveStats(label="c=1"), None, interval=0.01):
        await asyncio.sleep(0.03)


async def test_errors_in_the_body_propagate() -> None:
    with pytest.raises(KeyError):
        async with showing_progress(LiveStats(label="c=1"), io.StringIO(), interval=0.01):
            raise KeyError("x")
