from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np
import pytest

from sluiceway.bench import cli
from sluiceway.bench.report import RunResult, summarize

pytest.importorskip("matplotlib")

from sluiceway.bench.plot import load_results, plot_results

PNG = b"\x89PNG\r\n\x1a\n"


def _doc(label: str, mode: str, loads: list[float], scale: float) -> dict[str, object]:
    runs = []
    rng = np.random.default_rng(0)
    for load in loads:
        n = 200
        latency = rng.exponential(scale * load / 1000, n) + 0.001
        run = RunResult(
            mode="closed" if mode == "closed" else "open",
            load=load,
            workload="w",
            items_per_request=1,
            window=1.0,
            start=np.zeros(n),
            latency=latency,
            status=np.full(n, 200, dtype=np.int64),
            nbytes=np.zeros(n, dtype=np.int64),
            ttft=np.full(n, np.nan),
            chunks=np.zeros(n, dtype=np.int64),
        )
        runs.append(summarize(run).to_dict())
    return {"schema": cli.SCHEMA, "label": label, "runs": runs}


def test_plot_several_contenders(tmp_path: Path) -> None:
    out = tmp_path / "plot.png"
    plot_results(
        [_doc("a", "closed", [1, 4, 16, 64], 1.0), _doc("b", "closed", [1, 4, 16], 2.0)],
        out,
        title="t",
    )
    assert out.read_bytes()[:8] == PNG


def test_plot_command_reads_result_files(tmp_path: Path) -> None:
    files = []
    for name, mode in (("a", "open"), ("b", "closed")):
        path = tmp_path / f"{name}.json"
        path.write_bytes(msgspec.json.encode(_doc(name, mode, [10, 20], 1.0)))
        files.append(str(path))
    assert len(load_results(files)) == 2
    out = tmp_path / "both.png"
    assert cli.main(["plot", *files, "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG


def test_not_a_result_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(b'{"hello": 1}')
    assert cli.main(["plot", str(path), "--out", str(tmp_path / "x.png")]) == 2


def test_levels_without_successes_plot_as_gaps(tmp_path: Path) -> None:
    doc = _doc("a", "closed", [1, 2], 1.0)
    failed = RunResult(
        mode="closed",
        load=4.0,
        workload="w",
        items_per_request=1,
        window=1.0,
        start=np.zeros(1),
        latency=np.ones(1),
        status=np.full(1, 503),
        nbytes=np.zeros(1, dtype=np.int64),
        ttft=np.full(1, np.nan),
        chunks=np.zeros(1, dtype=np.int64),
    )
    doc["runs"].append(summarize(failed).to_dict())  # type: ignore[attr-defined]
    decoded = msgspec.json.decode(msgspec.json.encode(doc))
    assert decoded["runs"][-1]["latency_ms"]["p99"] is None
    out = tmp_path / "gaps.png"
    plot_results([decoded], out)
    assert out.read_bytes()[:8] == PNG
