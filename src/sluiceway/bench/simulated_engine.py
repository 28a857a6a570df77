"""The timing model of one simulated LLM backend: sequence slots, prefill, decode, faults.

A request becomes a *sequence*. At most ``max_seqs`` sequences run at once; the rest wait in
FIFO order (``queued``). A running sequence first *prefills*: the prompt's cached tokens are
looked up in the :class:`~sluiceway.bench.simulated_cache.PrefixCache`, then it takes
``overhead_ms + uncached_tokens x prefill_us_per_token`` of simulated compute. Prefill compute
is shared: at most ``prefill_concurrency`` prefills run at once (default 1, like a GPU that
prefills one batch at a time), so recomputed prefixes cost every queued request time. After
prefill the prompt's blocks are committed to the cache and the sequence *decodes* one token
every ``1 / decode_tps`` seconds (0 = as fast as possible), without limiting other sequences.

The engine only waits (``asyncio.sleep``); it computes nothing. Counters are plain integers
read by :meth:`SimulatedEngine.statistics` (the ``/metrics`` and ``/_stats`` endpoints).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from typing import Literal

from sluiceway.bench.simulated_cache import PrefixCache
from sluiceway.errors import InvalidRequest

FaultMode = Literal["none", "refuse", "oom", "slow", "die_mid_stream", "unhealthy"]
FAULT_MODES: tuple[FaultMode, ...] = (
    "none",
    "refuse",
    "oom",
    "slow",
    "die_mid_stream",
    "unhealthy",
)


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """Timing and capacity of one simulated backend (see the module docstring)."""

    prefill_us_per_token: float = 200.0
    overhead_ms: float = 5.0
    decode_tps: float = 50.0
    max_seqs: int = 8
    prefill_concurrency: int = 1
    cache_blocks: int = 512
    block_tokens: int = 16
    default_max_tokens: int = 16
    model: str = "sim"

    def __post_init__(self) -> None:
        if self.prefill_us_per_token < 0 or self.overhead_ms < 0 or self.decode_tps < 0:
            raise InvalidRequest("timings must be >= 0")
        if self.max_seqs < 1 or self.prefill_concurrency < 1:
            raise InvalidRequest("max_seqs and prefill_concurrency must be >= 1")
        if self.cache_blocks < 0 or self.block_tokens < 1 or self.default_max_tokens < 1:
            raise InvalidRequest("cache_blocks >= 0, block_tokens >= 1, default_max_tokens >= 1")


@dataclass(frozen=True, slots=True)
class Fault:
    """An injected failure mode.

    ``refuse``: the backend stops listening and drops its open connections (connect errors).
    ``oom``: answer 503 with an "out of memory" error body. ``slow``: wait ``delay_ms`` before
    the first byte. ``die_mid_stream``: drop the connection after ``after_chunks`` chunks (a
    non-streamed request is dropped after prefill). ``unhealthy``: ``/health`` answers 503.
    ``rate`` is the share of requests affected (oom, slow, die_mid_stream); ``duration_s``,
    when set, reverts the backend to ``none`` after that many seconds.
    """

    mode: FaultMode = "none"
    rate: float = 1.0
    delay_ms: float = 1000.0
    after_chunks: int = 2
    duration_s: float | None = None

    def __post_init__(self) -> None:
        if self.mode not in FAULT_MODES:
            raise InvalidRequest(f"unknown fault mode {self.mode!r}; one of {FAULT_MODES}")
        if not 0.0 <= self.rate <= 1.0:
            raise InvalidRequest("fault rate must be within [0, 1]")
        if self.delay_ms < 0 or self.after_chunks < 0:
            raise InvalidRequest("delay_ms and after_chunks must be >= 0")
        if self.duration_s is not None and self.duration_s <= 0:
            raise InvalidRequest("duration_s must be > 0")

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(slots=True)
class Counters:
    """Monotonic totals since start (or the last reset)."""

    requests: int = 0
    completed: int = 0
    aborted: int = 0  # cut short: the client went away, or an injected fault dropped it
    prompt_tokens: int = 0
    cached_tokens: int = 0
    prefill_tokens: int = 0  # prompt tokens actually computed (prompt - cached)
    generated_tokens: int = 0
    faults: dict[str, int] = field(default_factory=dict)


class SimulatedEngine:
    """Slots, prefill compute, prompt cache and counters of one simulated backend."""

    def __init__(self, settings: EngineSettings, *, seed: int = 0) -> None:
        self.settings = settings
        self.cache = PrefixCache(settings.cache_blocks, settings.block_tokens)
        self.counters = Counters()
        self.fault = Fault()
        self._slots = asyncio.Semaphore(settings.max_seqs)
        self._prefill = asyncio.Semaphore(settings.prefill_concurrency)
        self._rng = random.Random(seed)
        self.running = 0
        self.queued = 0
        self.peak_running = 0

    def fault_hits(self, *modes: FaultMode) -> bool:
        """Whether the current fault is one of ``modes`` and strikes this request (its rate)."""
        fault = self.fault
        if fault.mode not in modes:
            return False
        if fault.rate < 1.0 and self._rng.random() >= fault.rate:
            return False
        self.counters.faults[fault.mode] = self.counters.faults.get(fault.mode, 0) + 1
        return True

    @asynccontextmanager
    async def sequence(self) -> AsyncIterator[None]:
        """Hold one of ``max_seqs`` slots for the body of the block (FIFO queue beyond)."""
        self.counters.requests += 1
        self.queued += 1
        try:
            await self._slots.acquire()
        finally:
            self.queued -= 1
        self.running += 1
        self.peak_running = max(self.peak_running, self.running)
        try:
            yield
        finally:
            self.running -= 1
            self._slots.release()

    async def prefill(self, tokens: Sequence[str]) -> int:
        """Simulate the prefill of ``tokens``; return how many came from the cache."""
        settings = self.settings
        async with self._prefill:
            hashes = self.cache.hashes(tokens)
            cached = self.cache.match(hashes)
            computed = len(tokens) - cached
            seconds = settings.overhead_ms / 1e3 + computed * settings.prefill_us_per_token / 1e6
            if seconds > 0:
                await asyncio.sleep(seconds)
            self.cache.commit(hashes)
        c = self.counters
        c.prompt_tokens += len(tokens)
        c.cached_tokens += cached
        c.prefill_tokens += computed
        return cached

    @property
    def token_interval(self) -> float:
        """Seconds between two generated tokens of one sequence."""
        tps = self.settings.decode_tps
        return 1.0 / tps if tps > 0 else 0.0

    def reset(self) -> None:
        """Empty the cache and zero the counters (between benchmark contenders)."""
        self.cache.clear()
        self.counters = Counters()
        self.peak_running = self.running

    def statistics(self) -> dict[str, object]:
        c = self.counters
        return {
            "requests": c.requests,
            "completed": c.completed,
            "aborted": c.aborted,
            "prompt_tokens": c.prompt_tokens,
            "cached_tokens": c.cached_tokens,
            "prefill_tokens": c.prefill_tokens,
            "generated_tokens": c.generated_tokens,
            "faults": dict(c.faults),
            "running": self.running,
            "queued": self.queued,
            "peak_running": self.peak_running,
            "cache": self.cache.statistics(),
            "fault": self.fault.to_dict(),
        }

    def __repr__(self) -> str:
        return (
            f"SimulatedEngine(running={self.running}/{self.settings.max_seqs}, "
            f"queued={self.queued}, fault={self.fault.mode}, {self.cache!r})"
        )
