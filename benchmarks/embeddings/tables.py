"""The issue's targets checked against a result document, and the RESULTS.md it renders.

Every figure here is read from ``embeddings.json`` (what ``run.py`` measured); nothing is
estimated. A target whose inputs were not measured (a skipped contender) is "not measured",
never "met".
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

SHORT = "embeddings/shortx1"
Row = dict[str, Any]
#: Other processes' CPU (% of one core) above which a level is flagged as contended.
CONTENDED_PCT = 20.0


def _runs(doc: dict[str, Any], name: str, workload: str = SHORT) -> list[Row]:
    entry = doc.get("contenders", {}).get(name, {})
    runs: list[Row] = entry.get("workloads", {}).get(workload, [])
    return runs


def _at(runs: list[Row], level: float) -> Row | None:
    return next((r for r in runs if r["load"] == level), None)


def _peak(runs: list[Row]) -> Row | None:
    return max(runs, key=lambda r: r["items_per_s"], default=None)


def _raw_rows(doc: dict[str, Any], inputs: str) -> list[Row]:
    rows: list[Row] = doc.get("raw", {}).get("results", {}).get(inputs, [])
    return rows


def _raw_best(doc: dict[str, Any], inputs: str) -> Row | None:
    return max(_raw_rows(doc, inputs), key=lambda r: r["sentences_per_s"], default=None)


def _memory(doc: dict[str, Any], name: str) -> float | None:
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


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _items(row: Row | None) -> float | None:
    return None if row is None else float(row["items_per_s"])


def _p99(row: Row | None) -> float | None:
    return None if row is None else float(row["latency_ms"]["p99"])


def targets(doc: dict[str, Any]) -> list[Row]:
    """The issue's targets, each with the measured value, the verdict and its inputs."""
    out = []
    sw = _runs(doc, "sluiceway")
    peak, raw = _peak(sw), _raw_best(doc, "short")
    out.append(
        _target(
            "ceiling",
            "sluiceway >= 0.9 x raw ceiling (short, 1 text/request, saturation)",
            _ratio(_items(peak), None if raw is None else float(raw["sentences_per_s"])),
            0.9,
            at_most=False,
            detail=(
                f"sluiceway {peak['items_per_s']:.0f}/s at c={peak['load']:g} vs raw "
                f"{raw['sentences_per_s']:.0f}/s at batch {raw['batch_size']}"
                if peak and raw
                else "needs sluiceway and raw"
            ),
        )
    )
    s64, n64 = _at(sw, 64), _at(_runs(doc, "naive"), 64)
    out.append(
        _target(
            "vs naive throughput",
            "sluiceway >= 1.8 x naive 1-worker throughput at c=64 (short x1)",
            _ratio(_items(s64), _items(n64)),
            1.8,
            at_most=False,
            detail=(
                f"{s64['items_per_s']:.0f}/s vs {n64['items_per_s']:.0f}/s"
                if s64 and n64
                else "needs sluiceway and naive"
            ),
        )
    )
    out.append(
        _target(
            "vs naive p99",
            "sluiceway p99 <= 0.25 x naive 1-worker p99 at c=64 (short x1)",
            _ratio(_p99(s64), _p99(n64)),
            0.25,
            at_most=True,
            detail=(
                f"{s64['latency_ms']['p99']:.1f} ms vs {n64['latency_ms']['p99']:.1f} ms"
                if s64 and n64
                else "needs sluiceway and naive"
            ),
        )
    )
    mine = _memory(doc, "sluiceway")
    for peer, limit, text in (("gunicorn", 1 / 3, "1/3"), ("infinity", 1 / 10, "1/10")):
        theirs = _memory(doc, peer)
        out.append(
            _target(
                f"RSS vs {peer}",
                f"sluiceway peak RSS <= {text} x {peer}'s (whole process tree)",
                _ratio(mine, theirs),
                limit,
                at_most=True,
                detail=(
                    f"{mine:.0f} MiB vs {theirs:.0f} MiB"
                    if mine is not None and theirs is not None
                    else f"needs sluiceway and {peer}"
                ),
            )
        )
    s1 = _at(sw, 1)
    raw1 = next((r for r in _raw_rows(doc, "short") if r["batch_size"] == 1), None)
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
            f"admitted p99 <= {bound:.0f} ms (2 x sluiceway's c=64 p99) at 2x saturation",
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
    return [f"[{verdict[r['met']]}] {r['goal']}: {_num(r['value'])} ({r['detail']})" for r in rows]


