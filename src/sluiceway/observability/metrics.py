"""Every Prometheus metric sluiceway exports, defined in this one module.

A :class:`Metrics` owns its own ``CollectorRegistry`` (no globals), so tests and several apps in
one process do not collide. Naming follows Prometheus: ``*_total`` counters, units in names,
bounded label sets (model ids and backend ids come from config, never from requests).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# Seconds buckets from 0.5 ms to 60 s: covers a batched encoder (ms) and LLM requests (s).
LATENCY_BUCKETS = (
    0.0005, 0.001, 0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1,
    0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0,
)  # fmt: skip
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
TOKEN_BUCKETS = (16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)

#: Failure reasons (bounded label values).
REASONS = ("overloaded", "timeout", "cancelled", "validation", "engine", "upstream", "unavailable")


class Metrics:
    """All metrics of one gateway. Created by the composition root and passed down."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry if registry is not None else CollectorRegistry()
        p = "sluiceway_"
        # --- HTTP edge ---
        self.requests = Counter(
            p + "requests", "HTTP requests answered.", ["model", "endpoint", "status"], registry=r
        )
        self.request_duration = Histogram(
            p + "request_duration_seconds", "HTTP request duration, end to end.",
            ["model", "endpoint"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.in_flight = Gauge(
            p + "requests_in_flight", "HTTP requests being served.", ["endpoint"], registry=r
        )
        self.failures = Counter(
            p + "failures", "Requests that failed, by reason.", ["model", "reason"], registry=r
        )
        # --- local encoder pipeline ---
        self.queue_wait = Histogram(
            p + "queue_wait_seconds", "Time an input waited between admission and its batch.",
            ["model"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.tokenize_duration = Histogram(
            p + "tokenize_duration_seconds", "Tokenizer time per tokenizer call.",
            ["model"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.inference_duration = Histogram(
            p + "inference_duration_seconds", "Engine time per batch (run + pooling).",
            ["model"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.batch_size = Histogram(
            p + "batch_size", "Inputs per engine batch.", ["model"], buckets=SIZE_BUCKETS,
            registry=r,
        )  # fmt: skip
        self.batch_tokens = Histogram(
            p + "batch_tokens", "Padded tokens per engine batch (longest x count).", ["model"],
            buckets=TOKEN_BUCKETS, registry=r,
        )  # fmt: skip
        self.queue_depth = Gauge(
            p + "queue_depth", "Inputs admitted and not yet run.", ["model"], registry=r
        )
        self.input_tokens = Counter(
            p + "input_tokens", "Prompt/input tokens processed.", ["model"], registry=r
        )
        self.truncations = Counter(
            p + "truncations", "Inputs truncated to the model's limit.", ["model"], registry=r
        )
        self.dropped = Counter(
            p + "dropped_inputs", "Inputs dropped before running (client gone or deadline).",
            ["model", "stage", "reason"], registry=r,
        )  # fmt: skip
        # --- local generation ---
        self.ttft = Histogram(
            p + "time_to_first_token_seconds", "Time to first token.", ["model", "backend"],
            buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.inter_token = Histogram(
            p + "inter_token_latency_seconds", "Time between generated tokens.", ["model"],
            buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.generated_tokens = Counter(
            p + "generated_tokens", "Tokens generated.", ["model"], registry=r
        )
        self.cached_prompt_tokens = Counter(
            p + "cached_prompt_tokens", "Prompt tokens served from a KV cache.", ["model"],
            registry=r,
        )  # fmt: skip
        self.busy_slots = Gauge(p + "busy_slots", "Generation slots in use.", ["model"], registry=r)
        # --- upstream pools ---
        self.upstream_duration = Histogram(
            p + "upstream_request_duration_seconds", "Upstream request duration, end to end.",
            ["model", "backend"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.upstream_requests = Counter(
            p + "upstream_requests", "Upstream responses by status (or error kind).",
            ["model", "backend", "status"], registry=r,
        )  # fmt: skip
        self.backend_in_flight = Gauge(
            p + "backend_in_flight", "Requests in flight per backend.", ["model", "backend"],
            registry=r,
        )  # fmt: skip
        self.backend_up = Gauge(
            p + "backend_up", "1 if the backend is eligible (healthy, breaker not open).",
            ["model", "backend"], registry=r,
        )  # fmt: skip
        self.breaker_state = Gauge(
            p + "backend_breaker_state", "Circuit breaker: 0 closed, 1 half-open, 2 open.",
            ["model", "backend"], registry=r,
        )  # fmt: skip
        self.pool_available = Gauge(
            p + "pool_available_backends", "Eligible backends per pool.", ["model"], registry=r
        )
        self.retries = Counter(
            p + "upstream_retries", "Failovers to the next backend before the first byte.",
            ["model", "reason"], registry=r,
        )  # fmt: skip
        self.routing_decisions = Counter(
            p + "routing_decisions", "Routing outcomes: affinity hit or fallback kind.",
            ["model", "outcome"], registry=r,
        )  # fmt: skip
        self.reloads = Counter(
            p + "config_reloads", "Hot reloads of the configuration.", ["result"], registry=r
        )
        self.upstream_connections = Gauge(
            p + "upstream_connections", "Open upstream connections.", ["model", "backend"],
            registry=r,
        )  # fmt: skip

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
