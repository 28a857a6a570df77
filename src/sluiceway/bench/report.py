"""Turning per-request samples into figures: throughput, latency percentiles, errors.

A :class:`RunResult` holds the raw samples of one load level (numpy arrays, one element per
measured request); :func:`summarize` reduces it to a :class:`Summary`. Percentiles are
``numpy.percentile`` (linear interpolation) over the real latency samples of the successful
requests, never derived from a mean. Throughput counts successful requests only, over the
measured window: from the end of warm-up until the later of the window's end and the last
measured request's completion (requests in flight at the end are waited for, so their
latency is counted and the rate is not inflated).

A request's outcome is one integer: its HTTP status, or a negative code for a failure before a
status arrived (:data:`CONNECT`, :data:`TIMEOUT`, :data:`DISCONNECT`, :data:`CLIENT`), or
:data:`STREAM_ERROR` for a 200 stream that carried an error event.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

Mode = Literal["closed", "open"]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

CONNECT = -1
TIMEOUT = -2
DISCONNECT = -3
CLIENT = -4
STREAM_ERROR = -5
_KIND_NAMES = {
    CONNECT: "connect",
    TIMEOUT: "timeout",
    DISCONNECT: "disconnected",
    CLIENT: "client_error",
    STREAM_ERROR: "stream_error",
}
PERCENTILES = (50.0, 90.0, 99.0, 99.9)
# Quantiles kept in the JSON so a latency CDF can be drawn without the raw samples.
CDF_GRID: tuple[float, ...] = (
    *(float(q) for q in range(0, 100, 2)),
    99.0,
    99.5,
    99.9,
    99.99,
    100.0,
)


def error_kind(status: int) -> str:
    """``"http_503"`` for an HTTP status, ``"timeout"`` etc. for the negative codes."""
    return _KIND_NAMES.get(status, "unknown") if status < 0 else f"http_{status}"


def percentile_key(q: float) -> str:
    """``50.0 -> "p50"``, ``99.9 -> "p99.9"``."""
    return f"p{q:g}"


def percentiles(samples: FloatArray, qs: Iterable[float] = PERCENTILES) -> dict[str, float]:
    """Percentiles of ``samples`` in the samples' unit; NaN for every key when empty."""
    qs = tuple(qs)
    if samples.size == 0:
        return {percentile_key(q): float("nan") for q in qs}
    values = np.percentile(samples, qs)
    return {percentile_key(q): float(v) for q, v in zip(qs, values, strict=True)}


@dataclass(frozen=True, slots=True)
class RunResult:
    """Raw samples of one load level, one array element per measured request.

    ``start`` is seconds since the measured window opened; ``latency`` and ``ttft`` are seconds
    (``ttft`` is NaN unless streamed); ``lag`` is how late an open-loop arrival was sent
    compared with its schedule (empty for closed loop, where it has no meaning).
    """

    mode: Mode
    load: float  # concurrency (closed) or offered rate in requests/s (open)
    workload: str
    items_per_request: int
    window: float  # configured measured duration (0 when bounded by a request count)
    start: FloatArray
    latency: FloatArray
    status: IntArray
    nbytes: IntArray
    ttft: FloatArray
    chunks: IntArray
    lag: FloatArray = field(default_factory=lambda: np.zeros(0))
    dropped: int = 0  # open loop: arrivals not sent because max_outstanding were in flight
    #: Successful requests that finished inside the window, whenever they started (None when
    #: the level was bounded by a request count). Unlike the per-sample figures it is not
    #: biased low when latencies are comparable to the window.
    completed_in_window: int | None = None

    @property
    def ok(self) -> npt.NDArray[np.bool_]:
        return (self.status >= 200) & (self.status < 300)

    @property
    def elapsed(self) -> float:
        """Measured seconds: the window, stretched to the last measured completion."""
        if self.start.size == 0:
            return self.window
        return max(self.window, float(np.max(self.start + self.latency)))


