"""Model name → provider, one typed map per kind (no dispatch on implementation types)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sluiceway.errors import NotFound
from sluiceway.providers.base import Embedder, EmbedderService, ModelCard, Service

if TYPE_CHECKING:
    from sluiceway.providers.generation import Generator, GeneratorService
    from sluiceway.providers.upstream import Upstream, UpstreamService


class Registry:
    """The served models. Built once by the composition root; hot reload builds a new one."""

    def __init__(self) -> None:
        self.services: list[Service] = []
        self._embedders: dict[str, Embedder] = {}
        self._generators: dict[str, Generator] = {}
        self._upstreams: dict[str, Upstream] = {}
        self._cards: list[ModelCard] = []

    def _add(self, service: Service) -> Iterable[str]:
        self.services.append(service)
        self._cards.extend(service.cards())
        return service.names

    def add_embedder(self, service: EmbedderService) -> None:
        for name in self._add(service):
            self._embedders[name] = service

    def add_generator(self, service: GeneratorService) -> None:
        for name in self._add(service):
            self._generators[name] = service

    def add_upstream(self, service: UpstreamService) -> None:
        for name in self._add(service):
            self._upstreams[name] = service

    def knows(self, name: str) -> bool:
        return name in self._embedders or name in self._generators or name in self._upstreams

    def upstream(self, name: str) -> Upstream | None:
        return self._upstreams.get(name)

    def embedder(self, name: str) -> Embedder:
        svc = self._embedders.get(name)
        if svc is None:
            raise self._not_found(name, "embeddings")
        return svc

    def generator(self, name: str) -> Generator:
        svc = self._generators.get(name)
        if svc is None:
            raise self._not_found(name, "text generation")
        return svc

    def _not_found(self, name: str, task: str) -> NotFound:
        known = {c.id for c in self._cards}
        if name in known:
            return NotFound(
                f"the model {name!r} does not support {task}", param="model", code="model_not_found"
            )
        return NotFound(
            f"the model {name!r} does not exist; GET /v1/models lists the served models",
            param="model",
            code="model_not_found",
        )

    def cards(self) -> list[ModelCard]:
        return list(self._cards)

    def __repr__(self) -> str:
        return f"Registry({[c.id for c in self._cards]})"
