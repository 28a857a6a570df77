"""The embeddings benchmark (issue 2): every contender side by side, in one run, on this machine.

    bash benchmarks/peers/setup.sh                    # once: the peers' venvs under .bench/
    .venv/bin/python benchmarks/embeddings/run.py     # ~12 min on 2 cores; --quick ~4 min
    .venv/bin/python benchmarks/embeddings/run.py --only sluiceway,naive --quick

Contenders, one after another, each started fresh and stopped afterwards (never two under
load at once); the load generator (``sluiceway.bench``) runs in this process, on 127.0.0.1:

- ``raw``: the engine ceiling, sluiceway's tokenizer + ONNX session + pooling in-process
  (``raw.py``, batch sizes 1/8/32/64, no HTTP);
- ``sluiceway``: ``sluiceway serve`` with only the default embedding model;
- ``naive`` / ``gunicorn``: the naive FastAPI service, 1 uvicorn worker / Gunicorn 2 workers;
- ``infinity``: Infinity's ONNX (optimum) engine on the same model file;
- ``overload``: sluiceway with ``max_queue_items = 64`` under open-loop Poisson arrivals at
  2x sluiceway's measured saturation throughput (4x if nothing was refused; 200s vs 429s).

The same model file and the same input sets for all (short 15 tokens, long 130, mixed 8..250;
``sluiceway.bench.workloads``). Peak RSS/PSS of each server's whole process tree is sampled
from /proc every 0.2 s. Writes ``<out>/embeddings.json``, PNG plots and ``RESULTS.md``. With
``--only``, the named parts replace their entries in an existing ``embeddings.json`` of the
same mode (quick or full); the others are kept, with their own load averages.

Engine/batching knobs of the sluiceway contenders (and of ``raw``, for engine keys) go
through the TOML config: ``--set intra_op_threads=1 --set batching.max_wait_ms=1``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import markdown  # noqa: E402
import msgspec  # noqa: E402
import plots  # noqa: E402
import targets  # noqa: E402
from contenders import (  # noqa: E402
    CONTENDERS,
    ROOT,
    SLUICEWAY,
    VENV_PYTHON,
    Contender,
    Running,
    quiet_env,
    say,
    sluiceway_toml,
    started,
)
from overload import bench_overload  # noqa: E402
from procs import CpuMeter, TreeSampler, load_avg, now  # noqa: E402

from sluiceway.bench import workloads  # noqa: E402
from sluiceway.bench.loadgen import Target, preflight, run_closed  # noqa: E402
from sluiceway.bench.report import (  # noqa: E402
    format_brief,
    summarize,
)

SCHEMA = "sluiceway.embeddings-bench/1"
PARTS = ("raw", "sluiceway", "naive", "gunicorn", "infinity", "overload")
#: (input set, texts per request, closed-loop concurrency levels, duration factor). A mixed
#: x32 request is ~100x the work of a short x1 one: it gets twice the time per level, so
#: that more than a handful of requests start and finish inside the measured window.
Plan = list[tuple[workloads.InputSet, int, list[int], float]]
FULL_PLAN: Plan = [
    ("short", 1, [1, 4, 16, 64, 256], 1.0),
    ("long", 1, [16, 64], 1.0),
    ("mixed", 32, [1, 4], 2.0),
]
QUICK_PLAN: Plan = [("short", 1, [1, 16, 64], 1.0), ("long", 1, [16], 1.0), ("mixed", 32, [1], 2.0)]


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
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_avg_at_start": load_avg(),
    }


# --- raw ceiling ----------------------------------------------------------------------------


def run_raw(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """``raw.py`` in its own process (its memory sampled like a server's)."""
    out = workdir / "raw.json"
    argv = [
        str(VENV_PYTHON),
        str(HERE / "raw.py"),
        "--seconds",
        str(args.raw_seconds),
        "--json",
        str(out),
        *(f"--set={s}" for s in args.set),
    ]
    before = load_avg()
    say(f"== raw engine ceiling (load average {before})")
    began = time.monotonic()
    proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, env=quiet_env())
    with TreeSampler(proc.pid) as memory:
        code = proc.wait()
    if code != 0:
        return {"skipped": f"raw.py exited with status {code}", "load_avg_before": before}
    doc: dict[str, Any] = msgspec.json.decode(out.read_bytes())
    doc |= {
        "started_at": now(),
        "load_avg_before": before,
        "memory": memory.statistics(),
        "seconds": round(time.monotonic() - began, 1),
    }
    return doc


