"""Admission control under overload: sluiceway with a small queue bound, open-loop arrivals
at twice its saturation throughput; the latency of admitted (200) and refused (429) requests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from contenders import SLUICEWAY, Contender, say, sluiceway_toml, started
from procs import CpuMeter, load_avg, now

from sluiceway.bench import workloads
from sluiceway.bench.loadgen import Target, run_closed, run_open
from sluiceway.bench.report import RunResult, format_brief, percentiles, summarize

OVERLOAD_QUEUE = 64


def _split(run: RunResult) -> dict[str, Any]:
    """Counts and latency percentiles of 200s, 429s and everything else."""
    lat_ms = run.latency * 1e3
    out: dict[str, Any] = {}
    for name, mask in (
        ("ok", run.status == 200),
        ("refused_429", run.status == 429),
        ("other", (run.status != 200) & (run.status != 429)),
    ):
        out[name] = {
            "count": int(np.count_nonzero(mask)),
            "latency_ms": {
                k: round(v, 3) for k, v in percentiles(lat_ms[mask], (50.0, 99.0, 100.0)).items()
            },
        }
    kinds, counts = np.unique(run.status[run.status != 200], return_counts=True)
    out["statuses"] = {str(int(k)): int(c) for k, c in zip(kinds, counts, strict=True)}
    return out


async def bench_overload(
    saturation_rps: float | None,
    overrides: dict[str, str],
    workdir: Path,
    *,
    request_timeout: float,
    probe_seconds: float,
    duration: float,
    warmup: float,
) -> dict[str, Any]:
    """Start sluiceway with a small admission bound, offer it twice its saturation rate."""
    before = load_avg()
    say(f"== overload: sluiceway with max_queue_items={OVERLOAD_QUEUE} (load average {before})")
    config = sluiceway_toml(overrides, max_queue_items=OVERLOAD_QUEUE)
    contender = Contender(
        "overload", "sluiceway serve (overload)", "sluiceway", SLUICEWAY.model, SLUICEWAY.ready_path
    )
    workload = workloads.embeddings(contender.model, "short", 1, seed=0)
    entry: dict[str, Any] = {
        "started_at": now(),
        "load_avg_before": before,
        "max_queue_items": OVERLOAD_QUEUE,
    }
    try:
        async with started(contender, workdir, config_text=config) as server:
            target = Target(server.url + workload.path, timeout=request_timeout)
            # Saturation measured here and now (the machine's load may have changed since the
            # sweep); the sweep's figure, when there is one, if it was higher.
            probe = await run_closed(target, workload, 64, duration=probe_seconds, warmup=1.0)
            probed = summarize(probe)
            here = probed.window_throughput_rps or probed.throughput_rps
            entry["saturation_here_rps"] = round(here, 2)
            entry["saturation_sweep_rps"] = saturation_rps
            saturation_rps = max(here, saturation_rps or 0.0)
            # If nothing was refused the offered load was no overload (the machine got
            # faster since the probe): offer twice as much, once.
            for factor in (2, 4):
                rate = round(factor * saturation_rps, 1)
                say(f"   open loop at {rate:g} req/s ({factor} x {saturation_rps:.1f})")
                cpu = CpuMeter(server.pid)
                run = await run_open(
                    target,
                    workload,
                    rate,
                    duration=duration,
                    warmup=warmup,
                    max_outstanding=4096,
                    seed=1,
                )
                summary = summarize(run)
                say(f"   {format_brief(summary)}")
                entry |= cpu.read() | {
                    "saturation_rps": round(saturation_rps, 2),
                    "factor": factor,
                    "offered_rps": rate,
                    "duration_s": duration,
                    "summary": summary.to_dict(),
                    "split": _split(run),
                    "memory": server.memory.statistics(),
                }
                if entry["split"]["refused_429"]["count"]:
                    break
    except RuntimeError as exc:
        say(f"   FAILED: {exc}")
        entry["skipped"] = str(exc).splitlines()[0]
    return entry
