"""The load generator: closed-loop workers and open-loop Poisson arrivals over aiohttp.

Closed loop (:func:`run_closed`): ``concurrency`` workers each send back-to-back, for
``warmup`` seconds that are not recorded and then ``duration`` seconds (or until
``requests`` measured requests were sent). Throughput is what the server sustains at that
concurrency.

Open loop (:func:`run_open`): arrivals follow a Poisson process at ``rate`` requests/s (seeded
exponential gaps), each arrival its own task; latency therefore includes queueing at the
server, as real independent clients see it. Outstanding requests are capped at
``max_outstanding``; an arrival that finds the cap reached is counted as *dropped by the
generator*, never queued without bound. If the generator itself falls behind schedule it sends
at once and records the delay as ``lag`` (reported), so a saturated client is visible.

One :class:`aiohttp.ClientSession` per load level, with a keep-alive ``TCPConnector`` limited to
the concurrency (open loop: to ``max_outstanding``). Bodies are pre-encoded by the
:class:`~sluiceway.bench.workloads.Workload`; per request the generator only reads the response
(whole, or line by line for SSE to time the first ``data:`` chunk) and appends a few numbers.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TextIO

import aiohttp
import numpy as np

from sluiceway.bench.progress import LiveStats, showing_progress
from sluiceway.bench.report import (
    CLIENT,
    CONNECT,
    DISCONNECT,
    STREAM_ERROR,
    TIMEOUT,
    FloatArray,
    Mode,
    RunResult,
)
from sluiceway.bench.workloads import Workload
from sluiceway.errors import InvalidRequest, Unavailable


@dataclass(frozen=True, slots=True)
class Target:
    """Where to send: the endpoint URL, extra headers and the per-request timeout (seconds)."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 30.0


@dataclass(slots=True)
class _Samples:
    """Per-request numbers, appended as requests finish (lists: cheap appends)."""

    origin: float
    #: End of the measured window (inf when bounded by a request count).
    closes: float = math.inf
    #: Successful requests that *finished* inside the window, whenever they started.
    window_ok: int = 0
    start: list[float] = field(default_factory=list)
    latency: list[float] = field(default_factory=list)
    status: list[int] = field(default_factory=list)
    nbytes: list[int] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    chunks: list[int] = field(default_factory=list)
    lag: list[float] = field(default_factory=list)

    def result(
        self, mode: Mode, load: float, workload: Workload, window: float, dropped: int = 0
    ) -> RunResult:
        return RunResult(
            mode=mode,
            load=load,
            workload=workload.name,
            items_per_request=workload.items_per_request,
            window=window,
            start=np.asarray(self.start, dtype=np.float64) - self.origin,
            latency=np.asarray(self.latency, dtype=np.float64),
            status=np.asarray(self.status, dtype=np.int64),
            nbytes=np.asarray(self.nbytes, dtype=np.int64),
            ttft=np.asarray(self.ttft, dtype=np.float64),
            chunks=np.asarray(self.chunks, dtype=np.int64),
            lag=np.asarray(self.lag, dtype=np.float64),
            dropped=dropped,
            completed_in_window=None if math.isinf(self.closes) else self.window_ok,
        )


def _session(target: Target, limit: int) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=limit, keepalive_timeout=60.0)
    headers = {"Content-Type": "application/json", **target.headers}
    return aiohttp.ClientSession(
        connector=connector,
        headers=headers,
        timeout=aiohttp.ClientTimeout(total=target.timeout),
        skip_auto_headers=("User-Agent",),
    )


_Outcome = tuple[float, int, int, float, int]  # start, status, bytes, ttft, chunks


async def _read_stream(resp: aiohttp.ClientResponse, t0: float) -> tuple[int, float, int, int]:
    """Read an SSE body; return (status, ttft, chunks, bytes). TTFT = first ``data:`` line."""
    ttft, chunks, nbytes, status = math.nan, 0, 0, resp.status
    async for line in resp.content:
        nbytes += len(line)
        if line.startswith(b"data:"):
            payload = line[5:].strip()
            if payload == b"[DONE]":
                continue
            if chunks == 0:
                ttft = time.perf_counter() - t0
            chunks += 1
            if payload.startswith(b'{"error"'):
                status = STREAM_ERROR
        elif line.startswith(b"event: error"):
            status = STREAM_ERROR
    return status, ttft, chunks, nbytes


async def _request(
    session: aiohttp.ClientSession,
    target: Target,
    body: bytes,
    stream: bool,
    t0: float | None = None,
) -> _Outcome:
    """Send one request; return (start, status, bytes, ttft, chunks). Never raises ClientError.

    ``t0`` is the start to record when the caller already read the clock to decide whether
    this request is measured (so its recorded start agrees with that decision).
    """
    t0 = time.perf_counter() if t0 is None else t0
    ttft, chunks, nbytes = math.nan, 0, 0
    try:
        async with session.post(target.url, data=body) as resp:
            if stream and resp.status == 200:
                status, ttft, chunks, nbytes = await _read_stream(resp, t0)
            else:
                status, nbytes = resp.status, len(await resp.read())
    except TimeoutError:
        status = TIMEOUT
    except aiohttp.ClientConnectorError:
        status = CONNECT
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientOSError):
        status = DISCONNECT
    except (aiohttp.ClientError, ValueError):  # ValueError: an SSE line over the buffer limit
        status = CLIENT
    return t0, status, nbytes, ttft, chunks