# --- closed-loop sweep of one server ----------------------------------------------------------


async def _level(
    target: Target,
    workload: workloads.Workload,
    level: int,
    pid: int,
    *,
    duration: float,
    warmup: float,
) -> dict[str, Any]:
    cpu = CpuMeter(pid)
    run = await run_closed(target, workload, level, duration=duration, warmup=warmup)
    summary = summarize(run)
    row = summary.to_dict() | cpu.read()
    say(
        f"   {workload.name} {format_brief(summary)}; in-window {targets.rate(row):.1f} items/s;"
        f" CPU % server {row['server_cpu_pct']} client {row['client_cpu_pct']}"
        f" others {row['others_cpu_pct']}"
    )
    return row


async def sweep(
    contender: Contender, server: Running, plan: Plan, args: argparse.Namespace
) -> dict[str, list[dict[str, Any]]]:
    results: dict[str, list[dict[str, Any]]] = {}
    for inputs, per_request, levels, factor in plan:
        workload = workloads.embeddings(contender.model, inputs, per_request, seed=0)
        target = Target(server.url + workload.path, timeout=args.timeout)
        status, head = await preflight(target, workload)
        if not 200 <= status < 300:
            say(f"   {workload.name}: first request got HTTP {status}: {head!r}; skipped")
            results[workload.name] = []
            continue
        results[workload.name] = [
            await _level(
                target,
                workload,
                level,
                server.pid,
                duration=factor * args.duration,
                warmup=factor * args.warmup,
            )
            for level in levels
        ]
    return results


async def bench_server(
    contender: Contender, plan: Plan, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    before = load_avg()
    entry: dict[str, Any] = {
        "label": contender.label,
        "started_at": now(),
        "load_avg_before": before,
    }
    if (why := contender.missing()) is not None:
        say(f"== {contender.name}: SKIPPED: {why}")
        return entry | {"skipped": why}
    say(f"== {contender.label} (load average {before})")
    config = sluiceway_toml(dict(_pairs(args.set)))
    try:
        async with started(contender, workdir, config_text=config) as server:
            say(f"   ready after {server.ready_s:.1f} s, pid {server.pid}")
            entry["ready_s"] = round(server.ready_s, 2)
            entry["idle_rss_mib"] = server.memory.statistics()["last_rss_mib"]
            entry["workloads"] = await sweep(contender, server, plan, args)
            entry["memory"] = server.memory.statistics()
    except RuntimeError as exc:
        say(f"   FAILED: {exc}")
        return entry | {"skipped": str(exc).splitlines()[0]}
    if contender is SLUICEWAY:
        entry["config"] = config
    say(
        f"   peak RSS {entry['memory']['peak_rss_mib']} MiB (PSS {entry['memory']['peak_pss_mib']})"
    )
    return entry


# --- driver ---------------------------------------------------------------------------------


def _pairs(items: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set wants KEY=TOML-VALUE, got {item!r}")
        pairs.append((key.strip(), value.strip()))
    return pairs


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="short runs: smoke-test the runner")
    p.add_argument(
        "--report-only",
        action="store_true",
        help="measure nothing: redraw the PNGs and RESULTS.md from <out>/embeddings.json",
    )
    p.add_argument("--only", default=",".join(PARTS), help=f"comma-separated, of {PARTS}")
    p.add_argument("--out", type=Path, default=HERE / "results", help="results directory")
    p.add_argument("--duration", type=float, default=None, help="measured s/level (5; quick 2)")
    p.add_argument("--warmup", type=float, default=None, help="warm-up s/level (1; quick 0.5)")
    p.add_argument("--raw-seconds", type=float, default=None, help="raw s/cell (2; quick 0.5)")
    p.add_argument("--overload-duration", type=float, default=None, help="(8; quick 3)")
    p.add_argument("--timeout", type=float, default=60.0, help="per-request timeout, s")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="sluiceway model setting as TOML, e.g. intra_op_threads=1, batching.max_wait_ms=1",
    )
    p.add_argument(
        "--markdown",
        type=Path,
        default=None,
        help="RESULTS.md path (default: benchmarks/embeddings/RESULTS.md for the default --out,"
        " else <out>/RESULTS.md)",
    )
    return p


def _defaults(args: argparse.Namespace) -> None:
    quick = args.quick
    for name, full, short in (
        ("duration", 5.0, 2.0),
        ("warmup", 1.0, 0.5),
        ("raw_seconds", 2.0, 0.5),
        ("overload_duration", 8.0, 3.0),
    ):
        if getattr(args, name) is None:
            setattr(args, name, short if quick else full)


