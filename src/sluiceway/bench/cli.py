"""``sluiceway bench``: benchmark any OpenAI-compatible endpoint from the command line.

Examples::

    # closed-loop concurrency sweep, 10 s per level after 2 s of warm-up
    sluiceway bench embeddings --url http://127.0.0.1:8000 --model all-minilm-l6-v2 \\
        --inputs short --texts-per-request 1 --concurrency 1,4,16,64 --duration 10 --warmup 2 \\
        --json out.json --plot out.png

    # open loop: Poisson arrivals at 100 and 200 requests/s
    sluiceway bench embeddings --model all-minilm-l6-v2 --rate 100,200 --duration 10

    # streaming chat: TTFT and chunk counts
    sluiceway bench chat --url http://127.0.0.1:8000 --model smollm2 --stream --max-tokens 32

    # several result files (contenders) in one figure
    sluiceway bench plot sluiceway.json infinity.json --out compare.png

``--url`` is the server's base URL (the workload adds ``/v1/embeddings`` etc.), a base ending
in ``/v1``, or a full endpoint URL. Exit codes: 0 when the run completed (HTTP errors from the
server are results, reported in the table and the JSON), 1 when the target is unreachable,
2 for bad arguments, 130 when interrupted (levels already measured are still written).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import importlib.util
import math
import platform
import sys
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import msgspec

from sluiceway.bench import workloads
from sluiceway.bench.loadgen import Target, preflight, run_closed, run_open
from sluiceway.bench.report import (
    Summary,
    format_brief,
    format_table,
    sample_warning,
    summarize,
)
from sluiceway.errors import InvalidRequest, Unavailable

SCHEMA = "sluiceway.bench/1"


def endpoint_url(url: str, path: str) -> str:
    """Join a base URL and a workload path (``/v1/...``) unless ``url`` already names one."""
    base = url.rstrip("/")
    url_path = urlsplit(base).path
    if url_path == "":
        return base + path
    if url_path.endswith("/v1"):
        return base + path.removeprefix("/v1")
    return base


def _number(text: str, *, zero: bool = False) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (value > 0 or (zero and value == 0)) or math.isinf(value):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _positive(text: str) -> float:
    return _number(text)


def _non_negative(text: str) -> float:
    return _number(text, zero=True)


def _positive_int(text: str) -> int:
    value = _number(text)
    if value != int(value):
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(value)


def _numbers(text: str) -> list[float]:
    """``"1,4,16"`` -> ``[1.0, 4.0, 16.0]`` (positive numbers)."""
    return [_positive(v) for v in text.split(",")]


def _counts(text: str) -> list[int]:
    """``"1,4,16"`` -> ``[1, 4, 16]`` (positive whole numbers)."""
    return [_positive_int(v) for v in text.split(",")]


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected 'Name: value', got {text!r}")
    return name.strip(), value.strip()


def _common(p: argparse.ArgumentParser, concurrency: str) -> None:
    p.add_argument("--url", default="http://127.0.0.1:8000", help="base or endpoint URL")
    p.add_argument("--model", required=True, help="the `model` field sent in every request")
    p.add_argument(
        "--concurrency",
        type=_counts,
        default=_counts(concurrency),
        help=f"closed-loop levels, comma-separated (default {concurrency})",
    )
    p.add_argument(
        "--rate",
        type=_numbers,
        default=None,
        help="open-loop Poisson arrival rates in requests/s (replaces --concurrency)",
    )
    p.add_argument("--duration", type=_positive, default=10.0, help="measured seconds per level")
    p.add_argument("--warmup", type=_non_negative, default=2.0, help="unmeasured seconds per level")
    p.add_argument(
        "--requests",
        type=_positive_int,
        default=None,
        help="closed loop: stop after this many measured requests per level",
    )
    p.add_argument(
        "--max-outstanding",
        type=_positive_int,
        default=256,
        help="open loop: cap on requests in flight; arrivals over it are dropped",
    )
    p.add_argument("--timeout", type=_positive, default=30.0, help="per-request timeout, seconds")
    p.add_argument("--seed", type=int, default=0, help="seed for inputs and arrivals")
    p.add_argument("--api-key", default=None, help="sent as 'Authorization: Bearer KEY'")
    p.add_argument(
        "--header",
        type=_header,
        action="append",
        default=[],
        help="extra request header 'Name: value' (repeatable)",
    )
    p.add_argument("--label", default=None, help="contender name in the JSON and plots")
    p.add_argument("--json", dest="json_path", default=None, help="write results as JSON here")
    p.add_argument("--plot", dest="plot_path", default=None, help="write a PNG plot here")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")


def _generation(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prompt-tokens", type=int, default=64, help="user prompt length")
    p.add_argument("--max-tokens", type=int, default=64, help="`max_tokens` of each request")
    p.add_argument("--stream", action="store_true", help="stream (SSE); measures TTFT")
    p.add_argument("--system-tokens", type=int, default=0, help="shared prefix length (0: none)")
    p.add_argument("--prefixes", type=int, default=1, help="number of distinct shared prefixes")


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``bench`` and its sub-commands to a parent parser's subparsers."""
    bench = subparsers.add_parser(
        "bench",
        help="load-test an OpenAI-compatible endpoint",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bench.set_defaults(func=lambda _args: _usage(bench))
    kinds = bench.add_subparsers(dest="bench_command", metavar="{embeddings,chat,completions,plot}")
    emb = kinds.add_parser("embeddings", help="POST /v1/embeddings")
    _common(emb, "1,4,16,64")
    emb.add_argument(
        "--inputs",
        choices=workloads.INPUT_SETS,
        default="short",
        help="short (15 tokens/text), long (130), mixed (8..250)",
    )
    emb.add_argument("--texts-per-request", type=_positive_int, default=1, help="default 1")
    emb.add_argument("--encoding-format", choices=("float", "base64"), default=None)
    emb.set_defaults(func=run_command)
    for name, path in (("chat", "/v1/chat/completions"), ("completions", "/v1/completions")):
        gen = kinds.add_parser(name, help=f"POST {path}")
        _common(gen, "1,4,16")
        _generation(gen)
        gen.set_defaults(func=run_command)
    plot = kinds.add_parser("plot", help="plot one or more result JSON files into one PNG")
    plot.add_argument("results", nargs="+", help="files written by --json")
    plot.add_argument("--out", required=True, help="PNG path")
    plot.add_argument("--title", default=None)
    plot.set_defaults(func=plot_command)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def build_workload(args: argparse.Namespace) -> workloads.Workload:
    if args.bench_command == "embeddings":
        return workloads.embeddings(
            args.model,
            args.inputs,
            args.texts_per_request,
            seed=args.seed,
            encoding_format=args.encoding_format,
        )
    build = workloads.chat if args.bench_command == "chat" else workloads.completions
    return build(
        args.model,
        prompt_tokens=args.prompt_tokens,
        max_tokens=args.max_tokens,
        stream=args.stream,
        system_tokens=args.system_tokens,
        prefixes=args.prefixes,
        seed=args.seed,
    )


def _document(
    args: argparse.Namespace,
    workload: workloads.Workload,
    target: Target,
    started: str,
    summaries: list[Summary],
) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "label": args.label or urlsplit(target.url).netloc,
        "url": target.url,
        "started_at": started,
        "workload": workload.describe(),
        "settings": {
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "requests": args.requests,
            "max_outstanding": args.max_outstanding,
            "timeout_s": args.timeout,
            "seed": args.seed,
        },
        "client": {"python": platform.python_version(), "machine": platform.machine()},
        "runs": [s.to_dict() for s in summaries],
    }


