"""The issue's targets checked against a result document (``embeddings.json``).

Every figure here is read from ``embeddings.json`` (what ``run.py`` measured); nothing is
estimated. A target whose inputs were not measured (a skipped contender) is "not measured",
never "met".
"""

from __future__ import annotations

import math
from typing import Any

SHORT = "embeddings/shortx1"
Row = dict[str, Any]
#: Other processes' CPU (% of one core) above which a level is flagged as contended.
CONTENDED_PCT = 20.0


def runs_of(doc: dict[str, Any], name: str, workload: str = SHORT) -> list[Row]:
    entry = doc.get("contenders", {}).get(name, {})
    runs: list[Row] = entry.get("workloads", {}).get(workload, [])
    return runs


def at_level(runs: list[Row], level: float) -> Row | None:
    return next((r for r in runs if r["load"] == level), None)


def peak_run(runs: list[Row]) -> Row | None:
    return max(runs, key=rate, default=None)


def raw_rows(doc: dict[str, Any], inputs: str) -> list[Row]:
    rows: list[Row] = doc.get("raw", {}).get("results", {}).get(inputs, [])
    return rows


def raw_best(doc: dict[str, Any], inputs: str) -> Row | None:
    return max(raw_rows(doc, inputs), key=lambda r: r["sentences_per_s"], default=None)


def peak_rss_of(doc: dict[str, Any], name: str) -> float | None:
    mem = doc.get("contenders", {}).get(name, {}).get("memory")
    return None if mem is None else float(mem["peak_rss_mib"])


def _target(
    name: str, goal: str, value: float | None, limit: float, *, at_most: bool, detail: str
) -> Row:
    met = (
        None
        if value is None or math.isnan(value)
        else (value <= limit if at_most else value >= limit)
    )
    return {
        "target": name,
        "goal": goal,
        "value": None if value is None else round(value, 3),
        "met": met,
        "detail": detail,
    }