# --- markdown -------------------------------------------------------------------------------


def _num(v: float | None, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return f"{v:.{digits}f}" if abs(v) < 100 else f"{v:.0f}"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def _la(values: list[float] | None) -> str:
    return " / ".join(f"{v:.2f}" for v in values) if values else "-"


def _summary(doc: dict[str, Any]) -> list[str]:
    head = [
        "contender",
        "load avg before (1/5/15 min)",
        "peak RSS MiB",
        "peak PSS MiB",
        "short x1 peak items/s",
        "c=1 p50 / p99 ms",
        "c=64 items/s",
        "c=64 p99 ms",
        "long x1 c=64 items/s",
        "mixed x32 best items/s",
        "max others' CPU %",
    ]
    rows = []
    for name, entry in doc.get("contenders", {}).items():
        if "skipped" in entry:
            rows.append(
                [
                    entry["label"],
                    _la(entry.get("load_avg_before")),
                    "skipped: " + entry["skipped"],
                    *["-"] * (len(head) - 3),
                ]
            )
            continue
        short = _runs(doc, name)
        peak, c1, c64 = _peak(short), _at(short, 1), _at(short, 64)
        long64 = _at(_runs(doc, name, "embeddings/longx1"), 64)
        mixed = _peak(_runs(doc, name, "embeddings/mixedx32"))
        all_runs = [r for runs in entry.get("workloads", {}).values() for r in runs]
        others = max((r.get("others_cpu_pct", 0.0) for r in all_runs), default=None)
        mem = entry.get("memory", {})
        rows.append(
            [
                entry["label"],
                _la(entry.get("load_avg_before")),
                _num(mem.get("peak_rss_mib"), 0),
                _num(mem.get("peak_pss_mib"), 0),
                f"{_num(peak['items_per_s'], 1)} (c={peak['load']:g})" if peak else "-",
                f"{_num(c1['latency_ms']['p50'])} / {_num(c1['latency_ms']['p99'])}" if c1 else "-",
                _num(c64["items_per_s"], 1) if c64 else "-",
                _num(c64["latency_ms"]["p99"], 1) if c64 else "-",
                _num(long64["items_per_s"], 1) if long64 else "-",
                _num(mixed["items_per_s"], 1) if mixed else "-",
                _num(others, 0),
            ]
        )
    return _table(head, rows)


def _ratios(doc: dict[str, Any]) -> list[str]:
    """sluiceway / peer for throughput, p99 and memory at the shared levels."""
    sw = _runs(doc, "sluiceway")
    head = [
        "sluiceway vs",
        "items/s ratio c=1",
        "c=16",
        "c=64",
        "c=256",
        "p99 ratio c=64",
        "peak RSS ratio",
    ]
    rows = []
    for name, entry in doc.get("contenders", {}).items():
        if name == "sluiceway" or "skipped" in entry or not sw:
            continue
        peer = _runs(doc, name)
        cells = [entry["label"]]
        for level in (1, 16, 64, 256):
            a, b = _at(sw, level), _at(peer, level)
            cells.append(_num(_ratio(_items(a), _items(b))))
        a, b = _at(sw, 64), _at(peer, 64)
        cells.append(_num(_ratio(_p99(a), _p99(b))))
        cells.append(_num(_ratio(_memory(doc, "sluiceway"), _memory(doc, name))))
        rows.append(cells)
    return _table(head, rows) if rows else ["(needs sluiceway and at least one peer)"]


def _raw(doc: dict[str, Any]) -> list[str]:
    raw = doc.get("raw")
    if not raw:
        return ["(not run)"]
    if "skipped" in raw:
        return [f"skipped: {raw['skipped']}"]
    rows = []
    for inputs, cells in raw["results"].items():
        for r in cells:
            lat = r["batch_latency_ms"]
            rows.append(
                [
                    inputs,
                    str(r["batch_size"]),
                    _num(r["sentences_per_s"], 1),
                    _num(lat["p50"]),
                    _num(lat["p99"]),
                    str(r["batches"]),
                ]
            )
    lines = [
        f"Load average before: {_la(raw.get('load_avg_before'))}; peak RSS "
        f"{raw['memory']['peak_rss_mib']} MiB; engine settings intra_op_threads="
        f"{raw.get('intra_op_threads')}, allow_spinning={raw.get('allow_spinning')}, "
        f"memory_arena={raw.get('memory_arena')}.",
        "",
    ]
    head = ["inputs", "batch", "sentences/s", "batch p50 ms", "batch p99 ms", "batches"]
    return lines + _table(head, rows)


def _workload(doc: dict[str, Any], workload: str) -> list[str]:
    head = [
        "contender",
        "c",
        "items/s",
        "req/s",
        "p50 ms",
        "p99 ms",
        "errors",
        "server CPU %",
        "client CPU %",
        "others CPU %",
    ]
    rows = []
    for name, entry in doc.get("contenders", {}).items():
        for r in _runs(doc, name, workload):
            lat = r["latency_ms"]
            flag = " (contended)" if r.get("others_cpu_pct", 0) > CONTENDED_PCT else ""
            rows.append(
                [
                    entry["label"],
                    f"{r['load']:g}",
                    _num(r["items_per_s"], 1),
                    _num(r["throughput_rps"], 1),
                    _num(lat["p50"]),
                    _num(lat["p99"]),
                    str(r["errors"]),
                    _num(r.get("server_cpu_pct"), 0),
                    _num(r.get("client_cpu_pct"), 0),
                    _num(r.get("others_cpu_pct"), 0) + flag,
                ]
            )
    return _table(head, rows) if rows else ["(no runs)"]


def _overload(doc: dict[str, Any]) -> list[str]:
    ov = doc.get("overload")
    if not ov:
        return ["(not run)"]
    if "split" not in ov:
        return [f"skipped: {ov.get('skipped')}"]
    split = ov["split"]
    lines = [
        f"sluiceway with `max_queue_items = {ov['max_queue_items']}`, open-loop Poisson arrivals "
        f"of short x1 requests at {ov['offered_rps']:g} req/s = 2 x the saturation throughput "
        f"{ov['saturation_rps']:g} req/s (the higher of the sweep's peak, "
        f"{ov.get('saturation_sweep_rps')}, and a c=64 probe of this instance just before, "
        f"{ov.get('saturation_here_rps')}), {ov['duration_s']:g} s measured; load average before "
        f"{_la(ov.get('load_avg_before'))}; server CPU {ov.get('server_cpu_pct')} %, "
        f"others' CPU {ov.get('others_cpu_pct')} %; peak RSS {ov['memory']['peak_rss_mib']} MiB.",
        "",
    ]
    rows = [
        [
            name,
            str(s["count"]),
            _num(s["latency_ms"]["p50"]),
            _num(s["latency_ms"]["p99"]),
            _num(s["latency_ms"]["p100"]),
        ]
        for name, s in (
            ("200 (admitted)", split["ok"]),
            ("429 (refused)", split["refused_429"]),
            ("other", split["other"]),
        )
    ]
    lines += _table(["outcome", "count", "p50 ms", "p99 ms", "max ms"], rows)
    lines += [
        "",
        f"Statuses other than 200: {split['statuses'] or 'none'}; generator-side drops: "
        f"{ov['summary']['dropped']}; generator lag p99 "
        f"{_num((ov['summary'].get('lag_ms') or {}).get('p99'))} ms.",
    ]
    return lines


def contention(doc: dict[str, Any]) -> str | None:
    """A warning when other processes used the CPU during the measured levels."""
    rows = [
        r
        for entry in doc.get("contenders", {}).values()
        for runs in entry.get("workloads", {}).values()
        for r in runs
    ]
    busy = [r["others_cpu_pct"] for r in rows if r.get("others_cpu_pct", 0) > CONTENDED_PCT]
    if not busy:
        return None
    return (
        f"**Contended run**: in {len(busy)} of {len(rows)} levels other processes used more "
        f"than {CONTENDED_PCT:g}% of a core (up to {max(busy):.0f}% of the "
        f"{doc['machine']['nproc']} cores' {100 * doc['machine']['nproc']}%). These figures "
        "measure the machine's load as much as the servers; re-run on a quiet machine."
    )


def markdown(doc: dict[str, Any], out: Path, base: Path) -> str:
    m = doc["machine"]
    plan = doc["plan"]
    rel = (
        out.resolve().relative_to(base.resolve())
        if out.resolve().is_relative_to(base.resolve())
        else out
    )
    levels = "; ".join(
        f"{lv['inputs']} x{lv['texts_per_request']} at c={','.join(map(str, lv['concurrency']))}"
        + (f" ({lv['duration_s']:g} s each)" if "duration_s" in lv else "")
        for lv in plan["levels"]
    )
    verdict = {True: "met", False: "**not met**", None: "not measured"}
    lines = [
        "# Embeddings benchmark results (issue 2)",
        "",
        f"Generated by `benchmarks/embeddings/run.py` from `{rel}/embeddings.json`; "
        "regenerate rather than edit.",
        "",
        f"- Command: `{doc['command']}`"
        + (" (**quick mode: smoke-test figures**)" if doc.get("quick") else ""),
        f"- Started: {doc['started']}",
        f"- Machine: {m['cpu']}, nproc {m['nproc']}, Python {m['python']}, {m['platform']}",
        f"- Load average at start (1/5/15 min): {_la(m['load_avg_at_start'])}",
        f"- Levels (closed loop): {levels}; {plan['duration_s']:g} s measured per level after "
        f"{plan['warmup_s']:g} s warm-up (scaled with the level's duration). A level with no "
        "successful request ran for its whole window on requests started during warm-up "
        f"(each took longer than the window). Raw ceiling: {plan['raw_seconds']:g} s per cell.",
        f"- sluiceway settings overrides: {doc.get('sluiceway_settings') or 'none (defaults)'}",
        "",
        *([warning, ""] if (warning := contention(doc)) else []),
        "## Targets",
        "",
        *_table(
            ["target", "value", "verdict", "measured"],
            [
                [t["goal"], _num(t["value"], 3), verdict[t["met"]], t["detail"]]
                for t in doc.get("targets", [])
            ],
        ),
        "",
        "## Summary",
        "",
        "Peak RSS/PSS: the server's whole process tree, sampled every 0.2 s from start to stop. "
        "Others' CPU: CPU used on the machine by processes other than the server and the load "
        "generator during a level (% of one core), i.e. contention from other users.",
        "",
        *_summary(doc),
        "",
        *_ratios(doc),
        "",
        "## Raw engine ceiling (in-process, no HTTP)",
        "",
        *_raw(doc),
    ]
    for lv in plan["levels"]:
        workload = f"embeddings/{lv['inputs']}x{lv['texts_per_request']}"
        png = f"{rel}/{workload.split('/')[1]}.png"
        lines += ["", f"## {workload}", "", f"![{workload}]({png})", "", *_workload(doc, workload)]
    lines += [
        "",
        "## Overload (admission control)",
        "",
        *_overload(doc),
        "",
        f"![memory]({rel}/memory.png)",
        "",
    ]
    return "\n".join(lines)
