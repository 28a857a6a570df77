"""Time as a dependency: every timeout and deadline reads a :class:`Clock`."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Monotonic seconds. Implementations: ``SystemClock``, ``sluiceway.testing.ManualClock``."""

    def now(self) -> float: ...


class SystemClock:
    """The process's monotonic clock."""

    __slots__ = ()

    def now(self) -> float:
        return time.monotonic()

    def __repr__(self) -> str:
        return "SystemClock()"
