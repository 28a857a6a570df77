"""Settings → services, registered by kind."""

from __future__ import annotations

from collections.abc import Iterable

from sluiceway.config.llm import LlamaModelSettings
from sluiceway.config.settings import EncoderModelSettings, ModelSettings
from sluiceway.config.upstream import UpstreamModelSettings
from sluiceway.providers.base import ServiceContext
from sluiceway.providers.encoder import EncoderService
from sluiceway.providers.registry import Registry


def build_registry(models: Iterable[ModelSettings], ctx: ServiceContext) -> Registry:
    """One service per configured model (not started yet)."""
    registry = Registry()
    for model in models:
        if isinstance(model, EncoderModelSettings):
            registry.add_embedder(EncoderService(model, ctx))
        elif isinstance(model, LlamaModelSettings):
            from sluiceway.providers.generation import build_generator

            registry.add_generator(build_generator(model, ctx))
        elif isinstance(model, UpstreamModelSettings):
            from sluiceway.providers.upstream import build_upstream

            registry.add_upstream(build_upstream(model, ctx))
    return registry
