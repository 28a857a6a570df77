"""Local text generation (llama.cpp). Placeholder seam: the generation provider lands here."""

from __future__ import annotations

from typing import Protocol

from sluiceway.config.llm import LlamaModelSettings
from sluiceway.providers.base import Service, ServiceContext


class Generator(Protocol):
    """A model that completes prompts and chats."""


class GeneratorService(Service, Generator, Protocol):
    """A served model that generates text."""


def build_generator(settings: LlamaModelSettings, ctx: ServiceContext) -> GeneratorService:
    raise NotImplementedError("local generation is not built yet")
