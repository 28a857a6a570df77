"""Hot reload of upstream pools from the config file.

The watcher follows the file's directory (editors and Kubernetes ConfigMaps replace files by
rename), and on a change whose content differs from the last applied one::

    load_settings(file)          # parse + validate everything; any error → reject whole
    plans = [pool.prepare(new)]  # build every new snapshot first (may also reject)
    for plan: pool.apply(plan)   # then swap each pool's reference — nothing half-applied

What is applied: the backends of every upstream model (add, remove, weights, labels), its
policy, load factor and the health/breaker knobs. Backends whose URL stays keep their state
and connections; requests in flight finish on the backend they started on. Not applied live
(logged, needs a restart): new or removed models, renamed aliases, [server] settings, and the
session knobs (connection limits, timeouts, buffer size).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from pathlib import Path

import watchfiles

from sluiceway.config.loader import ConfigError, load_settings
from sluiceway.config.settings import Settings
from sluiceway.config.upstream import UpstreamModelSettings
from sluiceway.observability.metrics import Metrics
from sluiceway.providers.registry import Registry
from sluiceway.providers.upstream import Upstream
from sluiceway.upstream.pool import PoolSnapshot

log = logging.getLogger(__name__)


def apply_settings(registry: Registry, settings: Settings) -> list[str]:
    """Apply the upstream pools of ``settings`` to ``registry``, all or nothing.

    Returns the ids of the pools that were swapped; raises ``ValueError`` (nothing applied).
    """
    plans: list[tuple[Upstream, PoolSnapshot]] = []
    for model in settings.models:
        if not isinstance(model, UpstreamModelSettings):
            continue
        upstream = registry.upstream(model.id)
        if upstream is None:
            log.warning("reload: new upstream model %r needs a restart; skipped", model.id)
            continue
        plans.append((upstream, upstream.prepare(model)))
    for upstream, snapshot in plans:
        upstream.apply(snapshot)
    return [snapshot.settings.id for _, snapshot in plans]


class ConfigWatcher:
    """Watches one config file and hot-reloads the registry's upstream pools."""

    def __init__(
        self,
        path: str | Path,
        registry: Callable[[], Registry],
        metrics: Metrics,
        *,
        debounce_ms: int = 200,
    ) -> None:
        self.path = Path(path).resolve()
        self._registry = registry
        self._m_reloads = metrics.reloads
        self._debounce_ms = debounce_ms
        self._digest = self._read_digest()
        self.applied = 0
        self.rejected = 0

    def _read_digest(self) -> bytes:
        try:
            return hashlib.sha256(self.path.read_bytes()).digest()
        except OSError:
            return b""

    async def run(self) -> None:
        """Watch until cancelled. A broken watcher logs and stops; it never takes the gateway
        down with it."""
        try:
            async for _ in watchfiles.awatch(
                self.path.parent, debounce=self._debounce_ms, step=50, recursive=False
            ):
                digest = await asyncio.to_thread(self._read_digest)
                if digest and digest != self._digest:
                    self._digest = digest
                    await self.reload()
        except Exception:
            log.exception("config watcher for %s stopped; hot reload is off", self.path)

    async def reload(self) -> bool:
        """Load, validate and apply the file now; returns whether it was applied."""
        try:
            settings = await asyncio.to_thread(load_settings, self.path)
            swapped = apply_settings(self._registry(), settings)
        except (ConfigError, ValueError) as e:
            self.rejected += 1
            self._m_reloads.labels("rejected").inc()
            log.error("config reload of %s rejected, nothing changed: %s", self.path, e)
            return False
        self.applied += 1
        self._m_reloads.labels("applied").inc()
        log.info("config reloaded from %s: pools %s", self.path, swapped)
        return True

    def __repr__(self) -> str:
        return f"ConfigWatcher({str(self.path)!r}, applied={self.applied})"
