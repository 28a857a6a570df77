"""The generators against a real aiohttp server on 127.0.0.1: behaviour, never speed."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import numpy as np
import pytest

from sluiceway.bench import workloads
from sluiceway.bench.loadgen import (
    Target,
    poisson_offsets,
    preflight,
    run_closed,
    run_open,
)
from sluiceway.bench.report import CONNECT, STREAM_ERROR, TIMEOUT, summarize
from sluiceway.errors import InvalidRequest, Unavailable

if TYPE_CHECKING:
    from conftest import BenchServer

pytestmark = pytest.mark.anyio

EMB = workloads.embeddings("m", "short", 2, distinct_bodies=8)


async def test_closed_loop_by_request_count(server: BenchServer) -> None:
    run = await run_closed(Target(server.url + "/v1/embeddings"), EMB, 4, requests=50)
    assert run.status.size == 50
    assert np.all(run.status == 200)
    assert np.all(run.nbytes > 0)
    assert np.all(run.latency > 0)
    assert np.all(np.isnan(run.ttft))
    assert server.hits["/v1/embeddings"] == 50
    s = summarize(run)
    assert s.ok == 50
    assert s.items_per_s == pytest.approx(2 * s.throughput_rps)


async def test_closed_loop_by_duration_excludes_warmup(server: BenchServer) -> None:
    run = await run_closed(Target(server.url + "/v1/embeddings"), EMB, 2, duration=0.4, warmup=0.2)
    assert np.all(run.status == 200)
    assert np.all(run.start >= 0)  # measured requests started after the warm-up
    assert np.all(run.start < 0.4)
    # the server saw the warm-up requests too (how many of each depends on the machine)
    assert server.hits["/v1/embeddings"] >= max(1, run.status.size)
    assert run.elapsed >= 0.4


async def test_http_errors_are_counted_by_status(server: BenchServer) -> None:
    run = await run_closed(Target(server.url + "/flaky"), EMB, 1, requests=30)
    s = summarize(run)
    assert s.requests == 30
    assert dict(s.error_kinds) == {"http_503": 10}
    assert s.ok == 20


async def test_timeouts_are_recorded(server: BenchServer) -> None:
    run = await run_closed(Target(server.url + "/slow", timeout=0.2), EMB, 2, requests=2)
    assert list(run.status) == [TIMEOUT, TIMEOUT]
    assert summarize(run).error_kinds == {"timeout": 2}


async def test_connect_errors_are_recorded(closed_port: int) -> None:
    run = await run_closed(
        Target(f"http://127.0.0.1:{closed_port}/v1/embeddings"), EMB, 1, requests=3
    )
    assert list(run.status) == [CONNECT] * 3


async def test_streams_record_ttft_and_chunks(server: BenchServer) -> None:
    wl = workloads.chat("m", prompt_tokens=8, max_tokens=5, stream=True)
    run = await run_closed(Target(server.url + "/v1/chat/completions"), wl, 3, requests=12)
    assert np.all(run.status == 200)
    assert np.all(run.chunks == 5)  # [DONE] is not a chunk
    assert not np.any(np.isnan(run.ttft))
    assert np.all(run.ttft > 0)
    assert np.all(run.ttft <= run.latency)
    s = summarize(run)
    assert s.ttft_ms is not None and s.chunks_per_s is not None


async def test_non_stream_generation_has_no_ttft(server: BenchServer) -> None:
    wl = workloads.completions("m", prompt_tokens=8, max_tokens=5)
    run = await run_closed(Target(server.url + "/v1/chat/completions"), wl, 1, requests=3)
    assert np.all(run.status == 200)
    assert np.all(np.isnan(run.ttft))


async def test_error_event_in_a_stream_is_an_error(server: BenchServer) -> None:
    wl = workloads.chat("m", prompt_tokens=8, max_tokens=5, stream=True)
    run = await run_closed(Target(server.url + "/stream-error"), wl, 1, requests=2)
    assert list(run.status) == [STREAM_ERROR, STREAM_ERROR]
    assert summarize(run).error_kinds == {"stream_error": 2}


async def test_open_loop_sends_every_arrival(server: BenchServer) -> None:
    rate, duration, warmup = 200.0, 0.5, 0.1
    run = await run_open(
        Target(server.url + "/v1/embeddings"), EMB, rate, duration=duration, warmup=warmup, seed=7
    )
    offsets = poisson_offsets(rate, warmup + duration, 7)
    measured = int(np.count_nonzero(offsets >= warmup))
    assert run.status.size == measured
    assert run.dropped == 0
    assert np.all(run.status == 200)
    assert run.lag.size == measured
    assert np.all(run.lag >= 0)
    assert server.hits["/v1/embeddings"] == offsets.size
    assert summarize(run).lag_ms is not None


async def test_open_loop_drops_over_max_outstanding(server: BenchServer) -> None:
    # Each request is held 2 s, far past the 0.3 s of arrivals: only 2 can ever be in flight.
    rate, duration = 100.0, 0.3
    run = await run_open(
        Target(server.url + "/slow?s=2"), EMB, rate, duration=duration, max_outstanding=2, seed=1
    )
    arrivals = poisson_offsets(rate, duration, 1).size
    assert arrivals > 10
    assert server.max_active <= 2
    assert run.status.size + run.dropped == arrivals
    assert run.dropped > 0
    assert np.all(run.status == 200)


def test_poisson_offsets() -> None:
    a = poisson_offsets(1000.0, 10.0, 3)
    assert np.array_equal(a, poisson_offsets(1000.0, 10.0, 3))
    assert np.all(np.diff(a) > 0)
    assert a[-1] < 10.0
    assert 9500 < a.size < 10500  # seeded, so this is a fixed number
    gaps = np.diff(a)
    assert np.std(gaps) == pytest.approx(np.mean(gaps), rel=0.05)  # exponential: sd == mean


async def test_progress_lines_are_well_formed(server: BenchServer) -> None:
    out = io.StringIO()
    await run_closed(Target(server.url + "/v1/embeddings"), EMB, 1, duration=1.2, progress=out)
    # how many ticks land inside 1.2 s depends on the machine; their shape does not
    assert all(line.startswith("[c=1") for line in out.getvalue().splitlines())


async def test_preflight(server: BenchServer, closed_port: int) -> None:
    status, head = await preflight(Target(server.url + "/v1/embeddings"), EMB)
    assert status == 200
    assert head.startswith(b'{"object":"list"')
    status, _ = await preflight(Target(server.url + "/nowhere"), EMB)
    assert status == 404  # an answer: reachable
    with pytest.raises(Unavailable):
        await preflight(Target(f"http://127.0.0.1:{closed_port}/v1/embeddings"), EMB)
    with pytest.raises(Unavailable):
        await preflight(Target(server.url + "/slow", timeout=0.2), EMB)


async def test_bad_levels_are_refused(server: BenchServer) -> None:
    target = Target(server.url + "/v1/embeddings")
    with pytest.raises(InvalidRequest):
        await run_closed(target, EMB, 0, requests=1)
    with pytest.raises(InvalidRequest):
        await run_open(target, EMB, 0.0)
    with pytest.raises(InvalidRequest):
        await run_closed(target, EMB, 1, requests=0)
    with pytest.raises(InvalidRequest):
        await run_open(target, EMB, 1.0, warmup=-1.0)
