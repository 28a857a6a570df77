"""Start and stop the contenders (and the backends) of the upstream benchmark as subprocesses.

Every process listens on 127.0.0.1 only, writes its log under the run's work directory, and is
stopped with SIGTERM (SIGKILL after a grace period) when its ``async with`` block ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
SGLANG_ROUTER = Path(os.environ.get("SGLANG_VENV", ROOT / ".bench" / "sglang")) / "bin"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


@dataclass(frozen=True, slots=True)
class Contender:
    """A router under test: ``kind`` is sluiceway, nginx, sglang or direct (no router)."""

    label: str
    kind: str
    policy: str
    #: Extra keys of sluiceway's [[models]] table (e.g. load_factor), for tuning runs.
    options: tuple[tuple[str, str], ...] = ()

    def available(self) -> str | None:
        """None when it can run here, else why not."""
        if self.kind == "nginx" and not Path(NGINX).exists():
            return "nginx not installed (run benchmarks/upstream/setup_peers.sh)"
        if self.kind == "sglang" and not (SGLANG_ROUTER / "sglang-router").exists():
            return "sglang-router venv missing (run benchmarks/upstream/setup_peers.sh)"
        return None


POLICY_CONTENDERS = (
    Contender("sluiceway prefix_affinity", "sluiceway", "prefix_affinity"),
    Contender("sluiceway least_connections", "sluiceway", "least_connections"),
    Contender("nginx least_conn", "nginx", "least_conn"),
    Contender("sglang-router cache_aware", "sglang", "cache_aware"),
    Contender("sglang-router round_robin", "sglang", "round_robin"),
)
#: Not run by default; select with --contenders (tuning the bounded-load factor).
EXTRA_CONTENDERS = (
    Contender(
        "sluiceway prefix_affinity lf=2", "sluiceway", "prefix_affinity", (("load_factor", "2.0"),)
    ),
    Contender(
        "sluiceway prefix_affinity lf=1.5",
        "sluiceway",
        "prefix_affinity",
        (("load_factor", "1.5"),),
    ),
)
OVERHEAD_CONTENDERS = (
    Contender("sluiceway prefix_affinity", "sluiceway", "prefix_affinity"),
    Contender("nginx least_conn", "nginx", "least_conn"),
    Contender("sglang-router cache_aware", "sglang", "cache_aware"),
)


def _sluiceway_config(
    model: str, policy: str, backends: Sequence[str], options: Sequence[tuple[str, str]] = ()
) -> str:
    lines = [
        "[server]",
        'log_level = "warning"',
        "watch_config = false",
        "request_timeout_s = 600.0",
        "",
        "[[models]]",
        'engine = "upstream"',
        f'id = "{model}"',
        f'policy = "{policy}"',
        *(f"{key} = {value}" for key, value in options),
        "backends = [" + ", ".join(f'{{url = "{b}"}}' for b in backends) + "]",
    ]
    return "\n".join(lines) + "\n"


def _nginx_config(port: int, policy: str, backends: Sequence[str], workdir: Path) -> str:
    servers = "\n".join(
        f"        server {b.removeprefix('http://')} max_fails=0;" for b in backends
    )
    balance = {"least_conn": "least_conn;", "round_robin": ""}[policy]
    text = (HERE / "nginx.conf.template").read_text()
    for key, value in {
        "@@DIR@@": str(workdir),
        "@@PORT@@": str(port),
        "@@BALANCE@@": balance,
        "@@SERVERS@@": servers,
    }.items():
        text = text.replace(key, value)
    return text


def command(
    contender: Contender, port: int, backends: Sequence[str], workdir: Path, model: str
) -> list[str]:
    """The argv that starts ``contender`` on ``port`` in front of ``backends``."""
    workdir.mkdir(parents=True, exist_ok=True)
    if contender.kind == "sluiceway":
        config = workdir / "sluiceway.toml"
        config.write_text(_sluiceway_config(model, contender.policy, backends, contender.options))
        return [str(VENV_PYTHON), "-m", "sluiceway", "serve", "--config", str(config),
                "--port", str(port)]  # fmt: skip
    if contender.kind == "nginx":
        conf = workdir / "nginx.conf"
        conf.write_text(_nginx_config(port, contender.policy, backends, workdir))
        return [NGINX, "-c", str(conf), "-p", str(workdir)]
    if contender.kind == "sglang":
        return [str(SGLANG_ROUTER / "sglang-router"), "launch", "--host", "127.0.0.1",
                "--port", str(port), "--worker-urls", *backends, "--policy", contender.policy,
                "--log-level", "warn"]  # fmt: skip
    raise ValueError(f"unknown contender kind {contender.kind!r}")


@contextlib.asynccontextmanager
async def process(
    argv: Sequence[str], log: Path, *, cpus: str | None = None
) -> AsyncIterator[asyncio.subprocess.Process]:
    """Run ``argv`` (optionally pinned with taskset) until the block ends."""
    if cpus is not None and shutil.which("taskset"):
        argv = ["taskset", "-c", cpus, *argv]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=out, stderr=out, stdin=asyncio.subprocess.DEVNULL
        )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def free_base_port(span: int) -> int:
    """A random base port with ``span`` free ports after it (other runs may share the machine)."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 60000 - span)
        try:
            for port in range(base, base + span):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free port range found")


def alive(proc: asyncio.subprocess.Process, what: str) -> None:
    """Raise if ``proc`` exited (e.g. its port was taken and another server answered)."""
    if proc.returncode is not None:
        raise RuntimeError(f"{what} exited with {proc.returncode}; see its log")


async def wait_ready(
    url: str,
    proc: asyncio.subprocess.Process,
    *,
    body: bytes | None,
    within: float = 60.0,
    expect: bytes | None = None,
) -> None:
    """Poll until ``url`` answers 200 (POST ``body`` if given, else GET), containing ``expect``.

    The process must still be running afterwards: if it could not bind its port, another
    server may be the one that answered.
    """
    deadline = time.monotonic() + within
    last = "no answer"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        while time.monotonic() < deadline:
            if proc.returncode is not None:
                raise RuntimeError(f"{url}: process exited with {proc.returncode}")
            try:
                request = (
                    session.post(url, data=body, headers={"Content-Type": "application/json"})
                    if body is not None
                    else session.get(url)
                )
                async with request as resp:
                    data = await resp.read()
                    if resp.status == 200 and (expect is None or expect in data):
                        await asyncio.sleep(0.3)
                        alive(proc, url)
                        return
                    last = f"HTTP {resp.status}"
            except (aiohttp.ClientError, TimeoutError) as exc:
                last = type(exc).__name__
            await asyncio.sleep(0.2)
    raise RuntimeError(f"{url} not ready after {within:.0f} s ({last})")


@contextlib.asynccontextmanager
async def router(
    contender: Contender,
    port: int,
    backends: Sequence[str],
    workdir: Path,
    *,
    model: str,
    probe: bytes,
    probe_path: str = "/v1/chat/completions",
    cpus: str | None = None,
) -> AsyncIterator[str]:
    """Start ``contender``; yield its base URL once a probe request succeeds through it."""
    if contender.kind == "direct":
        yield backends[0]
        return
    argv = command(contender, port, backends, workdir, model)
    base = f"http://127.0.0.1:{port}"
    async with process(argv, workdir / f"{contender.kind}.log", cpus=cpus) as proc:
        await wait_ready(base + probe_path, proc, body=probe)
        yield base
        alive(proc, contender.label)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