def _previous(path: Path, quick: bool) -> dict[str, Any]:
    """The parts of an earlier run of the same mode, to keep what ``--only`` does not redo."""
    if not path.exists():
        return {}
    doc: dict[str, Any] = msgspec.json.decode(path.read_bytes())
    if doc.get("schema") != SCHEMA or doc.get("quick") != quick:
        return {}
    return doc


def _saturation(doc: dict[str, Any]) -> float | None:
    entry = doc.get("contenders", {}).get("sluiceway", {})
    runs = entry.get("workloads", {}).get("embeddings/shortx1", [])
    rates = [targets.rps(r) for r in runs]
    return max(rates) if rates else None


async def main_async(args: argparse.Namespace, parts: list[str], workdir: Path) -> dict[str, Any]:
    plan = QUICK_PLAN if args.quick else FULL_PLAN
    json_path = args.out / "embeddings.json"
    doc = _previous(json_path, args.quick) if set(parts) != set(PARTS) else {}
    kept = [p for p in PARTS if p not in parts and (p in doc or p in doc.get("contenders", {}))]
    doc |= {
        "schema": SCHEMA,
        "quick": args.quick,
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": shlex.join([".venv/bin/python", "benchmarks/embeddings/run.py", *sys.argv[1:]]),
        "machine": machine(),
        "plan": {
            "levels": [
                {
                    "inputs": i,
                    "texts_per_request": n,
                    "concurrency": c,
                    "duration_s": f * args.duration,
                }
                for i, n, c, f in plan
            ],
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "raw_seconds": args.raw_seconds,
            "overload_duration_s": args.overload_duration,
        },
        "sluiceway_settings": dict(_pairs(args.set)),
        "kept_from_earlier_run": kept,
    }
    doc.setdefault("contenders", {})
    say(
        f"machine: {doc['machine']['cpu']}, nproc {doc['machine']['nproc']}, "
        f"load average {doc['machine']['load_avg_at_start']}; work dir {workdir}"
    )
    if "raw" in parts:
        doc["raw"] = await asyncio.to_thread(run_raw, args, workdir)
        _save(doc, json_path)
    for contender in CONTENDERS:
        if contender.name in parts:
            doc["contenders"][contender.name] = await bench_server(contender, plan, args, workdir)
            _save(doc, json_path)
    if "overload" in parts:
        doc["overload"] = await bench_overload(
            _saturation(doc),
            dict(_pairs(args.set)),
            workdir,
            request_timeout=args.timeout,
            probe_seconds=args.duration,
            duration=args.overload_duration,
            warmup=args.warmup,
        )
    doc["targets"] = targets.targets(doc)
    _save(doc, json_path)
    return doc


def _save(doc: dict[str, Any], path: Path) -> None:
    path.write_bytes(msgspec.json.format(msgspec.json.encode(doc)) + b"\n")


def main() -> int:
    args = _parser().parse_args()
    _defaults(args)
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        say(f"unknown --only part(s) {unknown}; choose from {PARTS}")
        return 2
    _pairs(args.set)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.markdown is None:
        default_out = args.out.resolve() == (HERE / "results").resolve()
        args.markdown = HERE / "RESULTS.md" if default_out else args.out / "RESULTS.md"
    if args.report_only:
        doc = msgspec.json.decode((args.out / "embeddings.json").read_bytes())
        doc["targets"] = targets.targets(doc)
        _report(doc, args)
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="sluiceway-embeddings-bench-"))
    import uvloop

    # SIGTERM like Ctrl-C: cancel the run so every started server is stopped on the way out.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    began = time.monotonic()
    try:
        doc = uvloop.run(main_async(args, parts, workdir))
    except KeyboardInterrupt:
        say(f"interrupted; parts finished so far are in {args.out / 'embeddings.json'}")
        return 130
    say(f"\nfinished in {time.monotonic() - began:.0f} s; logs in {workdir}")
    _report(doc, args)
    return 0


def _report(doc: dict[str, Any], args: argparse.Namespace) -> None:
    written = plots.draw_all(doc, args.out)
    args.markdown.write_text(markdown.markdown(doc, args.out, args.markdown.parent))
    names = ", ".join(p.name for p in written)
    say(f"wrote {args.out / 'embeddings.json'}, {names}, {args.markdown}")
    for line in targets.target_lines(doc["targets"]):
        say(line)


if __name__ == "__main__":
    sys.exit(main())
