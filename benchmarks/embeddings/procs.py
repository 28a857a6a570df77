"""Memory and CPU of a process tree, read from ``/proc`` (no psutil).

:class:`TreeSampler` follows a root process and all its descendants (gunicorn's workers,
uvicorn's reloader-free worker, Infinity's helpers) every ``interval`` seconds on a thread it
owns and joins, and keeps the peak of the tree's summed RSS and PSS. RSS counts a page shared
by two processes twice (a forked gunicorn worker shares its parent's import-time pages); PSS
splits it between them, so both are reported.
"""

from __future__ import annotations

import datetime
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (every thread's ``children`` file); [] once it is gone."""
    kids: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return kids
    for task in tasks:
        try:
            kids += [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            continue
    return kids


def tree(root: int) -> list[int]:
    """``root`` and all its live descendants."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if Path(f"/proc/{pid}").exists():
            out.append(pid)
            todo += children(pid)
    return out


def rss_bytes(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def pss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process (threads included), seconds."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14, 15)


def tree_cpu_by_pid(root: int) -> dict[int, float]:
    return {pid: cpu_seconds(pid) for pid in tree(root)}


def cpu_since(root: int, before: dict[int, float]) -> float:
    """CPU seconds ``root``'s tree used since ``before`` (a :func:`tree_cpu_by_pid`).

    A process that appeared since counts from zero; one that exited since (a gunicorn
    worker killed and replaced) is missing its last stretch: a lower bound, never negative.
    """
    now = tree_cpu_by_pid(root)
    return sum(max(0.0, cpu - before.get(pid, 0.0)) for pid, cpu in now.items())


@dataclass(slots=True)
class TreeSampler:
    """Peak summed RSS/PSS of ``root``'s process tree, sampled every ``interval`` seconds.

    Use as a context manager; the sampling thread is joined on exit.
    """

    root: int
    interval: float = 0.2
    peak_rss: int = 0
    peak_pss: int = 0
    last_rss: int = 0
    samples: int = 0
    max_processes: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> None:
        pids = tree(self.root)
        rss = sum(rss_bytes(p) for p in pids)
        pss = sum(pss_bytes(p) for p in pids)
        self.last_rss = rss
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_pss = max(self.peak_pss, pss)
        self.max_processes = max(self.max_processes, len(pids))
        self.samples += 1

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> TreeSampler:
        self._thread = threading.Thread(target=self._loop, name=f"rss-{self.root}")
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def statistics(self) -> dict[str, float | int]:
        return {
            "peak_rss_mib": round(self.peak_rss / MIB, 1),
            "peak_pss_mib": round(self.peak_pss / MIB, 1),
            "last_rss_mib": round(self.last_rss / MIB, 1),
            "samples": self.samples,
            "max_processes": self.max_processes,
        }

    def __repr__(self) -> str:
        return f"TreeSampler(root={self.root}, {self.statistics()})"


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent not idle since boot (``/proc/stat``; steal counts as busy:
    the hypervisor gave the time to someone else)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq + steal) / TICKS


def now() -> str:
    """UTC wall-clock time, ISO 8601 to the second."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def load_avg() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


class CpuMeter:
    """CPU used while a level runs, in % of one core: the server's process tree, this process
    (the load generator) and everything else on the machine (other users: contention)."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._server = tree_cpu_by_pid(pid)
        self._client = time.process_time()
        self._busy = machine_busy_seconds()
        self._wall = time.perf_counter()

    def read(self) -> dict[str, float]:
        wall = time.perf_counter() - self._wall
        server = cpu_since(self._pid, self._server)
        client = time.process_time() - self._client
        others = max(0.0, machine_busy_seconds() - self._busy - server - client)
        others = min(others, wall * (os.cpu_count() or 1))  # server CPU is a lower bound
        return {
            "server_cpu_pct": round(100 * server / wall, 1),
            "client_cpu_pct": round(100 * client / wall, 1),
            "others_cpu_pct": round(100 * others / wall, 1),
        }