def ratio_of(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def rate(row: Row) -> float:
    """Texts/s of a level: successful completions inside the measured window / window when
    recorded (a steady-state rate), else the per-sample rate (requests *started* in the
    window, over the window stretched to their completion: biased low when latencies are
    comparable to the window, as at c=256)."""
    window = row.get("window_items_per_s")
    return float(row["items_per_s"] if window is None else window)


def rps(row: Row) -> float:
    window = row.get("window_throughput_rps")
    return float(row["throughput_rps"] if window is None else window)


def items_of(row: Row | None) -> float | None:
    return None if row is None else rate(row)


def p99_of(row: Row | None) -> float | None:
    return None if row is None else float(row["latency_ms"]["p99"])


def targets(doc: dict[str, Any]) -> list[Row]:
    """The issue's targets, each with the measured value, the verdict and its inputs."""
    out = []
    sw = runs_of(doc, "sluiceway")
    peak, raw = peak_run(sw), raw_best(doc, "short")
    out.append(
        _target(
            "ceiling",
            "sluiceway >= 0.9 x raw ceiling (short, 1 text/request, saturation)",
            ratio_of(items_of(peak), None if raw is None else float(raw["sentences_per_s"])),
            0.9,
            at_most=False,
            detail=(
                f"sluiceway {rate(peak):.0f}/s at c={peak['load']:g} vs raw "
                f"{raw['sentences_per_s']:.0f}/s at batch {raw['batch_size']}"
                if peak and raw
                else "needs sluiceway and raw"
            ),
        )
    )
    s64, n64 = at_level(sw, 64), at_level(runs_of(doc, "naive"), 64)
    out.append(
        _target(
            "vs naive throughput",
            "sluiceway >= 1.8 x naive 1-worker throughput at c=64 (short x1)",
            ratio_of(items_of(s64), items_of(n64)),
            1.8,
            at_most=False,
            detail=(
                f"{rate(s64):.0f}/s vs {rate(n64):.0f}/s"
                if s64 and n64
                else "needs sluiceway and naive"
            ),
        )
    )
    out.append(
        _target(
            "vs naive p99",
            "sluiceway p99 <= 0.25 x naive 1-worker p99 at c=64 (short x1)",
            ratio_of(p99_of(s64), p99_of(n64)),
            0.25,
            at_most=True,
            detail=(
                f"{s64['latency_ms']['p99']:.1f} ms vs {n64['latency_ms']['p99']:.1f} ms"
                if s64 and n64
                else "needs sluiceway and naive"
            ),
        )
    )
    mine = peak_rss_of(doc, "sluiceway")
    for peer, limit, text in (("gunicorn", 1 / 3, "1/3"), ("infinity", 1 / 10, "1/10")):
        theirs = peak_rss_of(doc, peer)
        out.append(
            _target(
                f"RSS vs {peer}",
                f"sluiceway peak RSS <= {text} x {peer}'s (whole process tree)",
                ratio_of(mine, theirs),
                limit,
                at_most=True,
                detail=(
                    f"{mine:.0f} MiB vs {theirs:.0f} MiB"
                    if mine is not None and theirs is not None
                    else f"needs sluiceway and {peer}"
                ),
            )
        )
    s1 = at_level(sw, 1)
    raw1 = next((r for r in raw_rows(doc, "short") if r["batch_size"] == 1), None)
    excess = s1["latency_ms"]["p99"] - raw1["batch_latency_ms"]["p99"] if s1 and raw1 else None
    out.append(
        _target(
            "c=1 latency",
            "sluiceway p99 at c=1 <= raw batch-1 p99 + 2 ms (short)",
            excess,
            2.0,
            at_most=True,
            detail=(
                f"p99 {s1['latency_ms']['p99']:.2f} vs raw {raw1['batch_latency_ms']['p99']:.2f} ms"
                f" (p50 {s1['latency_ms']['p50']:.2f} vs {raw1['batch_latency_ms']['p50']:.2f})"
                if s1 and raw1
                else "needs sluiceway and raw"
            ),
        )
    )
    out += _overload_targets(doc, s64)
    return out


def _overload_targets(doc: dict[str, Any], s64: Row | None) -> list[Row]:
    ov = doc.get("overload") or {}
    split = ov.get("split")
    if split is None:
        why = ov.get("skipped", "overload not run")
        return [
            _target("overload 200s", "admitted p99 bounded", None, 0, at_most=True, detail=why),
            _target("overload 429s", "429 p99 <= 10 ms", None, 0, at_most=True, detail=why),
        ]
    # "Bounded": no worse than twice the closed-loop p99 with as many requests in flight as
    # the admission bound lets wait (c=64); 1 s when that was not measured.
    bound = 2 * s64["latency_ms"]["p99"] if s64 else 1000.0
    ok, refused = split["ok"], split["refused_429"]
    others = split["other"]["count"]
    p99_ok = ok["latency_ms"]["p99"]
    p99_429 = refused["latency_ms"]["p99"] if refused["count"] else None
    # Nothing refused: the offered load was no overload, so there is no verdict on the 200s.
    value_ok = p99_ok if others == 0 else math.inf
    if not refused["count"]:
        value_ok = math.nan
    return [
        _target(
            "overload 200s",
            f"admitted p99 <= {bound:.0f} ms (2 x sluiceway's c=64 p99) at "
            f"{ov.get('factor', 2)}x saturation",
            value_ok,
            bound,
            at_most=True,
            detail=(
                f"{ok['count']} x 200 (p50 {ok['latency_ms']['p50']:.1f}, p99 {p99_ok:.1f} ms), "
                f"{others} other failures, at {ov['offered_rps']:g} req/s offered"
            ),
        ),
        _target(
            "overload 429s",
            "the excess is refused within 10 ms (p99 latency of 429s)",
            p99_429,
            10.0,
            at_most=True,
            detail=(
                f"{refused['count']} x 429 (p50 {refused['latency_ms']['p50']:.2f}, "
                f"p99 {refused['latency_ms']['p99']:.2f} ms)"
                if refused["count"]
                else "no 429s: the server kept up, or nothing was refused"
            ),
        ),
    ]


def target_lines(rows: list[Row]) -> list[str]:
    verdict = {True: "MET", False: "NOT MET", None: "not measured"}
    return [f"[{verdict[r['met']]}] {r['goal']}: {num(r['value'])} ({r['detail']})" for r in rows]


def num(v: float | None, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return f"{v:.{digits}f}" if abs(v) < 100 else f"{v:.0f}"
