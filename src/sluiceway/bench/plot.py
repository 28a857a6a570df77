"""PNG plots of one or more benchmark result files (the JSON ``sluiceway bench`` writes).

One figure, three panels: throughput vs load and p99 latency vs load (one line per contender,
i.e. per result file), and the latency CDF of each contender at its highest load level.
matplotlib (the ``bench`` extra) is imported only when a plot is drawn, with the Agg backend.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from sluiceway.bench.report import load_label
from sluiceway.errors import InvalidRequest


def load_results(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Read result files written by ``sluiceway bench ... --json``."""
    docs = []
    for path in paths:
        doc = msgspec.json.decode(Path(path).read_bytes())
        if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
            raise InvalidRequest(f"{path}: not a sluiceway bench result (no 'runs' list)")
        docs.append(doc)
    return docs


def _num(value: float | None) -> float:
    """JSON has ``null`` where a figure had no sample (NaN)."""
    return math.nan if value is None else float(value)


def _load_axis_label(docs: Sequence[Mapping[str, Any]]) -> str:
    modes = {run["mode"] for doc in docs for run in doc["runs"]}
    if modes == {"closed"}:
        return "concurrency (closed loop)"
    if modes == {"open"}:
        return "offered rate, requests/s (open loop)"
    return "concurrency or offered rate"


def plot_results(
    docs: Sequence[Mapping[str, Any]], path: str | Path, *, title: str | None = None
) -> None:
    """Draw ``docs`` (decoded result files) into a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    fig, (ax_tput, ax_p99, ax_cdf) = plt.subplots(1, 3, figsize=(16, 4.8))
    try:
        for doc in docs:
            label = str(doc.get("label") or doc.get("url") or "?")
            runs = sorted(doc["runs"], key=lambda r: r["load"])
            if not runs:
                continue
            loads = [r["load"] for r in runs]
            line = ax_tput.plot(loads, [_num(r["items_per_s"]) for r in runs], "o-", label=label)
            color = line[0].get_color()
            ax_p99.plot(
                loads, [_num(r["latency_ms"]["p99"]) for r in runs], "o-", color=color, label=label
            )
            top = runs[-1]
            if top["cdf_ms"]:
                qs, values = zip(*top["cdf_ms"], strict=True)
                load = load_label(top["mode"], top["load"])
                ax_cdf.plot(values, qs, "-", color=color, label=f"{label} ({load})")
        xlabel = _load_axis_label(docs)
        ax_tput.set(xlabel=xlabel, ylabel="throughput, items/s", title="Throughput")
        ax_p99.set(xlabel=xlabel, ylabel="p99 latency, ms", title="p99 latency")
        ax_cdf.set(xlabel="latency, ms", ylabel="percentile", title="Latency CDF at top load")
        ax_cdf.set_xscale("log")
        all_loads = sorted({r["load"] for doc in docs for r in doc["runs"] if r["load"] > 0})
        if all_loads and all_loads[-1] / all_loads[0] >= 8:
            for ax in (ax_tput, ax_p99):
                ax.set_xscale("log", base=2)
                ax.set_xticks(all_loads, [f"{v:g}" for v in all_loads])
                ax.xaxis.set_minor_formatter(NullFormatter())
        ax_cdf.xaxis.set_major_formatter(ScalarFormatter())
        for ax in (ax_tput, ax_p99, ax_cdf):
            ax.grid(True, alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize="small")
        ax_tput.set_ylim(bottom=0)
        ax_p99.set_ylim(bottom=0)
        if title:
            fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(str(path), dpi=110)
    finally:
        plt.close(fig)
