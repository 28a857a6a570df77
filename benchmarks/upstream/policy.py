"""Routing quality: every contender in front of the same 8 simulated backends, per workload.

For each workload and contender: start the contender, reset every backend (empty caches, zero
counters), send the workload open-loop (Poisson arrivals at a fixed rate, the project's load
generator ``sluiceway.bench.run_open``), then read the backends' own counters. The oracle
replays the requests that were sent through one unbounded cache (see ``oracle.py``).
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import numpy as np
from contenders import VENV_PYTHON, Contender, alive, log, process, router, wait_ready
from oracle import oracle_hit_rate, partitioned_hit_rate
from workloads import Mix, Recorded

from sluiceway.bench import Target, run_open, summarize
from sluiceway.bench.report import percentiles
from sluiceway.bench.workloads import Workload

MODEL = "sim"
PROBE = msgspec.json.encode(
    {"model": MODEL, "messages": [{"role": "user", "content": "ready?"}], "max_tokens": 1}
)
#: The simulated fleet (the same for every contender and workload).
SIMULATOR = {
    "backends": 8,
    "prefill_us_per_token": 200.0,
    "overhead_ms": 5.0,
    "decode_tps": 50.0,
    "max_seqs": 8,
    "cache_blocks": 512,
    "block_tokens": 16,
}
#: A run whose arrivals went out later than this (p99) is repeated: the machine was busy.
MAX_LAG_MS = 50.0
TTFT_GRID = (*range(0, 100, 5), 99, 99.9, 100)


def simulator_argv(base_port: int, name: str) -> list[str]:
    s = SIMULATOR
    return [
        str(VENV_PYTHON), "-m", "sluiceway.bench.simulated", "--model", name,
        "--backends", str(s["backends"]), "--base-port", str(base_port),
        "--prefill-us-per-token", str(s["prefill_us_per_token"]),
        "--overhead-ms", str(s["overhead_ms"]), "--decode-tps", str(s["decode_tps"]),
        "--max-seqs", str(s["max_seqs"]), "--cache-blocks", str(s["cache_blocks"]),
        "--block-tokens", str(s["block_tokens"]),
    ]  # fmt: skip


async def _each(backends: Sequence[str], method: str, path: str) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        out = []
        for b in backends:
            async with session.request(method, b + path) as resp:
                out.append(msgspec.json.decode(await resp.read()))
        return out


async def _wait_sglang_workers(url: str, count: int) -> None:
    """sglang-router registers workers in the background: wait until it lists them all."""
    import asyncio

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        for _ in range(150):
            try:
                async with session.get(url + "/workers") as resp:
                    doc = msgspec.json.decode(await resp.read())
                workers = doc.get("workers", doc) if isinstance(doc, dict) else doc
                if isinstance(workers, list) and len(workers) >= count:
                    return
            except (aiohttp.ClientError, msgspec.DecodeError):
                pass
            await asyncio.sleep(0.2)
    log(f"warning: {url} did not list {count} workers")


def _row(
    mix: Mix, contender: Contender, run: Any, stats: list[dict[str, Any]], recorded: Recorded
) -> dict[str, Any]:
    summary = summarize(run).to_dict()
    prompt = sum(s["prompt_tokens"] for s in stats)
    cached = sum(s["cached_tokens"] for s in stats)
    prefill = sum(s["prefill_tokens"] for s in stats)
    per_backend = [s["requests"] for s in stats]
    sent = recorded.sent_bodies()
    oracle = oracle_hit_rate(
        sent,
        int(SIMULATOR["block_tokens"]),
        overhead_ms=SIMULATOR["overhead_ms"],
        us_per_token=SIMULATOR["prefill_us_per_token"],
    )
    oracle["partitioned_hit_rate"] = partitioned_hit_rate(
        sent,
        int(SIMULATOR["block_tokens"]),
        int(SIMULATOR["backends"]),
        int(SIMULATOR["cache_blocks"]),
        "conversation" if mix.name == "multi_turn" else "system",
    )
    hit = cached / prompt if prompt else float("nan")
    ok = run.ok & ~np.isnan(run.ttft)
    ttft_ms = run.ttft[ok] * 1e3
    mean_load = float(np.mean(per_backend)) if per_backend else float("nan")
    return {
        "workload": mix.name,
        "contender": contender.label,
        "sent": len(recorded.sent),
        "backend_requests": per_backend,
        "load_max_over_mean": max(per_backend) / mean_load if mean_load else float("nan"),
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "prefill_tokens": prefill,
        "hit_rate": hit,
        "oracle": oracle,
        "hit_vs_oracle": hit / oracle["hit_rate"] if oracle["hit_rate"] else float("nan"),
        "recomputed_tokens": prefill - oracle["prefill_tokens"],
        "ttft_ms": percentiles(ttft_ms, (50.0, 90.0, 99.0)),
        "ttft_cdf_ms": list(zip(TTFT_GRID, percentiles(ttft_ms, TTFT_GRID).values(), strict=True)),
        "latency_ms": summary["latency_ms"],
        "throughput_rps": summary["throughput_rps"],
        "errors": summary["errors"],
        "error_kinds": summary["error_kinds"],
        "summary": summary,
    }


async def policy_benchmark(
    mixes: Sequence[Mix],
    contenders: Sequence[Contender],
    workdir: Path,
    *,
    base_port: int,
    router_port: int,
    rate: float,
    duration: float,
    warmup: float,
    retries: int = 1,
) -> list[dict[str, Any]]:
    count = int(SIMULATOR["backends"])
    backends = [f"http://127.0.0.1:{base_port + i}" for i in range(count)]
    rows: list[dict[str, Any]] = []
    # A unique listed model name proves the backends answering are this run's simulator.
    name = f"sim-{secrets.token_hex(4)}"
    async with process(simulator_argv(base_port, name), workdir / "simulated.log") as sim:
        for b in backends:
            await wait_ready(b + "/v1/models", sim, body=None, expect=name.encode())
        for mix in mixes:
            n = int(rate * (warmup + duration) * 1.5) + 256
            bodies = mix.build(n)
            for contender in contenders:
                if reason := contender.available():
                    log(f"{mix.name}: {contender.label}: skipped, {reason}")
                    continue
                log(
                    f"{mix.name}: {contender.label} at {rate:g} req/s for {warmup:g}+{duration:g} s"
                )
                for attempt in range(1 + retries):
                    where = workdir / f"{mix.name}-{contender.kind}-{contender.policy}-{attempt}"
                    async with router(
                        contender, router_port, backends, where, model=MODEL, probe=PROBE
                    ) as url:
                        if contender.kind == "sglang":
                            await _wait_sglang_workers(url, count)
                        await _each(backends, "POST", "/_reset")
                        recorded = Recorded(bodies)
                        workload = Workload(
                            name=mix.name,
                            path="/v1/chat/completions",
                            body=recorded.body,
                            stream=True,
                            params={"model": MODEL},
                        )
                        run = await run_open(
                            Target(url + "/v1/chat/completions", timeout=120.0),
                            workload,
                            rate,
                            duration=duration,
                            warmup=warmup,
                            max_outstanding=2048,
                            seed=11,
                            progress=sys.stderr,
                        )
                        stats = await _each(backends, "GET", "/_stats")
                        alive(sim, "the simulator")
                    # The generator itself sending late means the machine was too busy to trust
                    # the latencies: measure again (once by default).
                    lag = float(np.percentile(run.lag, 99) * 1e3) if run.lag.size else 0.0
                    if lag <= MAX_LAG_MS:
                        break
                    log(f"  load generator lag p99 {lag:.0f} ms > {MAX_LAG_MS:g} ms: machine busy")
                row = _row(mix, contender, run, stats, recorded)
                row["attempts"] = attempt + 1
                row["generator_lag_p99_ms"] = lag
                log(
                    f"  hit {row['hit_rate']:.3f} (oracle {row['oracle']['hit_rate']:.3f}),"
                    f" ttft p50 {row['ttft_ms']['p50']:.0f} p99 {row['ttft_ms']['p99']:.0f} ms,"
                    f" load max/mean {row['load_max_over_mean']:.2f}, errors {row['errors']}"
                )
                rows.append(row)
    return rows
