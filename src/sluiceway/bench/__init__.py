"""``sluiceway bench``: a load generator for any OpenAI-compatible endpoint.

Modules, one concept each::

    workloads  what to send: deterministic (seeded) pre-encoded request bodies
    loadgen    how to send: closed-loop workers, open-loop Poisson arrivals (aiohttp)
    progress   live counters and the progress line on stderr
    report     samples -> throughput, p50/p90/p99/p99.9 latency, errors; terminal table
    plot       result JSON files -> one PNG (matplotlib, the ``bench`` extra, imported lazily)
    cli        the ``bench`` sub-commands (``register`` for the main CLI, ``main`` for -m)

Programmatic use::

    from sluiceway.bench import Target, run_closed, summarize, workloads

    wl = workloads.embeddings("all-minilm-l6-v2", "short", texts_per_request=1)
    run = await run_closed(Target("http://127.0.0.1:8000/v1/embeddings"), wl, 16, duration=5)
    print(summarize(run).to_dict())
"""

from sluiceway.bench import workloads
from sluiceway.bench.loadgen import Target, run_closed, run_open
from sluiceway.bench.report import RunResult, Summary, format_table, summarize
from sluiceway.bench.workloads import Workload

__all__ = [
    "RunResult",
    "Summary",
    "Target",
    "Workload",
    "format_table",
    "run_closed",
    "run_open",
    "summarize",
    "workloads",
]