def _record(
    samples: _Samples, live: LiveStats, outcome: _Outcome, measured: bool, lag: float | None = None
) -> None:
    end = time.perf_counter()
    start, status, nbytes, ttft, chunks = outcome
    live.done += 1
    if not 200 <= status < 300:
        live.errors += 1
    elif samples.origin <= end <= samples.closes:
        samples.window_ok += 1
    if not measured:
        return
    samples.start.append(start)
    samples.latency.append(end - start)
    samples.status.append(status)
    samples.nbytes.append(nbytes)
    samples.ttft.append(ttft)
    samples.chunks.append(chunks)
    if lag is not None:
        samples.lag.append(lag)


async def run_closed(
    target: Target,
    workload: Workload,
    concurrency: int,
    *,
    duration: float = 10.0,
    warmup: float = 0.0,
    requests: int | None = None,
    progress: TextIO | None = None,
) -> RunResult:
    """``concurrency`` workers sending back-to-back; see the module docstring."""
    if concurrency < 1:
        raise InvalidRequest(f"concurrency must be >= 1, not {concurrency}")
    if requests is None and duration <= 0:
        raise InvalidRequest("give a positive duration or a request count")
    if (requests is not None and requests < 1) or warmup < 0:
        raise InvalidRequest("requests must be >= 1 and warmup >= 0")
    live = LiveStats(label=f"c={concurrency}", warmup=warmup)
    counter = itertools.count()
    measured_count = itertools.count()
    opened = time.perf_counter() + warmup
    samples = _Samples(origin=opened, closes=opened + duration if requests is None else math.inf)
    deadline = math.inf if requests is not None else opened + duration

    async def worker() -> None:
        while True:
            now = time.perf_counter()
            if now >= deadline:
                return
            measured = now >= opened
            if measured and requests is not None and next(measured_count) >= requests:
                return
            live.inflight += 1
            try:
                outcome = await _request(
                    session, target, workload.body(next(counter)), workload.stream, now
                )
            finally:
                live.inflight -= 1
            _record(samples, live, outcome, measured)

    async with (
        _session(target, concurrency) as session,
        showing_progress(live, progress),
        asyncio.TaskGroup() as tg,
    ):
        for _ in range(concurrency):
            tg.create_task(worker())
    window = 0.0 if requests is not None else duration
    return samples.result("closed", float(concurrency), workload, window)


def poisson_offsets(rate: float, horizon: float, seed: int) -> FloatArray:
    """Arrival times (seconds from 0) of a Poisson process of ``rate``/s, all < ``horizon``."""
    rng = np.random.default_rng(seed)
    chunks: list[FloatArray] = []
    t = 0.0
    while t < horizon:
        gaps = rng.exponential(1.0 / rate, size=max(16, int(rate * horizon * 0.25) + 16))
        times = t + np.cumsum(gaps)
        chunks.append(times)
        t = float(times[-1])
    offsets = np.concatenate(chunks)
    return offsets[offsets < horizon]


async def run_open(
    target: Target,
    workload: Workload,
    rate: float,
    *,
    duration: float = 10.0,
    warmup: float = 0.0,
    max_outstanding: int = 256,
    seed: int = 0,
    progress: TextIO | None = None,
) -> RunResult:
    """Poisson arrivals at ``rate``/s for ``warmup + duration`` s; see the module docstring."""
    if rate <= 0 or duration <= 0 or warmup < 0:
        raise InvalidRequest("rate and duration must be positive, warmup >= 0")
    if max_outstanding < 1:
        raise InvalidRequest(f"max_outstanding must be >= 1, not {max_outstanding}")
    live = LiveStats(label=f"{rate:g}/s", warmup=warmup)
    offsets = poisson_offsets(rate, warmup + duration, seed)
    dropped = 0

    async def one(index: int, scheduled: float, measured: bool) -> None:
        try:
            outcome = await _request(session, target, workload.body(index), workload.stream)
        finally:
            live.inflight -= 1
        # a timer may fire a hair early; lag means "late by"
        _record(samples, live, outcome, measured, max(0.0, outcome[0] - scheduled))

    async with _session(target, max_outstanding) as session, showing_progress(live, progress):
        origin = time.perf_counter()
        samples = _Samples(origin=origin + warmup, closes=origin + warmup + duration)
        async with asyncio.TaskGroup() as tg:
            for index, offset in enumerate(offsets.tolist()):
                scheduled = origin + offset
                # sleep(0) when behind schedule still lets responses be processed
                await asyncio.sleep(max(0.0, scheduled - time.perf_counter()))
                measured = offset >= warmup
                if live.inflight >= max_outstanding:
                    live.dropped += 1
                    dropped += measured
                    continue
                live.inflight += 1
                tg.create_task(one(index, scheduled, measured))
    return samples.result("open", rate, workload, duration, dropped)


async def preflight(target: Target, workload: Workload) -> tuple[int, bytes]:
    """Send the workload's first body once; return (status, start of the response body).

    Raises :class:`~sluiceway.errors.Unavailable` when no HTTP answer arrives (connection
    refused, timeout). Any HTTP status counts as reachable: a 404 for a wrong model name is a
    result for the caller to warn about, not a failure to reach the server.
    """
    try:
        async with (
            _session(target, 1) as session,
            session.post(target.url, data=workload.body(0)) as resp,
        ):
            return resp.status, (await resp.read())[:300]
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise Unavailable(f"cannot reach {target.url}: {exc or type(exc).__name__}") from exc
