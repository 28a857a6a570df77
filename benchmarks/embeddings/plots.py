"""PNG figures of one result document: per workload (throughput, p99, latency CDF) and memory.

Each workload figure has three panels: items/s vs concurrency (the raw ceiling of that input
set as a dashed line), p99 latency vs concurrency, and the latency CDF of every contender at
c=64 (at its highest level when the workload has no c=64 level).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from targets import rate

CDF_LEVEL = 64.0


def _num(v: float | None) -> float:
    return float("nan") if v is None else float(v)


def _workload_figure(doc: dict[str, Any], workload: str, inputs: str, path: Path) -> bool:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    series = [
        (entry["label"], runs)
        for entry in doc.get("contenders", {}).values()
        if (runs := sorted(entry.get("workloads", {}).get(workload, []), key=lambda r: r["load"]))
    ]
    if not series:
        return False
    fig, (ax_t, ax_p, ax_c) = plt.subplots(1, 3, figsize=(17, 5))
    try:
        levels = sorted({r["load"] for _, runs in series for r in runs})
        for label, runs in series:
            loads = [r["load"] for r in runs]
            line = ax_t.plot(loads, [rate(r) for r in runs], "o-", label=label)
            color = line[0].get_color()
            ax_p.plot(
                loads, [_num(r["latency_ms"]["p99"]) for r in runs], "o-", color=color, label=label
            )
            at = next((r for r in runs if r["load"] == CDF_LEVEL), runs[-1])
            if at["cdf_ms"]:
                qs, values = zip(*at["cdf_ms"], strict=True)
                ax_c.plot(values, qs, "-", color=color, label=f"{label} (c={at['load']:g})")
        raw = doc.get("raw", {}).get("results", {}).get(inputs, [])
        if raw:
            best = max(raw, key=lambda r: r["sentences_per_s"])
            ax_t.axhline(
                best["sentences_per_s"],
                color="black",
                ls="--",
                lw=1,
                label=f"raw ceiling ({inputs}, batch {best['batch_size']})",
            )
        ax_t.set(xlabel="concurrency (closed loop)", ylabel="texts/s", title="Throughput")
        ax_p.set(xlabel="concurrency (closed loop)", ylabel="p99 latency, ms", title="p99 latency")
        ax_c.set(xlabel="latency, ms", ylabel="percentile", title="Latency CDF at c=64")
        ax_c.set_xscale("log")
        ax_c.xaxis.set_major_formatter(ScalarFormatter())
        ax_c.xaxis.set_minor_formatter(NullFormatter())
        ax_p.set_yscale("log")
        if len(levels) > 1:
            for ax in (ax_t, ax_p):
                ax.set_xscale("log", base=2)
                ax.set_xticks(levels, [f"{v:g}" for v in levels])
                ax.xaxis.set_minor_formatter(NullFormatter())
        ax_t.set_ylim(bottom=0)
        for ax in (ax_t, ax_p, ax_c):
            ax.grid(True, alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize="small")
        fig.suptitle(f"{workload} - {doc['machine']['cpu']}, nproc {doc['machine']['nproc']}")
        fig.tight_layout()
        fig.savefig(str(path), dpi=100)
    finally:
        plt.close(fig)
    return True


def _memory_figure(doc: dict[str, Any], path: Path) -> bool:
    import matplotlib.pyplot as plt

    bars = [
        (entry["label"], entry["memory"]["peak_rss_mib"], entry["memory"]["peak_pss_mib"])
        for entry in doc.get("contenders", {}).values()
        if "memory" in entry
    ]
    raw = doc.get("raw", {})
    if "memory" in raw:
        bars.append(
            ("raw (in-process)", raw["memory"]["peak_rss_mib"], raw["memory"]["peak_pss_mib"])
        )
    if not bars:
        return False
    fig, ax = plt.subplots(figsize=(9, 4.5))
    try:
        ys = range(len(bars))
        ax.barh([y + 0.2 for y in ys], [b[1] for b in bars], height=0.4, label="peak RSS")
        ax.barh([y - 0.2 for y in ys], [b[2] for b in bars], height=0.4, label="peak PSS")
        for y, (_, rss, _pss) in zip(ys, bars, strict=True):
            ax.text(rss, y + 0.2, f" {rss:.0f}", va="center", fontsize="small")
        ax.set_yticks(list(ys), [b[0] for b in bars])
        ax.invert_yaxis()
        ax.set(xlabel="MiB (whole process tree)", title="Peak memory")
        ax.grid(True, axis="x", alpha=0.3)
        ax.legend(fontsize="small")
        fig.tight_layout()
        fig.savefig(str(path), dpi=100)
    finally:
        plt.close(fig)
    return True


def draw_all(doc: dict[str, Any], out: Path) -> list[Path]:
    """Every figure of ``doc`` into ``out``; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    written = []
    for lv in doc["plan"]["levels"]:
        name = f"{lv['inputs']}x{lv['texts_per_request']}"
        path = out / f"{name}.png"
        if _workload_figure(doc, f"embeddings/{name}", lv["inputs"], path):
            written.append(path)
    if _memory_figure(doc, out / "memory.png"):
        written.append(out / "memory.png")
    return written