@dataclass(frozen=True, slots=True)
class Summary:
    """The figures of one load level, JSON-ready via :meth:`to_dict`."""

    mode: Mode
    load: float
    workload: str
    requests: int
    ok: int
    errors: int
    error_kinds: Mapping[str, int]
    dropped: int
    elapsed_s: float
    throughput_rps: float
    items_per_s: float
    latency_ms: Mapping[str, float]
    ttft_ms: Mapping[str, float] | None
    tpot_ms: Mapping[str, float] | None
    chunks_per_s: float | None
    lag_ms: Mapping[str, float] | None
    bytes_received: int
    cdf_ms: tuple[tuple[float, float], ...]
    #: Successful completions inside the window / window (steady-state rate; see RunResult).
    window_throughput_rps: float | None = None
    window_items_per_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types; times rounded to the microsecond, NaN for "no sample"."""
        return {
            "mode": self.mode,
            "load": self.load,
            "workload": self.workload,
            "requests": self.requests,
            "ok": self.ok,
            "errors": self.errors,
            "error_kinds": dict(self.error_kinds),
            "dropped": self.dropped,
            "elapsed_s": round(self.elapsed_s, 6),
            "throughput_rps": round(self.throughput_rps, 3),
            "items_per_s": round(self.items_per_s, 3),
            "latency_ms": _rounded(self.latency_ms),
            "ttft_ms": None if self.ttft_ms is None else _rounded(self.ttft_ms),
            "tpot_ms": None if self.tpot_ms is None else _rounded(self.tpot_ms),
            "chunks_per_s": None if self.chunks_per_s is None else round(self.chunks_per_s, 3),
            "lag_ms": None if self.lag_ms is None else _rounded(self.lag_ms),
            "bytes_received": self.bytes_received,
            "cdf_ms": [[q, round(v, 3)] for q, v in self.cdf_ms],
            "window_throughput_rps": _round_or_none(self.window_throughput_rps),
            "window_items_per_s": _round_or_none(self.window_items_per_s),
        }


def _round_or_none(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _rounded(values: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in values.items()}


def summarize(run: RunResult) -> Summary:
    """Reduce a run's samples to its figures."""
    ok = run.ok
    n_ok = int(np.count_nonzero(ok))
    elapsed = run.elapsed
    rate = n_ok / elapsed if elapsed > 0 else 0.0
    kinds, counts = np.unique(run.status[~ok], return_counts=True)
    ok_latency_ms = run.latency[ok] * 1e3
    lat = percentiles(ok_latency_ms)
    lat["mean"] = float(np.mean(ok_latency_ms)) if n_ok else float("nan")
    lat["max"] = float(np.max(ok_latency_ms)) if n_ok else float("nan")
    ttft_ms = tpot_ms = chunks_per_s = None
    streamed = ok & ~np.isnan(run.ttft)
    if np.any(streamed):
        ttft_ms = percentiles(run.ttft[streamed] * 1e3)
        # time per output chunk after the first: (latency - ttft) / (chunks - 1)
        multi = streamed & (run.chunks > 1)
        tpot = (run.latency[multi] - run.ttft[multi]) / (run.chunks[multi] - 1)
        tpot_ms = percentiles(tpot * 1e3, (50.0, 99.0))
        chunks_per_s = float(np.sum(run.chunks[ok])) / elapsed if elapsed > 0 else 0.0
    cdf = percentiles(ok_latency_ms, CDF_GRID) if n_ok else {}
    window_rps = (
        run.completed_in_window / run.window
        if run.completed_in_window is not None and run.window > 0
        else None
    )
    return Summary(
        mode=run.mode,
        load=run.load,
        workload=run.workload,
        requests=int(run.status.size),
        ok=n_ok,
        errors=int(run.status.size) - n_ok,
        error_kinds={error_kind(int(k)): int(c) for k, c in zip(kinds, counts, strict=True)},
        dropped=run.dropped,
        elapsed_s=elapsed,
        throughput_rps=rate,
        items_per_s=rate * run.items_per_request,
        latency_ms=lat,
        ttft_ms=ttft_ms,
        tpot_ms=tpot_ms,
        chunks_per_s=chunks_per_s,
        lag_ms=percentiles(run.lag * 1e3, (50.0, 99.0)) if run.mode == "open" else None,
        bytes_received=int(np.sum(run.nbytes)),
        cdf_ms=tuple((q, v) for q, v in zip(CDF_GRID, cdf.values(), strict=False)),
        window_throughput_rps=window_rps,
        window_items_per_s=None if window_rps is None else window_rps * run.items_per_request,
    )


def _rate(v: float) -> str:
    return f"{v:.2f}" if v < 10 else f"{v:.1f}"


def _ms(v: float) -> str:
    return "-" if v != v else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def load_label(mode: Mode, load: float) -> str:
    """``c=16`` for a closed-loop level, ``200/s`` for an open-loop rate."""
    return f"c={load:g}" if mode == "closed" else f"{load:g}/s"


def sample_warning(s: Summary, minimum: int = 100) -> str | None:
    """A warning when a level has too few successful samples for its tail percentiles."""
    if s.ok >= minimum:
        return None
    return (
        f"{load_label(s.mode, s.load)} has only {s.ok} successful requests; p99 wants >= 100"
        " and p99.9 >= 1000: raise --duration (or --requests)"
    )


def format_brief(s: Summary) -> str:
    """One line for a finished level: ``c=16: 412.0 req/s (412.0 items/s), p50 ... errors 0``."""
    lat = s.latency_ms
    return (
        f"{load_label(s.mode, s.load)}: {_rate(s.throughput_rps)} req/s"
        f" ({_rate(s.items_per_s)} items/s),"
        f" p50 {_ms(lat['p50'])} p99 {_ms(lat['p99'])} ms, errors {s.errors}"
        + (f", dropped {s.dropped}" if s.dropped else "")
    )


def format_table(summaries: Iterable[Summary]) -> str:
    """A compact fixed-width table, one line per load level."""
    rows = list(summaries)
    stream = any(s.ttft_ms is not None for s in rows)
    head = ["load", "ok", "err", "drop", "req/s", "items/s", "p50", "p90", "p99", "p99.9"]
    if stream:
        head += ["ttft50", "ttft99", "chunks/s"]
    head.append("errors by kind")
    lines = [head]
    for s in rows:
        load = load_label(s.mode, s.load)
        lat = s.latency_ms
        line = [
            load,
            str(s.ok),
            str(s.errors),
            str(s.dropped),
            _rate(s.throughput_rps),
            _rate(s.items_per_s),
        ]
        line += [_ms(lat[percentile_key(q)]) for q in PERCENTILES]
        if stream:
            t = s.ttft_ms or {}
            line += [_ms(t.get("p50", math.nan)), _ms(t.get("p99", math.nan))]
            line.append("-" if s.chunks_per_s is None else _rate(s.chunks_per_s))
        line.append(" ".join(f"{k}={v}" for k, v in sorted(s.error_kinds.items())) or "-")
        lines.append(line)
    widths = [max(len(r[i]) for r in lines) for i in range(len(head) - 1)]
    out = []
    for r in lines:
        cells = [c.rjust(w) for c, w in zip(r[:-1], widths, strict=True)]
        out.append("  ".join([*cells, r[-1]]))
    return "\n".join(out) + "\n(latency in ms; req/s and items/s count successful requests)"
