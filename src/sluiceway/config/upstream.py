"""Settings of an upstream pool (a model served by remote OpenAI-compatible backends).

A pool in the config file::

    [[models]]
    engine = "upstream"
    id = "llama-3-8b"
    policy = "prefix_affinity"        # prefix_affinity | least_connections | round_robin | random
    backends = [
        { url = "http://10.0.0.1:8000", weight = 2 },
        { url = "http://10.0.0.2:8000", labels = { zone = "b" } },
    ]
    [models.health]
    interval_s = 1.0

Invalid values (no backends, a duplicate URL, weight < 1, ...) fail the whole load, so a hot
reload of a bad file is rejected before anything is swapped.
"""

from __future__ import annotations

from typing import Literal

import msgspec


class BackendSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One backend of a pool: its base URL (``/v1/...`` is appended), weight and labels."""

    url: str
    weight: int = 1
    labels: dict[str, str] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"backend url {self.url!r} must start with http:// or https://")
        if self.weight < 1:
            raise ValueError(f"backend {self.url!r}: weight must be >= 1")

    @property
    def base(self) -> str:
        """The URL without a trailing slash (the identity of a backend)."""
        return self.url.rstrip("/")


class HealthSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Active probes: TCP connect + HTTP GET ``path`` (any 2xx is healthy).

    Defaults eject a dead backend after 2 failed probes (~2-3 s) and readmit a recovered one
    after 2 good probes (~2 s).
    """

    path: str = "/health"
    interval_s: float = 1.0
    timeout_s: float = 1.0
    unhealthy_threshold: int = 2
    healthy_threshold: int = 2
    enabled: bool = True

    def __post_init__(self) -> None:
        if self.interval_s <= 0 or self.timeout_s <= 0:
            raise ValueError("health interval_s and timeout_s must be > 0")
        if self.unhealthy_threshold < 1 or self.healthy_threshold < 1:
            raise ValueError("health thresholds must be >= 1")


class BreakerSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Per-backend circuit breaker fed by passive signals (closed → open → half-open)."""

    #: Consecutive failures (connect error, timeout, 5xx, out-of-memory) that open the breaker.
    failure_threshold: int = 5
    #: How long the breaker stays open before letting trial requests through.
    open_s: float = 10.0
    #: Trial requests in half-open; that many successes close the breaker, one failure reopens.
    half_open_trials: int = 2
    #: A response whose headers take longer than this counts as a failure (latency outlier).
    slow_s: float = 30.0

    def __post_init__(self) -> None:
        if self.failure_threshold < 1 or self.half_open_trials < 1:
            raise ValueError("breaker failure_threshold and half_open_trials must be >= 1")
        if self.open_s < 0 or self.slow_s <= 0:
            raise ValueError("breaker open_s must be >= 0 and slow_s > 0")


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
    #: Ring points per unit of backend weight.
    virtual_nodes: int = 160
    #: Most backends tried for one request (failover happens only before the first byte).
    max_attempts: int = 3
    connect_timeout_s: float = 2.0
    #: Longest silence while reading a response (between chunks of a stream).
    read_timeout_s: float = 600.0
    max_connections_per_backend: int = 256
    #: Idle upstream keep-alive connections are closed after this long.
    keepalive_s: float = 30.0
    #: Per-stream read buffer (bytes); a slow client stops the upstream read beyond it.
    stream_buffer_bytes: int = 65536
    #: Bearer key sent upstream; empty = the client's Authorization header is passed through
    #: (only when the gateway itself has no api_keys).
    api_key: str = ""
    health: HealthSettings = HealthSettings()
    breaker: BreakerSettings = BreakerSettings()

    def __post_init__(self) -> None:
        if not self.backends:
            raise ValueError(f"upstream model {self.id!r} has no backends")
        urls = [b.base for b in self.backends]
        if len(set(urls)) != len(urls):
            raise ValueError(f"upstream model {self.id!r} lists a backend url twice")
        if self.load_factor < 1.0:
            raise ValueError("load_factor must be >= 1.0")
        if self.max_attempts < 1 or self.virtual_nodes < 1 or self.prefix_chars < 1:
            raise ValueError("max_attempts, virtual_nodes and prefix_chars must be >= 1")
        if self.max_connections_per_backend < 1 or self.stream_buffer_bytes < 1024:
            raise ValueError("max_connections_per_backend >= 1, stream_buffer_bytes >= 1024")
