"""The backends of one upstream model as an immutable snapshot, swapped as one reference.

A :class:`PoolSnapshot` is the backends (in config order), their consistent-hash ring and the
settings. Hot reload and the admin API build a new snapshot — reusing the :class:`Backend` of
every URL that stays, so its in-flight count, health, breaker and connections survive — and
:meth:`Pool.swap` replaces the reference. New requests see the new snapshot at once; requests
in flight keep the Backend they hold.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from msgspec import structs

from sluiceway.config.upstream import BackendSettings, UpstreamModelSettings
from sluiceway.observability.metrics import Metrics
from sluiceway.routing.hotness import KeyRates
from sluiceway.routing.ring import HashRing
from sluiceway.routing.selector import Choice, Selector
from sluiceway.upstream.backend import Backend


@dataclass(frozen=True, slots=True)
class PoolSnapshot:
    """Immutable view of a pool: the backends, their ring and the settings."""

    settings: UpstreamModelSettings
    backends: tuple[Backend, ...]
    ring: HashRing
    by_url: dict[str, int] = field(default_factory=dict)

    def ranked(self, key: int | None) -> tuple[int, ...] | None:
        return None if key is None else self.ring.ranked(key)


def build_snapshot(
    settings: UpstreamModelSettings,
    metrics: Metrics,
    current: Sequence[Backend] = (),
    model: str | None = None,
) -> PoolSnapshot:
    """A new snapshot, reusing (and reconfiguring) the Backend of every URL in ``current``."""
    keep = {b.url: b for b in current}
    mid = model or settings.id
    backends: list[Backend] = []
    for bs in settings.backends:
        b = keep.get(bs.base)
        if b is None:
            b = Backend(bs, mid, settings.health, settings.breaker, metrics)
        else:
            b.reconfigure(bs, settings.health, settings.breaker)
        backends.append(b)
    ring = HashRing([(b.url, b.weight) for b in backends], settings.virtual_nodes)
    return PoolSnapshot(settings, tuple(backends), ring, {b.url: i for i, b in enumerate(backends)})


class Pool:
    """The current snapshot of one upstream model plus its selector."""

    def __init__(
        self,
        settings: UpstreamModelSettings,
        metrics: Metrics,
        rng: random.Random | None = None,
    ) -> None:
        self._metrics = metrics
        self.model = settings.id
        self.snapshot = build_snapshot(settings, metrics)
        self.selector = Selector(settings.policy, settings.load_factor, rng)
        self.rates = KeyRates()
        self._m_available = metrics.pool_available.labels(self.model)

    @property
    def settings(self) -> UpstreamModelSettings:
        return self.snapshot.settings

    def prepare(self, settings: UpstreamModelSettings) -> PoolSnapshot:
        """Build (validate) a snapshot for ``settings`` without applying it."""
        if settings.id != self.model:
            raise ValueError(f"pool {self.model!r} cannot become {settings.id!r}")
        return build_snapshot(settings, self._metrics, self.snapshot.backends, self.model)

    def swap(self, snapshot: PoolSnapshot) -> list[Backend]:
        """Make ``snapshot`` current; returns the backends that left the pool."""
        old = self.snapshot
        self.snapshot = snapshot
        self.selector = Selector(
            snapshot.settings.policy, snapshot.settings.load_factor, self.selector.rng
        )
        gone = [b for b in old.backends if b.url not in snapshot.by_url]
        for b in gone:
            b.forget(self._metrics)
        return gone

    def select(
        self,
        snapshot: PoolSnapshot,
        key: int | None,
        now: float,
        exclude: set[int],
        hot: bool = False,
    ) -> Choice | None:
        return self.selector.select(snapshot.backends, snapshot.ranked(key), now, exclude, hot)

    def is_hot(self, key: int | None, now: float) -> bool:
        """Count a request for ``key``; True if the key alone exceeds one backend's share."""
        if key is None:
            return False
        return self.rates.hit(key, now) * len(self.snapshot.backends) > 1.0

    # --- admin -----------------------------------------------------------------------------

    def with_backend(self, backend: BackendSettings) -> PoolSnapshot:
        s = self.settings
        if backend.base in self.snapshot.by_url:
            raise ValueError(f"backend {backend.base} is already in pool {self.model!r}")
        return self.prepare(structs.replace(s, backends=(*s.backends, backend)))

    def without_backend(self, url: str) -> PoolSnapshot:
        s = self.settings
        url = url.rstrip("/")
        if url not in self.snapshot.by_url:
            raise KeyError(url)
        rest = tuple(b for b in s.backends if b.base != url)
        if not rest:
            raise ValueError(f"cannot remove the last backend of pool {self.model!r}")
        return self.prepare(structs.replace(s, backends=rest))

    def find(self, url: str) -> Backend | None:
        i = self.snapshot.by_url.get(url.rstrip("/"))
        return None if i is None else self.snapshot.backends[i]

    def refresh(self, now: float) -> int:
        """Update the gauges; returns the number of available backends."""
        n = 0
        for b in self.snapshot.backends:
            b.refresh(now)
            n += b.available(now)
        self._m_available.set(n)
        return n

    def statistics(self, now: float) -> dict[str, object]:
        s = self.settings
        return {
            "model": self.model,
            "policy": s.policy,
            "load_factor": s.load_factor,
            "backends": [b.statistics(now) for b in self.snapshot.backends],
        }

    def __repr__(self) -> str:
        return f"Pool({self.model!r}, {list(self.snapshot.backends)})"
