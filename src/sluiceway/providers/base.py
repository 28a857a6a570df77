"""The seams between the API edge and the providers.

Each configured model becomes one :class:`Service` (lifecycle) that also implements the task
protocol of its kind: :class:`Embedder`, ``Generator`` (sluiceway.providers.generation) or
``Upstream`` (sluiceway.providers.upstream). The registry keeps one typed map per kind, so the
API edge never dispatches on implementation types.

Lifecycle, driven by the composition root (sluiceway.app)::

    await service.start()        # load the model off the loop, warm up; raise on failure
    tg.create_task(service.run())  # background loops until close()
    ...                          # serve
    await service.drain()        # SIGTERM: resolves once nothing admitted is left
    await service.close()        # fail whatever is left, stop loops, release the engine
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from sluiceway.clock import Clock
from sluiceway.config.settings import ServerSettings
from sluiceway.observability.metrics import Metrics


@dataclass(frozen=True, slots=True)
class ModelCard:
    """One entry of ``GET /v1/models``."""

    id: str
    task: str
    owned_by: str = "sluiceway"
    created: int = 0


@dataclass(frozen=True, slots=True)
class ServiceContext:
    """What every provider gets from the composition root."""

    metrics: Metrics
    clock: Clock
    server: ServerSettings


class Service(Protocol):
    """Lifecycle of one served model."""

    @property
    def names(self) -> tuple[str, ...]: ...

    def cards(self) -> list[ModelCard]: ...

    async def start(self) -> None: ...

    async def run(self) -> None: ...

    async def drain(self) -> None: ...

    async def close(self) -> None: ...

    def statistics(self) -> Mapping[str, object]: ...


@dataclass(frozen=True, slots=True)
class EmbedOptions:
    """Per-request knobs of ``/v1/embeddings`` (already validated by the API edge)."""

    truncate: bool | None = None  # None = the model's default
    truncation_direction: Literal["right", "left"] = "right"
    normalize: bool = True
    dimensions: int | None = None


@dataclass(frozen=True, slots=True)
class EmbedResult:
    """Vectors in input order plus honest accounting."""

    vectors: npt.NDArray[np.float32]  # [n, dims]
    prompt_tokens: int
    truncated: int


class Embedder(Protocol):
    """A model that turns texts (or token-id lists) into vectors."""

    async def embed(
        self, inputs: list[str] | list[list[int]], options: EmbedOptions, deadline: float
    ) -> EmbedResult: ...


class EmbedderService(Service, Embedder, Protocol):
    """A served model that embeds."""
