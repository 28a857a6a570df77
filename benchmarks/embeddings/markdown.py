"""RESULTS.md rendered from a result document: machine, targets, tables per workload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from targets import (
    CONTENDED_PCT,
    at_level,
    items_of,
    num,
    p99_of,
    peak_rss_of,
    peak_run,
    rate,
    ratio_of,
    rps,
    runs_of,
)


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def _la(values: list[float] | None) -> str:
    return " / ".join(f"{v:.2f}" for v in values) if values else "-"


def _time(entry: dict[str, Any]) -> str:
    started = entry.get("started_at")
    return started[11:19] if isinstance(started, str) else "-"


def _summary(doc: dict[str, Any]) -> list[str]:
    head = [
        "contender",
        "started (UTC)",
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
                    _time(entry),
                    _la(entry.get("load_avg_before")),
                    "skipped: " + entry["skipped"],
                    *["-"] * (len(head) - 4),
                ]
            )
            continue
        short = runs_of(doc, name)
        peak, c1, c64 = peak_run(short), at_level(short, 1), at_level(short, 64)
        long64 = at_level(runs_of(doc, name, "embeddings/longx1"), 64)
        mixed = peak_run(runs_of(doc, name, "embeddings/mixedx32"))
        all_runs = [r for runs in entry.get("workloads", {}).values() for r in runs]
        others = max((r.get("others_cpu_pct", 0.0) for r in all_runs), default=None)
        mem = entry.get("memory", {})
        rows.append(
            [
                entry["label"],
                _time(entry),
                _la(entry.get("load_avg_before")),
                num(mem.get("peak_rss_mib"), 0),
                num(mem.get("peak_pss_mib"), 0),
                f"{num(rate(peak), 1)} (c={peak['load']:g})" if peak else "-",
                f"{num(c1['latency_ms']['p50'])} / {num(c1['latency_ms']['p99'])}" if c1 else "-",
                num(rate(c64), 1) if c64 else "-",
                num(c64["latency_ms"]["p99"], 1) if c64 else "-",
                num(rate(long64), 1) if long64 else "-",
                num(rate(mixed), 1) if mixed else "-",
                num(others, 0),
            ]
        )
    return _table(head, rows)


def _ratios(doc: dict[str, Any]) -> list[str]:
    """sluiceway / peer for throughput, p99 and memory at the shared levels."""
    sw = runs_of(doc, "sluiceway")
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
        peer = runs_of(doc, name)
        cells = [entry["label"]]
        for level in (1, 16, 64, 256):
            a, b = at_level(sw, level), at_level(peer, level)
            cells.append(num(ratio_of(items_of(a), items_of(b))))
        a, b = at_level(sw, 64), at_level(peer, 64)
        cells.append(num(ratio_of(p99_of(a), p99_of(b))))
        cells.append(num(ratio_of(peak_rss_of(doc, "sluiceway"), peak_rss_of(doc, name))))
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
                    num(r["sentences_per_s"], 1),
                    num(lat["p50"]),
                    num(lat["p99"]),
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
        "items/s (per-sample)",
        "p50 ms",
        "p99 ms",
        "errors",
        "server CPU %",
        "client CPU %",
        "others CPU %",
    ]
    rows = []
    for name, entry in doc.get("contenders", {}).items():
        for r in runs_of(doc, name, workload):
            lat = r["latency_ms"]
            flag = " (contended)" if r.get("others_cpu_pct", 0) > CONTENDED_PCT else ""
            rows.append(
                [
                    entry["label"],
                    f"{r['load']:g}",
                    num(rate(r), 1),
                    num(rps(r), 1),
                    num(r["items_per_s"], 1),
                    num(lat["p50"]),
                    num(lat["p99"]),
                    str(r["errors"]),
                    num(r.get("server_cpu_pct"), 0),
                    num(r.get("client_cpu_pct"), 0),
                    num(r.get("others_cpu_pct"), 0) + flag,
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
        f"of short x1 requests at {ov['offered_rps']:g} req/s = {ov.get('factor', 2)} x the "
        "saturation throughput "
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
            num(s["latency_ms"]["p50"]),
            num(s["latency_ms"]["p99"]),
            num(s["latency_ms"]["p100"]),
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
        f"{num((ov['summary'].get('lag_ms') or {}).get('p99'))} ms.",
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
        *(
            [
                f"- Kept from an earlier run of the same mode (see each part's time and load "
                f"average): {', '.join(doc['kept_from_earlier_run'])}"
            ]
            if doc.get("kept_from_earlier_run")
            else []
        ),
        "",
        *([warning, ""] if (warning := contention(doc)) else []),
        "## Targets",
        "",
        *_table(
            ["target", "value", "verdict", "measured"],
            [
                [t["goal"], num(t["value"], 3), verdict[t["met"]], t["detail"]]
                for t in doc.get("targets", [])
            ],
        ),
        "",
        "## Summary",
        "",
        "Throughput (items/s, req/s): successful requests that finished inside the measured "
        "window / window. The per-sample figure (requests started in the window, over the "
        "window stretched to their completion) is in the workload tables; it is biased low "
        "when latency is comparable to the window. "
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
