"""Upstream pools. Placeholder seam: the upstream provider lands here."""

from __future__ import annotations

from typing import Protocol

from sluiceway.config.upstream import UpstreamModelSettings
from sluiceway.providers.base import Service, ServiceContext


class Upstream(Protocol):
    """A pool of OpenAI-compatible backends serving one model."""


class UpstreamService(Service, Upstream, Protocol):
    """A served upstream pool."""


def build_upstream(settings: UpstreamModelSettings, ctx: ServiceContext) -> UpstreamService:
    raise NotImplementedError("upstream pools are not built yet")
