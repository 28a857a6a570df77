"""Live counters of a run and the progress line shown on stderr while it runs.

The generator bumps plain integer fields of :class:`LiveStats` (no locks: one event loop);
:func:`showing_progress` prints a line every ``interval`` seconds from a task it owns. On a
terminal the line is redrawn in place; otherwise one line per tick is written.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TextIO


@dataclass(slots=True)
class LiveStats:
    """Counters over the whole run, warm-up included; ``label`` names the load level."""

    label: str
    warmup: float = 0.0
    done: int = 0
    errors: int = 0
    inflight: int = 0
    dropped: int = 0
    started_at: float = field(default_factory=time.perf_counter)

    def statistics(self) -> dict[str, int | float | str]:
        return {
            "label": self.label,
            "done": self.done,
            "errors": self.errors,
            "inflight": self.inflight,
            "dropped": self.dropped,
            "elapsed_s": time.perf_counter() - self.started_at,
        }


def format_progress(stats: LiveStats, elapsed: float, rps: float) -> str:
    """``[c=16]   3.0s  done 1234  412.0 req/s  err 0  inflight 16``."""
    phase = " warm-up" if elapsed < stats.warmup else ""
    line = (
        f"[{stats.label}{phase}] {elapsed:6.1f}s  done {stats.done}  {rps:7.1f} req/s"
        f"  err {stats.errors}  inflight {stats.inflight}"
    )
    return line + (f"  dropped {stats.dropped}" if stats.dropped else "")


async def _tick(stats: LiveStats, out: TextIO, interval: float, redraw: bool) -> None:
    last_done, last_t = stats.done, time.perf_counter()
    while True:
        await asyncio.sleep(interval)
        now = time.perf_counter()
        rps = (stats.done - last_done) / (now - last_t)
        last_done, last_t = stats.done, now
        text = format_progress(stats, now - stats.started_at, rps)
        out.write(f"\r{text}\x1b[K" if redraw else text + "\n")
        out.flush()


@asynccontextmanager
async def showing_progress(
    stats: LiveStats, out: TextIO | None, interval: float = 1.0
) -> AsyncIterator[None]:
    """Print progress of ``stats`` to ``out`` (nothing when ``None``) while the body runs."""
    if out is None:
        yield
        return
    redraw = out.isatty()
    error: BaseException | None = None
    async with asyncio.TaskGroup() as tg:
        ticker = tg.create_task(_tick(stats, out, interval, redraw))
        try:
            yield
        except BaseException as exc:  # re-raised below as is, not wrapped in an ExceptionGroup
            error = exc
        finally:
            ticker.cancel()
    if redraw:
        out.write("\r\x1b[K")
        out.flush()
    if error is not None:
        raise error
