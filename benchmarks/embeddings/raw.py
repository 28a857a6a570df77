"""The raw engine ceiling: tokenize + run + pool + normalise in-process, no HTTP, no queue.

Uses sluiceway's own pieces (the default model's settings, ``load_onnx``: the same tokenizer,
ONNX Runtime session options and pooling the server uses) on the benchmark's input sets, one
batch after another on one thread, padding each batch to its longest input. Per (input set,
batch size) it reports sentences/s and the per-batch latency percentiles; the batch-1 figures
are the floor any server's latency at concurrency 1 is compared with.

Run by ``run.py`` in its own process (so its memory and threads are measured alone)::

    .venv/bin/python benchmarks/embeddings/raw.py --seconds 3 --json /tmp/raw.json
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
import tomllib
from typing import Any

import msgspec
import numpy as np

from sluiceway.bench.report import percentiles
from sluiceway.bench.workloads import INPUT_SETS, InputSet, make_texts
from sluiceway.config.settings import EncoderModelSettings, default_models
from sluiceway.engines.pooling import l2_normalize
from sluiceway.engines.protocol import EncoderEngine
from sluiceway.engines.tokenizer import TextTokenizer
from sluiceway.providers.encoder import load_onnx

BATCH_SIZES = (1, 8, 32, 64)


def default_encoder(overrides: list[str]) -> EncoderModelSettings:
    """The default model's settings with ``key=toml-value`` engine overrides applied
    (``intra_op_threads=1``, ``allow_spinning=false``; ``batching.*`` keys do not apply)."""
    for model in default_models():
        if isinstance(model, EncoderModelSettings):
            changes = {}
            for item in overrides:
                key, _, value = item.partition("=")
                if not key.startswith("batching."):
                    changes[key.strip()] = tomllib.loads(f"v = {value}")["v"]
            return msgspec.structs.replace(model, **changes)
    raise RuntimeError("no default encoder model")


def embed(tokenizer: TextTokenizer, engine: EncoderEngine, texts: list[str]) -> np.ndarray:
    """What a server does per batch: tokenize, pad to the longest, run, pool, normalise."""
    encoded = tokenizer.encode(texts, True, "right")
    width = max(len(e.ids) for e in encoded)
    ids = np.zeros((len(encoded), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, e in enumerate(encoded):
        ids[row, : len(e.ids)] = e.ids
        mask[row, : len(e.ids)] = 1
    return l2_normalize(engine.run(ids, mask))


def measure(
    tokenizer: TextTokenizer,
    engine: EncoderEngine,
    texts: list[str],
    batch_size: int,
    *,
    seconds: float,
    min_batches: int,
) -> dict[str, Any]:
    """Back-to-back batches for ``seconds`` (and at least ``min_batches``) after one warm-up."""
    starts = itertools.cycle(range(0, len(texts) - batch_size + 1, batch_size))
    embed(tokenizer, engine, texts[:batch_size])
    latencies: list[float] = []
    began = time.perf_counter()
    while len(latencies) < min_batches or time.perf_counter() - began < seconds:
        at = next(starts)
        t0 = time.perf_counter()
        embed(tokenizer, engine, texts[at : at + batch_size])
        latencies.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - began
    lat_ms = np.asarray(latencies) * 1e3
    return {
        "batch_size": batch_size,
        "batches": len(latencies),
        "sentences_per_s": round(len(latencies) * batch_size / elapsed, 2),
        "batch_latency_ms": {k: round(v, 3) for k, v in percentiles(lat_ms).items()}
        | {"mean": round(float(np.mean(lat_ms)), 3)},
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seconds", type=float, default=3.0, help="per input set and batch size")
    p.add_argument("--batch1-seconds", type=float, default=None, help="default: 2 x --seconds")
    p.add_argument("--min-batches", type=int, default=2)
    p.add_argument("--inputs", default=",".join(INPUT_SETS))
    p.add_argument("--batch-sizes", default=",".join(map(str, BATCH_SIZES)))
    p.add_argument("--set", action="append", default=[], help="model setting KEY=TOML-VALUE")
    p.add_argument("--json", dest="json_path", default=None, help="write results here")
    args = p.parse_args()
    settings = default_encoder(args.set)
    tokenizer, engine = load_onnx(settings)
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    results: dict[str, list[dict[str, Any]]] = {}
    for name in args.inputs.split(","):
        if name not in INPUT_SETS:
            raise SystemExit(f"unknown input set {name!r}; expected one of {INPUT_SETS}")
        inputs: InputSet = name
        texts = make_texts(inputs, 1024, seed=0)
        rows = []
        for size in sizes:
            seconds = (args.batch1_seconds or 2 * args.seconds) if size == 1 else args.seconds
            row = measure(
                tokenizer, engine, texts, size, seconds=seconds, min_batches=args.min_batches
            )
            rows.append(row)
            lat = row["batch_latency_ms"]
            print(
                f"raw {name} batch {size}: {row['sentences_per_s']:.1f} sentences/s, "
                f"batch p50 {lat['p50']:.2f} p99 {lat['p99']:.2f} ms ({row['batches']} batches)",
                file=sys.stderr,
                flush=True,
            )
        results[name] = rows
    doc = {
        "model": settings.id,
        "onnx_file": settings.onnx_file,
        "intra_op_threads": settings.intra_op_threads,
        "allow_spinning": settings.allow_spinning,
        "memory_arena": getattr(settings, "memory_arena", None),
        "results": results,
    }
    out = msgspec.json.format(msgspec.json.encode(doc))
    if args.json_path:
        with open(args.json_path, "wb") as f:
            f.write(out + b"\n")
    else:
        sys.stdout.buffer.write(out + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
