"""The ``bench`` command line: argument handling in-process, a full run as a subprocess."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import msgspec
import pytest

import sluiceway
from sluiceway.bench import cli

if TYPE_CHECKING:
    from conftest import BenchServer

# The package's source root, so a subprocess imports the same code.
SRC = str(Path(sluiceway.__file__).resolve().parents[1])
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://h:1", "http://h:1/v1/embeddings"),
        ("http://h:1/", "http://h:1/v1/embeddings"),
        ("http://h:1/v1", "http://h:1/v1/embeddings"),
        ("http://h:1/proxy/v1/", "http://h:1/proxy/v1/embeddings"),
        ("http://h:1/custom/embed", "http://h:1/custom/embed"),
    ],
)
def test_endpoint_url(url: str, expected: str) -> None:
    assert cli.endpoint_url(url, "/v1/embeddings") == expected


def test_register_adds_bench_with_a_func() -> None:
    parser = argparse.ArgumentParser(prog="sluiceway")
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "bench",
            "embeddings",
            "--model",
            "m",
            "--concurrency",
            "1,8",
            "--inputs",
            "long",
            "--texts-per-request",
            "32",
        ]
    )
    assert args.func is cli.run_command
    assert args.concurrency == [1, 8]
    assert args.rate is None
    wl = cli.build_workload(args)
    assert wl.items_per_request == 32
    chat = parser.parse_args(["bench", "chat", "--model", "m", "--stream", "--max-tokens", "9"])
    assert cli.build_workload(chat).stream
    plot = parser.parse_args(["bench", "plot", "a.json", "--out", "x.png"])
    assert plot.func is cli.plot_command
    bare = parser.parse_args(["bench"])
    assert bare.func(bare) == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["embeddings"],  # --model is required
        ["embeddings", "--model", "m", "--concurrency", "0"],
        ["embeddings", "--model", "m", "--rate", "fast"],
        ["embeddings", "--model", "m", "--inputs", "huge"],
        ["embeddings", "--model", "m", "--header", "no-colon"],
        ["embeddings", "--model", "m", "--concurrency", "1.5"],
        ["embeddings", "--model", "m", "--duration", "0"],
        ["embeddings", "--model", "m", "--duration", "1,2"],
        ["embeddings", "--model", "m", "--warmup", "-1"],
        ["embeddings", "--model", "m", "--requests", "0"],
        ["embeddings", "--model", "m", "--timeout", "nan"],
    ],
)
def test_bad_arguments_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2


def test_invalid_workload_returns_2() -> None:
    assert cli.main(["chat", "--model", "m", "--prompt-tokens", "1"]) == 2


def test_unwritable_output_returns_2_before_running(tmp_path: Path) -> None:
    # the URL is never contacted: the bad path is refused first
    missing = str(tmp_path / "no" / "out.json")
    assert cli.main(["embeddings", "--model", "m", "--json", missing]) == 2


def test_unreachable_url_returns_1(closed_port: int, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["embeddings", "--model", "m", "--url", f"http://127.0.0.1:{closed_port}"])
    assert code == 1
    assert "cannot reach" in capsys.readouterr().err


def test_plot_of_a_missing_file_returns_2(tmp_path: Path) -> None:
    assert cli.main(["plot", str(tmp_path / "nope.json"), "--out", str(tmp_path / "x.png")]) == 2


@pytest.mark.anyio
async def test_full_run_writes_json(server: BenchServer, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    result = await anyio.run_process(
        [
            sys.executable,
            "-m",
            "sluiceway.bench",
            "embeddings",
            "--url",
            server.url,
            "--model",
            "m",
            "--concurrency",
            "1,2",
            "--requests",
            "20",
            "--warmup",
            "0",
            "--label",
            "test",
            "--json",
            str(out),
            "--no-progress",
        ],
        env=ENV,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()
    table = result.stdout.decode()
    assert "c=1" in table and "c=2" in table
    doc = msgspec.json.decode(out.read_bytes())
    assert doc["schema"] == cli.SCHEMA
    assert doc["label"] == "test"
    assert doc["workload"]["path"] == "/v1/embeddings"
    assert [r["load"] for r in doc["runs"]] == [1.0, 2.0]
    assert all(r["requests"] == 20 and r["ok"] == 20 for r in doc["runs"])
    assert "c=1 has only 20 successful requests" in result.stderr.decode()


@pytest.mark.anyio
async def test_server_errors_still_exit_0(server: BenchServer, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    result = await anyio.run_process(
        [
            sys.executable,
            "-m",
            "sluiceway.bench",
            "embeddings",
            "--url",
            server.url + "/flaky",
            "--model",
            "m",
            "--concurrency",
            "1",
            "--requests",
            "9",
            "--warmup",
            "0",
            "--json",
            str(out),
            "--no-progress",
        ],
        env=ENV,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()
    run = msgspec.json.decode(out.read_bytes())["runs"][0]
    # the preflight request was the 1st; so the 3rd, 6th and 9th measured ones fail
    assert run["error_kinds"] == {"http_503": 3}
    assert "http_503=3" in result.stdout.decode()


@pytest.mark.anyio
async def test_wrong_path_warns_and_still_exits_0(server: BenchServer) -> None:
    result = await anyio.run_process(
        [
            sys.executable,
            "-m",
            "sluiceway.bench",
            "embeddings",
            "--url",
            server.url + "/nowhere",
            "--model",
            "m",
            "--concurrency",
            "1",
            "--requests",
            "3",
            "--warmup",
            "0",
            "--no-progress",
        ],
        env=ENV,
        check=False,
    )
    assert result.returncode == 0
    assert "warning: first request got HTTP 404" in result.stderr.decode()
    assert "http_404=3" in result.stdout.decode()
