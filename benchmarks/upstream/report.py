"""Tables (Markdown), target checks and PNG plots of an upstream benchmark run."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TITLES = {
    "shared_prefix": "(i) shared prefixes",
    "multi_turn": "(ii) multi-turn chat",
    "skew": "(iii) skewed prefix",
}
AFFINITY = "sluiceway prefix_affinity"
NGINX = "nginx least_conn"
SGLANG_CA = "sglang-router cache_aware"


def _f(v: float, fmt: str = ".1f") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def policy_table(rows: Sequence[dict[str, Any]], workload: str) -> str:
    head = (
        "| contender | cache hit | vs oracle | prefill tokens | recomputed vs oracle "
        "| TTFT p50 ms | TTFT p99 ms | e2e p99 ms | req/s | load max/mean | errors "
        "| generator lag p99 ms |"
    )
    lines = [head, "|" + "---|" * 12]
    oracle = None
    for r in rows:
        if r["workload"] != workload:
            continue
        oracle = r["oracle"]
        lines.append(
            f"| {r['contender']} | {r['hit_rate']:.1%} | {r['hit_vs_oracle']:.1%} "
            f"| {r['prefill_tokens']:,} | {r['recomputed_tokens']:,} "
            f"| {_f(r['ttft_ms']['p50'])} | {_f(r['ttft_ms']['p99'])} "
            f"| {_f(r['latency_ms']['p99'])} | {r['throughput_rps']:.1f} "
            f"| {r['load_max_over_mean']:.2f} | {r['errors']} "
            f"| {_f(r.get('generator_lag_p99_ms', float('nan')), '.0f')} |"
        )
    if oracle is not None:
        lines.append(
            f"| oracle (one unbounded cache; TTFT = prefill floor, no queueing) "
            f"| {oracle['hit_rate']:.1%} | 100% | {oracle['prefill_tokens']:,} | 0 "
            f"| {_f(oracle.get('ttft_floor_p50_ms', float('nan')))} "
            f"| {_f(oracle.get('ttft_floor_p99_ms', float('nan')))} | | | | | |"
        )
        if "partitioned_hit_rate" in oracle:
            lines.append(
                f"\nOracle check: a perfect static partition of the same requests over the 8 "
                f"finite LRU caches (512 blocks each) reaches {oracle['partitioned_hit_rate']:.1%}."
            )
    return "\n".join(lines)


def overhead_table(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return "(not run)"
    top = next(k for k in rows[0] if k.startswith("c") and k != "c1" and k != "contender")
    lines = [
        f"| response | contender | c=1 p50 ms | c=1 p99 ms | added p50 ms | added p99 ms "
        f"| req/s ({top}) | p99 ms ({top}) | errors |",
        "|" + "---|" * 9,
    ]
    direct: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["contender"].startswith("direct"):
            direct[r["response"]] = r["c1"]
    for r in rows:
        d = direct.get(r["response"])
        added50 = r["c1"]["p50_ms"] - d["p50_ms"] if d else float("nan")
        added99 = r["c1"]["p99_ms"] - d["p99_ms"] if d else float("nan")
        lines.append(
            f"| {r['response']} | {r['contender']} | {_f(r['c1']['p50_ms'], '.3f')} "
            f"| {_f(r['c1']['p99_ms'], '.3f')} | {_f(added50, '.3f')} | {_f(added99, '.3f')} "
            f"| {r[top]['rps']:,.0f} | {_f(r[top]['p99_ms'], '.2f')} "
            f"| {r['c1']['errors'] + r[top]['errors']} |"
        )
    return "\n".join(lines)


def _find(rows: Sequence[dict[str, Any]], workload: str, contender: str) -> dict[str, Any] | None:
    return next(
        (r for r in rows if r["workload"] == workload and r["contender"] == contender), None
    )


def targets(policy: Sequence[dict[str, Any]], overhead: Sequence[dict[str, Any]]) -> list[str]:
    """One line per target: met / NOT met / not measured, with the figures."""
    out = []

    def line(ok: bool | None, text: str) -> None:
        mark = "not measured" if ok is None else ("**met**" if ok else "**NOT met**")
        out.append(f"- {mark}: {text}")

    for w in ("shared_prefix", "multi_turn"):
        r = _find(policy, w, AFFINITY)
        if r is None:
            line(None, f"cache-hit rate >= 95% of the oracle on {TITLES[w]}")
        else:
            line(
                r["hit_vs_oracle"] >= 0.95,
                f"cache-hit rate >= 95% of the oracle on {TITLES[w]}: "
                f"{r['hit_rate']:.1%} vs oracle {r['oracle']['hit_rate']:.1%} "
                f"= {r['hit_vs_oracle']:.1%}",
            )
    for w in ("shared_prefix", "multi_turn", "skew"):
        a, n = _find(policy, w, AFFINITY), _find(policy, w, NGINX)
        if a is None or n is None:
            line(None, f"p99 TTFT <= 0.3x nginx least_conn on {TITLES[w]}")
        else:
            ratio = a["ttft_ms"]["p99"] / n["ttft_ms"]["p99"]
            line(
                ratio <= 0.3,
                f"p99 TTFT <= 0.3x nginx least_conn on {TITLES[w]}: "
                f"{a['ttft_ms']['p99']:.0f} vs {n['ttft_ms']['p99']:.0f} ms = {ratio:.2f}x",
            )
    a, s = _find(policy, "skew", AFFINITY), _find(policy, "skew", SGLANG_CA)
    if a is None:
        line(None, "(iii): no backend above 1.3x the mean load")
    else:
        line(
            a["load_max_over_mean"] <= 1.3,
            f"(iii): no backend above 1.3x the mean load: max/mean {a['load_max_over_mean']:.2f}",
        )
    if a is None or s is None:
        line(None, "(iii): p99 TTFT beats sglang-router cache_aware")
    else:
        line(
            a["ttft_ms"]["p99"] < s["ttft_ms"]["p99"],
            f"(iii): p99 TTFT beats sglang-router cache_aware: "
            f"{a['ttft_ms']['p99']:.0f} vs {s['ttft_ms']['p99']:.0f} ms",
        )
    small = {r["contender"]: r for r in overhead if r["response"] == "small JSON"}
    d, sw, ng = small.get("direct (no router)"), small.get(AFFINITY), small.get(NGINX)
    if d is None or sw is None:
        line(None, "added latency p50 <= 0.5 ms")
    else:
        added = sw["c1"]["p50_ms"] - d["c1"]["p50_ms"]
        line(added <= 0.5, f"added latency p50 <= 0.5 ms (small JSON, c=1): {added:.3f} ms")
    if sw is None or ng is None:
        line(None, "requests/s per process >= 0.5x nginx's on small responses")
    else:
        top = next(k for k in sw if k.startswith("c") and k not in ("c1", "contender"))
        ratio = sw[top]["rps"] / ng[top]["rps"]
        line(
            ratio >= 0.5,
            f"requests/s per process >= 0.5x nginx's on small responses: "
            f"{sw[top]['rps']:,.0f} vs {ng[top]['rps']:,.0f} = {ratio:.2f}x",
        )
    return out


def plot_policy(rows: Sequence[dict[str, Any]], workload: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mine = [r for r in rows if r["workload"] == workload]
    if not mine:
        return
    labels = [r["contender"].replace(" ", "\n", 1) for r in mine]
    x = range(len(mine))
    fig, ((ax_hit, ax_ttft), (ax_load, ax_cdf)) = plt.subplots(2, 2, figsize=(14, 9))
    try:
        ax_hit.bar(x, [r["hit_rate"] * 100 for r in mine], color="tab:blue")
        ax_hit.axhline(mine[0]["oracle"]["hit_rate"] * 100, color="k", ls="--", label="oracle")
        ax_hit.set(ylabel="prompt tokens from cache, %", title="Cache-hit rate", ylim=(0, 100))
        ax_hit.legend(fontsize="small")
        width = 0.4
        ax_ttft.bar([i - width / 2 for i in x], [r["ttft_ms"]["p50"] for r in mine], width,
                    label="p50")  # fmt: skip
        ax_ttft.bar([i + width / 2 for i in x], [r["ttft_ms"]["p99"] for r in mine], width,
                    label="p99")  # fmt: skip
        ax_ttft.set(ylabel="ms", title="Time to first token")
        ax_ttft.legend(fontsize="small")
        for ax in (ax_hit, ax_ttft):
            ax.set_xticks(list(x), labels, fontsize="small")
            ax.grid(True, axis="y", alpha=0.3)
        for r in mine:
            loads = r["backend_requests"]
            mean = sum(loads) / len(loads) if loads else 1
            ax_load.plot(range(len(loads)), [v / mean for v in loads], "o-", label=r["contender"])
            qs, values = zip(*r["ttft_cdf_ms"], strict=True)
            ax_cdf.plot(values, qs, "-", label=r["contender"])
        ax_load.axhline(1.3, color="k", ls=":", label="1.3x mean")
        ax_load.set(xlabel="backend", ylabel="requests / mean", title="Load per backend")
        ax_cdf.set(xlabel="TTFT, ms", ylabel="percentile", title="TTFT CDF")
        ax_cdf.set_xscale("log")
        for ax in (ax_load, ax_cdf):
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize="small")
        fig.suptitle(f"{TITLES.get(workload, workload)}: 8 simulated backends")
        fig.tight_layout()
        fig.savefig(str(path), dpi=100)
    finally:
        plt.close(fig)


def plot_overhead(rows: Sequence[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        return
    top = next(k for k in rows[0] if k.startswith("c") and k not in ("c1", "contender"))
    kinds = list(dict.fromkeys(r["response"] for r in rows))
    names = list(dict.fromkeys(r["contender"] for r in rows))
    fig, (ax_rps, ax_lat) = plt.subplots(1, 2, figsize=(14, 4.8))
    try:
        width = 0.8 / len(names)
        for j, name in enumerate(names):
            rps, lat = [], []
            for k in kinds:
                r = next((r for r in rows if r["response"] == k and r["contender"] == name), None)
                rps.append(r[top]["rps"] if r else 0)
                lat.append(r["c1"]["p50_ms"] if r else 0)
            pos = [i + (j - (len(names) - 1) / 2) * width for i in range(len(kinds))]
            ax_rps.bar(pos, rps, width, label=name)
            ax_lat.bar(pos, lat, width, label=name)
        ax_rps.set(ylabel="requests/s", title=f"Most requests/s of one process ({top})")
        ax_lat.set(ylabel="ms (log scale)", title="p50 latency at concurrency 1")
        ax_lat.set_yscale("log")
        for ax in (ax_rps, ax_lat):
            ax.set_xticks(range(len(kinds)), kinds)
            ax.grid(True, axis="y", alpha=0.3)
            ax.legend(fontsize="small")
        fig.tight_layout()
        fig.savefig(str(path), dpi=100)
    finally:
        plt.close(fig)
