"""Compare sluiceway config variants, interleaved, on a noisy machine.

Each variant is ``sluiceway serve`` with ``--set``-style overrides in its TOML. Rounds run
every variant once, in order (A B C, A B C, ...), each started fresh, measured at a few
short x1 concurrency levels and stopped, so slow drifts in the machine's load hit all
variants alike; the report gives the median over rounds per variant and level, with the
others' CPU seen meanwhile::

    .venv/bin/python benchmarks/embeddings/knobs.py \\
        --variant default= --variant nospin=allow_spinning=false \\
        --variant 1thread=intra_op_threads=1,allow_spinning=false --rounds 2

Writes ``<out>/knobs.json`` (default ``benchmarks/embeddings/results``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import msgspec  # noqa: E402
from contenders import SLUICEWAY, say, sluiceway_toml, started  # noqa: E402
from procs import CpuMeter, load_avg  # noqa: E402

from sluiceway.bench import workloads  # noqa: E402
from sluiceway.bench.loadgen import Target, run_closed  # noqa: E402
from sluiceway.bench.report import summarize  # noqa: E402


def _variant(text: str) -> tuple[str, dict[str, str]]:
    name, _, rest = text.partition("=")
    pairs = {}
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"{item!r}: expected KEY=TOML-VALUE")
        pairs[key.strip()] = value.strip()
    return name, pairs


async def _one(
    name: str, overrides: dict[str, str], args: argparse.Namespace, workdir: Path
) -> list[dict[str, Any]]:
    rows = []
    async with started(SLUICEWAY, workdir, config_text=sluiceway_toml(overrides)) as server:
        workload = workloads.embeddings(SLUICEWAY.model, args.inputs, 1, seed=0)
        target = Target(server.url + workload.path, timeout=60.0)
        for level in args.levels:
            cpu = CpuMeter(server.pid)
            run = await run_closed(
                target, workload, level, duration=args.duration, warmup=args.warmup
            )
            s = summarize(run)
            row = {
                "variant": name,
                "c": level,
                "items_per_s": round(s.window_items_per_s or s.items_per_s, 2),
                "p50_ms": round(s.latency_ms["p50"], 2),
                "p99_ms": round(s.latency_ms["p99"], 2),
                **cpu.read(),
            }
            say(f"   {row}")
            rows.append(row)
        for row in rows:
            row["peak_rss_mib"] = server.memory.statistics()["peak_rss_mib"]
    return rows


async def main_async(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for round_ in range(args.rounds):
        for name, overrides in args.variant:
            say(f"== round {round_ + 1}: {name} {overrides} (load average {load_avg()})")
            rows += await _one(name, overrides, args, workdir)
    medians = []
    for name, overrides in args.variant:
        for level in args.levels:
            mine = [r for r in rows if r["variant"] == name and r["c"] == level]
            medians.append(
                {
                    "variant": name,
                    "settings": overrides,
                    "c": level,
                    **{
                        key: round(statistics.median(r[key] for r in mine), 2)
                        for key in (
                            "items_per_s",
                            "p50_ms",
                            "p99_ms",
                            "server_cpu_pct",
                            "others_cpu_pct",
                        )
                    },
                }
            )
    return {"inputs": args.inputs, "duration_s": args.duration, "rows": rows, "medians": medians}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--variant",
        type=_variant,
        action="append",
        required=True,
        help="NAME=KEY=VALUE[,KEY=VALUE...] (NAME= for the defaults)",
    )
    p.add_argument("--levels", type=lambda t: [int(v) for v in t.split(",")], default=[1, 64])
    p.add_argument("--inputs", choices=workloads.INPUT_SETS, default="short")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--duration", type=float, default=4.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--out", type=Path, default=HERE / "results")
    args = p.parse_args()
    import uvloop

    workdir = Path(tempfile.mkdtemp(prefix="sluiceway-embeddings-knobs-"))
    doc = uvloop.run(main_async(args, workdir))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "knobs.json").write_bytes(msgspec.json.format(msgspec.json.encode(doc)) + b"\n")
    for m in doc["medians"]:
        say(
            f"{m['variant']:>12} c={m['c']:<4} {m['items_per_s']:8.1f}/s  p50 {m['p50_ms']:8.1f}"
            f"  p99 {m['p99_ms']:8.1f} ms  server CPU {m['server_cpu_pct']:5.0f}%"
            f"  others {m['others_cpu_pct']:5.0f}%"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