async def _sweep(
    args: argparse.Namespace, workload: workloads.Workload, target: Target, summaries: list[Summary]
) -> None:
    status, head = await preflight(target, workload)
    if not 200 <= status < 300:
        text = head.decode("utf-8", "replace")
        print(f"sluiceway bench: warning: first request got HTTP {status}: {text}", file=sys.stderr)
    progress = None if args.no_progress else sys.stderr
    if args.rate:
        for rate in args.rate:
            run = await run_open(
                target,
                workload,
                rate,
                duration=args.duration,
                warmup=args.warmup,
                max_outstanding=args.max_outstanding,
                seed=args.seed,
                progress=progress,
            )
            _finished(summarize(run), summaries, progress)
    else:
        for level in args.concurrency:
            run = await run_closed(
                target,
                workload,
                level,
                duration=args.duration,
                warmup=args.warmup,
                requests=args.requests,
                progress=progress,
            )
            _finished(summarize(run), summaries, progress)


def _finished(summary: Summary, summaries: list[Summary], progress: TextIO | None) -> None:
    summaries.append(summary)
    if progress is not None:
        progress.write(format_brief(summary) + "\n")
        progress.flush()
    if (warning := sample_warning(summary)) is not None:
        print(f"sluiceway bench: warning: {warning}", file=sys.stderr)


def _write_outputs(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    if args.json_path:
        Path(args.json_path).write_bytes(msgspec.json.format(msgspec.json.encode(doc)) + b"\n")
    if args.plot_path:
        from sluiceway.bench.plot import plot_results

        plot_results([doc], args.plot_path, title=doc["workload"]["name"])


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse before the run, not after it, when the results could not be written."""
    for path in (args.json_path, args.plot_path):
        if path and not Path(path).resolve().parent.is_dir():
            raise InvalidRequest(f"no such directory for {path}")
    if args.plot_path and importlib.util.find_spec("matplotlib") is None:
        raise InvalidRequest("--plot needs matplotlib: pip install 'sluiceway[bench]'")


def run_command(args: argparse.Namespace) -> int:
    """Run one bench sweep; the ``func`` of the embeddings/chat/completions sub-commands."""
    try:
        _check_outputs(args)
        workload = build_workload(args)
    except InvalidRequest as exc:
        print(f"sluiceway bench: {exc.message}", file=sys.stderr)
        return 2
    headers = dict(args.header)
    if args.api_key:
        headers["Authorization"] = f"Bearer {args.api_key}"
    target = Target(endpoint_url(args.url, workload.path), headers, args.timeout)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    summaries: list[Summary] = []
    code = 0
    try:
        _run_loop(_sweep(args, workload, target, summaries))
    except Unavailable as exc:
        print(f"sluiceway bench: {exc.message}", file=sys.stderr)
        return 1
    except InvalidRequest as exc:
        print(f"sluiceway bench: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nsluiceway bench: interrupted", file=sys.stderr)
        code = 130
    print(f"{workload.name} -> {target.url}")
    print(format_table(summaries))
    _write_outputs(args, _document(args, workload, target, started, summaries))
    return code


def plot_command(args: argparse.Namespace) -> int:
    """``sluiceway bench plot``: several result files, one PNG."""
    from sluiceway.bench.plot import load_results, plot_results

    try:
        docs = load_results(args.results)
    except (OSError, msgspec.DecodeError, InvalidRequest) as exc:
        print(f"sluiceway bench plot: {exc}", file=sys.stderr)
        return 2
    plot_results(docs, args.out, title=args.title)
    return 0


def _run_loop(coro: Any) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a core dependency
        asyncio.run(coro)
    else:
        uvloop.run(coro)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m sluiceway.bench`` (same arguments as ``sluiceway bench``)."""
    parser = argparse.ArgumentParser(prog="sluiceway")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["bench", *(sys.argv[1:] if argv is None else argv)])
    code: int = args.func(args)
    return code
