from __future__ import annotations

import dataclasses
import math

import msgspec
import numpy as np
import pytest

from sluiceway.bench.report import (
    CONNECT,
    STREAM_ERROR,
    TIMEOUT,
    RunResult,
    error_kind,
    format_brief,
    format_table,
    percentiles,
    sample_warning,
    summarize,
)


def run(
    latency: list[float],
    status: list[int],
    *,
    window: float = 10.0,
    mode: str = "closed",
    start: list[float] | None = None,
    ttft: list[float] | None = None,
    chunks: list[int] | None = None,
    items: int = 1,
    dropped: int = 0,
) -> RunResult:
    n = len(latency)
    return RunResult(
        mode="closed" if mode == "closed" else "open",
        load=4.0,
        workload="w",
        items_per_request=items,
        window=window,
        start=np.asarray(start if start is not None else [0.0] * n, dtype=np.float64),
        latency=np.asarray(latency, dtype=np.float64),
        status=np.asarray(status, dtype=np.int64),
        nbytes=np.full(n, 10, dtype=np.int64),
        ttft=np.asarray(ttft if ttft is not None else [math.nan] * n, dtype=np.float64),
        chunks=np.asarray(chunks if chunks is not None else [0] * n, dtype=np.int64),
        lag=np.zeros(n if mode == "open" else 0),
        dropped=dropped,
    )


def test_percentiles_on_known_array() -> None:
    p = percentiles(np.arange(1, 101, dtype=np.float64))
    assert p == pytest.approx({"p50": 50.5, "p90": 90.1, "p99": 99.01, "p99.9": 99.901})


def test_percentiles_of_nothing_are_nan() -> None:
    p = percentiles(np.zeros(0))
    assert set(p) == {"p50", "p90", "p99", "p99.9"}
    assert all(math.isnan(v) for v in p.values())


def test_error_kind_names() -> None:
    assert error_kind(503) == "http_503"
    assert error_kind(TIMEOUT) == "timeout"
    assert error_kind(CONNECT) == "connect"
    assert error_kind(STREAM_ERROR) == "stream_error"
    assert error_kind(-99) == "unknown"


def test_summary_uses_successful_requests_only() -> None:
    # 100 fast successes and slow failures that must not move the percentiles
    latency = [i / 1000 for i in range(1, 101)] + [9.0, 9.0, 9.0]
    s = summarize(run(latency, [200] * 100 + [503, 503, TIMEOUT], window=10.0, items=32))
    assert s.requests == 103
    assert s.ok == 100
    assert s.errors == 3
    assert dict(s.error_kinds) == {"http_503": 2, "timeout": 1}
    assert s.latency_ms["p50"] == pytest.approx(50.5)
    assert s.latency_ms["p99.9"] == pytest.approx(99.901)
    assert s.latency_ms["max"] == pytest.approx(100.0)
    assert s.latency_ms["mean"] == pytest.approx(50.5)
    assert s.throughput_rps == pytest.approx(10.0)  # 100 ok over the 10 s window
    assert s.items_per_s == pytest.approx(320.0)
    assert s.ttft_ms is None
    assert s.lag_ms is None
    assert s.bytes_received == 1030


def test_elapsed_stretches_to_the_last_completion() -> None:
    r = run([0.5, 3.0], [200, 200], window=2.0, start=[0.1, 1.0])
    assert r.elapsed == pytest.approx(4.0)
    assert summarize(r).throughput_rps == pytest.approx(0.5)


def test_count_bounded_run_measures_until_last_completion() -> None:
    r = run([1.0, 1.0], [200, 200], window=0.0, start=[0.0, 1.0])
    assert r.elapsed == pytest.approx(2.0)


def test_stream_figures() -> None:
    s = summarize(run([0.2, 0.4], [200, 200], window=1.0, ttft=[0.01, 0.03], chunks=[5, 7]))
    assert s.ttft_ms == pytest.approx({"p50": 20.0, "p90": 28.0, "p99": 29.8, "p99.9": 29.98})
    assert s.chunks_per_s == pytest.approx(12.0)
    # (0.2 - 0.01) / 4 and (0.4 - 0.03) / 6 seconds per chunk after the first
    assert s.tpot_ms is not None
    assert s.tpot_ms["p50"] == pytest.approx((47.5 + 61.6667) / 2, rel=1e-4)
    table = format_table([s])
    assert "ttft50" in table.splitlines()[0] and "chunks/s" in table.splitlines()[0]
    assert "12.0" in table.splitlines()[1]


def test_no_success_gives_nan_latency_and_zero_throughput() -> None:
    s = summarize(run([0.1], [CONNECT]))
    assert s.ok == 0
    assert s.throughput_rps == 0.0
    assert math.isnan(s.latency_ms["p99"])
    assert s.cdf_ms == ()


def test_open_loop_reports_lag_and_drops() -> None:
    s = summarize(run([0.1, 0.2], [200, 200], mode="open", dropped=3))
    assert s.lag_ms == {"p50": 0.0, "p99": 0.0}
    assert s.dropped == 3


def test_to_dict_is_json_and_cdf_is_monotonic() -> None:
    s = summarize(run([i / 100 for i in range(1, 201)], [200] * 200))
    doc = msgspec.json.decode(msgspec.json.encode(s.to_dict()))
    assert doc["latency_ms"]["p99"] == pytest.approx(s.latency_ms["p99"])
    qs = [q for q, _ in doc["cdf_ms"]]
    values = [v for _, v in doc["cdf_ms"]]
    assert qs[0] == 0.0 and qs[-1] == 100.0
    assert values == sorted(values)


def test_table_has_one_row_per_level() -> None:
    rows = [summarize(run([0.01, 0.02], [200, 429])), summarize(run([0.01], [200], mode="open"))]
    text = format_table(rows)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["load", "ok", "err"]
    assert lines[1].split()[0] == "c=4"
    assert "http_429=1" in lines[1]
    assert lines[2].split()[0] == "4/s"
    assert "ttft50" not in text


def test_brief_line() -> None:
    s = summarize(run([0.01, 0.03], [200, 200], window=1.0, items=4))
    assert format_brief(s) == ("c=4: 2.00 req/s (8.00 items/s), p50 20.0 p99 29.8 ms, errors 0")
    assert format_brief(summarize(run([0.01], [200], mode="open", dropped=2))).endswith(
        ", dropped 2"
    )


def test_sample_warning_below_100_successes() -> None:
    assert sample_warning(summarize(run([0.01] * 100, [200] * 100))) is None
    warning = sample_warning(summarize(run([0.01] * 99, [200] * 99)))
    assert warning is not None and "only 99" in warning


def test_window_throughput_counts_completions_inside_the_window() -> None:
    # Two requests started in the window, but five completed inside it (three had started
    # during warm-up): the in-window rate is 5 / 10 s, not 2 / 10 s.
    r = dataclasses.replace(run([1.0, 1.0], [200, 200], window=10.0, items=3), completed_in_window=5)
    s = summarize(r)
    assert s.window_throughput_rps == pytest.approx(0.5)
    assert s.window_items_per_s == pytest.approx(1.5)
    assert summarize(run([1.0], [200])).window_throughput_rps is None
