"""Settings of an upstream pool (a model served by remote OpenAI-compatible backends)."""

from __future__ import annotations

from typing import Literal

import msgspec


class BackendSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One backend of a pool."""

    url: str
    weight: int = 1
    labels: dict[str, str] = msgspec.field(default_factory=dict)


class HealthSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Active probes: TCP connect + HTTP GET ``path``."""

    path: str = "/health"
    interval_s: float = 1.0
    timeout_s: float = 1.0
    unhealthy_threshold: int = 2
    healthy_threshold: int = 2


class BreakerSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Per-backend circuit breaker fed by passive signals."""

    failure_threshold: int = 5
    open_s: float = 10.0
    half_open_trials: int = 2


class UpstreamModelSettings(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="engine", tag="upstream"
):
    """A model served by a pool of OpenAI-compatible backends."""

    id: str
    backends: tuple[BackendSettings, ...]
    aliases: tuple[str, ...] = ()
    #: Model name sent upstream (None = the requested name).
    upstream_model: str | None = None
    policy: Literal["prefix_affinity", "least_connections", "round_robin", "random"] = (
        "prefix_affinity"
    )
    #: Bounded load: affinity skips a backend above load_factor x the pool's mean in-flight.
    load_factor: float = 1.25
    #: Completions: characters of the prompt that make the routing key.
    prefix_chars: int = 1024
    #: A request header that, when present, is the routing key.
    session_header: str = "X-Session-Id"
    virtual_nodes: int = 160
    max_attempts: int = 3
    connect_timeout_s: float = 2.0
    read_timeout_s: float = 600.0
    max_connections_per_backend: int = 256
    keepalive_s: float = 60.0
    #: Per-stream buffer (chunks) between the upstream read and the client write.
    stream_buffer_chunks: int = 16
    health: HealthSettings = HealthSettings()
    breaker: BreakerSettings = BreakerSettings()
