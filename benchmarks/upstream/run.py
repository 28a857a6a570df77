"""The upstream benchmark: routing quality and router overhead, every contender in one run.

    bash benchmarks/upstream/setup_peers.sh        # once: nginx-light, wrk, sglang-router venv
    .venv/bin/python benchmarks/upstream/run.py    # ~15 min on 2 cores; --quick for ~4 min

Writes ``results/policy.json``, ``results/overhead.json``, one PNG per workload and one for
overhead, and the generated part of ``RESULTS.md`` (between the ``generated`` markers; text
outside them is kept). Everything runs on 127.0.0.1; every run is bounded in time.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import msgspec  # noqa: E402
import report  # noqa: E402
import workloads  # noqa: E402
from contenders import (  # noqa: E402
    EXTRA_CONTENDERS,
    OVERHEAD_CONTENDERS,
    POLICY_CONTENDERS,
    free_base_port,
    log,
)
from overhead import overhead_benchmark  # noqa: E402
from policy import MODEL, SIMULATOR, policy_benchmark  # noqa: E402

START = "<!-- generated:start -->"
END = "<!-- generated:end -->"


def machine() -> dict[str, Any]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_avg_at_start": os.getloadavg(),
    }


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="short runs (smoke test of the runner)")
    p.add_argument("--only", choices=["policy", "overhead"], help="run one part only")
    p.add_argument("--workloads", default="shared_prefix,multi_turn,skew")
    p.add_argument("--contenders", help="comma-separated labels (default: all)")
    p.add_argument("--rate", type=float, default=56.0, help="requests/s offered (open loop)")
    p.add_argument("--duration", type=float, default=25.0, help="measured seconds per run")
    p.add_argument("--warmup", type=float, default=5.0, help="unrecorded seconds per run")
    p.add_argument("--retries", type=int, default=1, help="repeats of a run the machine disturbed")
    p.add_argument("--overhead-seconds", type=float, default=8.0)
    p.add_argument("--connections", type=int, default=64, help="wrk connections (max req/s)")
    p.add_argument("--base-port", type=int, default=0, help="first port (0: a random free range)")
    p.add_argument("--out", type=Path, default=HERE / "results")
    return p


def _mixes(names: list[str]) -> list[workloads.Mix]:
    build = {
        "shared_prefix": workloads.shared_prefix,
        "multi_turn": workloads.multi_turn,
        "skew": workloads.skew,
    }
    return [build[n](MODEL) for n in names]


def _write_markdown(path: Path, doc: dict[str, Any]) -> None:
    policy, overhead = doc["policy"], doc["overhead"]
    m = doc["machine"]
    parts = [
        START,
        f"Run {doc['started']} on {m['cpu']}, {m['cores']} cores, Python {m['python']} "
        f"(load average at start {', '.join(f'{v:.2f}' for v in m['load_avg_at_start'])}, "
        f"at end {', '.join(f'{v:.2f}' for v in m.get('load_avg_at_end', ()))}).",
        "",
        f"Command: `{doc['command']}`",
        "",
        f"Simulated fleet: {SIMULATOR}. Open-loop Poisson arrivals at {doc['rate']:g} req/s, "
        f"{doc['warmup']:g} s warm-up + {doc['duration']:g} s measured per contender "
        "(caches and counters reset before each); streamed chat completions, 16 tokens each.",
        "",
        "### Targets",
        "",
        *report.targets(policy, overhead),
    ]
    for w in dict.fromkeys(r["workload"] for r in policy):
        params = next(r for r in policy if r["workload"] == w)["params"]
        parts += [
            "",
            f"### {report.TITLES.get(w, w)}",
            "",
            f"Workload: {params}. Plot: `results/policy_{w}.png`.",
            "",
            report.policy_table(policy, w),
        ]
    parts += [
        "",
        "### Router overhead",
        "",
        "Fixed-answer nginx backend; wrk, one thread, 1 and "
        f"{doc.get('connections', 64)} connections. Plot: `results/overhead.png`.",
        "",
        report.overhead_table(overhead),
        END,
    ]
    generated = "\n".join(parts)
    text = (
        path.read_text() if path.exists() else f"# Upstream benchmark results\n\n{START}\n{END}\n"
    )
    if START in text and END in text:
        head, rest = text.split(START, 1)
        tail = rest.split(END, 1)[1]
        text = head + generated + tail
    else:
        text = text + "\n" + generated + "\n"
    path.write_text(text)


async def main_async(args: argparse.Namespace, workdir: Path) -> int:
    if args.quick:
        args.duration, args.warmup, args.overhead_seconds = 8.0, 2.0, 3.0
    wanted = [w for w in args.workloads.split(",") if w]
    labels = set(args.contenders.split(",")) if args.contenders else None
    every = (*POLICY_CONTENDERS, *EXTRA_CONTENDERS)
    policy_contenders = [
        c
        for c in every
        if (labels is None and c in POLICY_CONTENDERS) or (labels and c.label in labels)
    ]
    overhead_contenders = [c for c in OVERHEAD_CONTENDERS if labels is None or c.label in labels]
    doc: dict[str, Any] = {
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": shlex.join(["python", "benchmarks/upstream/run.py", *sys.argv[1:]]),
        "machine": machine(),
        "simulator": SIMULATOR,
        "rate": args.rate,
        "duration": args.duration,
        "warmup": args.warmup,
        "connections": args.connections,
        "policy": [],
        "overhead": [],
    }
    mixes = _mixes(wanted)
    if not args.base_port:
        args.base_port = free_base_port(64)
    if args.only in (None, "policy"):
        rows = await policy_benchmark(
            mixes,
            policy_contenders,
            workdir,
            base_port=args.base_port,
            router_port=args.base_port + 50,
            rate=args.rate,
            duration=args.duration,
            warmup=args.warmup,
            retries=args.retries,
        )
        params = {m.name: m.params for m in mixes}
        for r in rows:
            r["params"] = params[r["workload"]]
        doc["policy"] = rows
        (args.out / "policy.json").write_bytes(msgspec.json.format(msgspec.json.encode(doc)))
        for m in mixes:
            report.plot_policy(rows, m.name, args.out / f"policy_{m.name}.png")
    if args.only in (None, "overhead"):
        doc["overhead"] = await overhead_benchmark(
            overhead_contenders,
            workdir,
            base_port=args.base_port + 60,
            seconds=args.overhead_seconds,
            connections=args.connections,
        )
        (args.out / "overhead.json").write_bytes(
            msgspec.json.format(
                msgspec.json.encode({k: v for k, v in doc.items() if k != "policy"})
            )
        )
        report.plot_overhead(doc["overhead"], args.out / "overhead.png")
    if args.only is not None:  # keep the other part's last results in the tables
        other = "overhead" if args.only == "policy" else "policy"
        saved = args.out / f"{other}.json"
        if saved.exists():
            doc[other] = msgspec.json.decode(saved.read_bytes()).get(other, [])
    doc["machine"]["load_avg_at_end"] = os.getloadavg()
    default_out = args.out.resolve() == (HERE / "results").resolve()
    _write_markdown(HERE / "RESULTS.md" if default_out else args.out / "RESULTS.md", doc)
    print("\n".join(report.targets(doc["policy"], doc["overhead"])))
    return 0


def main() -> int:
    args = _parser().parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="sluiceway-upstream-bench-"))
    workdir.chmod(0o755)  # nginx workers (user nobody) read the static backend's files
    log(f"work directory (logs, configs): {workdir}")
    try:
        import uvloop

        return uvloop.run(main_async(args, workdir))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
