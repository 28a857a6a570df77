"""Router overhead: added latency at concurrency 1 and the most requests/s of one process.

The backend is a fixed-answer nginx (one worker, ``nginx-static.conf.template``): a small chat
completion on one port, a 64-chunk SSE stream on another, so the router is the bottleneck.
Load comes from ``wrk`` (C, one thread), because a Python client would saturate before a fast
router does. Nothing is pinned to a CPU: on this shared 2-core machine pinning made a router
wait behind other work on its core (3 ms at concurrency 1 instead of 60 µs). nginx runs one
worker and sluiceway one process; sglang-router's runtime may use both cores.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec
from contenders import HERE, NGINX, Contender, log, process, router, wait_ready

SMALL_REQUEST = msgspec.json.encode(
    {"model": "sim", "messages": [{"role": "user", "content": "Hello there."}], "max_tokens": 8}
)
STREAM_REQUEST = msgspec.json.encode(
    {
        "model": "sim",
        "messages": [{"role": "user", "content": "Hello there."}],
        "max_tokens": 64,
        "stream": True,
    }
)
SMALL_RESPONSE = msgspec.json.encode(
    {
        "id": "chatcmpl-static",
        "object": "chat.completion",
        "created": 0,
        "model": "sim",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello! How can I help?"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16},
    }
).decode()


def _sse_body(chunks: int = 64) -> str:
    events = []
    for i in range(chunks):
        doc = {
            "id": "chatcmpl-static",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "sim",
            "choices": [{"index": 0, "delta": {"content": f" w{i}"}, "finish_reason": None}],
        }
        events.append("data: " + msgspec.json.encode(doc).decode() + "\n\n")
    events.append("data: [DONE]\n\n")
    return "".join(events)


@dataclass(frozen=True, slots=True)
class WrkResult:
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int

    def to_dict(self) -> dict[str, float | int]:
        return {
            "rps": self.rps,
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "requests": self.requests,
            "errors": self.errors,
        }


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if not m:
        return float("nan")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_wrk(output: str) -> WrkResult:
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))  # type: ignore[union-attr]
    requests = int(re.search(r"(\d+) requests in", output).group(1))  # type: ignore[union-attr]
    pct = dict(re.findall(r"^\s+(50|99)(?:\.000)?%\s+(\S+)", output, re.M))
    errors = 0
    if m := re.search(r"Non-2xx or 3xx responses: (\d+)", output):
        errors += int(m.group(1))
    if m := re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    ):
        errors += sum(int(g) for g in m.groups())
    return WrkResult(rps, _ms(pct.get("50", "")), _ms(pct.get("99", "")), requests, errors)


def _script(workdir: Path, body: bytes) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    script = workdir / "post.lua"
    lua_body = body.decode().replace("\\", "\\\\").replace("'", "\\'")
    script.write_text(
        "wrk.method = 'POST'\n"
        f"wrk.body = '{lua_body}'\n"
        "wrk.headers['Content-Type'] = 'application/json'\n"
    )
    return script


async def wrk(url: str, body: bytes, connections: int, seconds: float, workdir: Path) -> WrkResult:
    script = _script(workdir, body)
    argv = ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "--latency", "-s", str(script),
            url]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    text = out.decode(errors="replace")
    (workdir / "wrk.log").open("a").write(f"$ {' '.join(argv)}\n{text}\n")
    return parse_wrk(text)


def _have_tools() -> bool:
    return shutil.which("wrk") is not None and Path(NGINX).exists()


def _static_config(workdir: Path, json_port: int, sse_port: int) -> Path:
    text = (HERE / "nginx-static.conf.template").read_text()
    for key, value in {
        "@@DIR@@": str(workdir),
        "@@JSON_PORT@@": str(json_port),
        "@@SSE_PORT@@": str(sse_port),
        "@@JSON_BODY@@": SMALL_RESPONSE,
    }.items():
        text = text.replace(key, value)
    (workdir / "sse.txt").write_text(_sse_body())
    conf = workdir / "nginx-static.conf"
    conf.write_text(text)
    return conf


async def overhead_benchmark(
    contenders: Sequence[Contender],
    workdir: Path,
    *,
    base_port: int,
    seconds: float,
    connections: int,
) -> list[dict[str, object]]:
    """One row per (contender or direct, response kind)."""
    if not _have_tools():
        log("overhead: wrk or nginx missing (run benchmarks/upstream/setup_peers.sh); skipped")
        return []
    static_dir = workdir / "static"
    static_dir.mkdir(parents=True, exist_ok=True)
    json_port, sse_port, router_port = base_port, base_port + 1, base_port + 2
    conf = _static_config(static_dir, json_port, sse_port)
    rows: list[dict[str, object]] = []
    argv = [NGINX, "-c", str(conf), "-p", str(static_dir)]
    async with process(argv, static_dir / "nginx.log") as proc:
        for kind, port, body in (
            ("small JSON", json_port, SMALL_REQUEST),
            ("64-chunk SSE", sse_port, STREAM_REQUEST),
        ):
            backend = f"http://127.0.0.1:{port}"
            await wait_ready(backend + "/v1/chat/completions", proc, body=body)
            direct = Contender("direct (no router)", "direct", "-")
            for contender in (direct, *contenders):
                if reason := contender.available():
                    log(f"overhead: {contender.label}: skipped, {reason}")
                    continue
                where = workdir / f"overhead-{contender.kind}-{contender.policy}-{port}"
                log(f"overhead: {kind} via {contender.label}")
                async with router(
                    contender, router_port, [backend], where, model="sim", probe=body
                ) as url:
                    target = url + "/v1/chat/completions"
                    await wrk(target, body, connections, 2, where)  # warm-up, not recorded
                    c1 = await wrk(target, body, 1, seconds, where)
                    top = await wrk(target, body, connections, seconds, where)
                rows.append(
                    {
                        "response": kind,
                        "contender": contender.label,
                        "c1": c1.to_dict(),
                        f"c{connections}": top.to_dict(),
                        "connections": connections,
                    }
                )
    return rows
