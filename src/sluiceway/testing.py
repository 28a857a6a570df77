"""Fakes and builders for tests and demos (shipped, so users can test against them too).

- :class:`ManualClock` — time that moves only when told.
- :class:`FakeEncoder` — an ``EncoderEngine`` with deterministic vectors, optional delay and
  failure injection, recording the batches it ran and the threads it ran on.
- :func:`fake_loader` — an ``EncoderService`` loader using the real tokenizer and a fake engine.
- :func:`settings` — a ``Settings`` builder; :func:`running_gateway` — a real server on 127.0.0.1.
- ``ByteTokenizer`` / ``FakeDecoder`` — the generation engine seam's fakes (one token per byte;
  gate and failure injection), from ``sluiceway.engines.llama_fake``.
- ``SimulatedFleet`` — simulated OpenAI-compatible LLM backends (``sluiceway.bench.simulated``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from sluiceway.app import Gateway
from sluiceway.bench.simulated import SimulatedFleet
from sluiceway.config.settings import (
    EncoderModelSettings,
    ModelSettings,
    ServerSettings,
    Settings,
)
from sluiceway.engines.llama_fake import ByteTokenizer, FakeDecoder
from sluiceway.engines.protocol import EncoderEngine, Float32Array, Int64Array
from sluiceway.engines.tokenizer import TextTokenizer

MINILM_TOKENIZER = "pkg:sluiceway/models/minilm/tokenizer.json"

__all__ = [
    "MINILM_TOKENIZER",
    "ByteTokenizer",
    "FakeDecoder",
    "FakeEncoder",
    "ManualClock",
    "SimulatedFleet",
    "eventually",
    "fake_encoder_gateway",
    "fake_loader",
    "running_gateway",
    "settings",
]


class ManualClock:
    """A :class:`~sluiceway.clock.Clock` that only moves on :meth:`advance`."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    def __repr__(self) -> str:
        return f"ManualClock({self._now})"


@dataclass
class FakeEncoder:
    """Deterministic vectors: row i depends only on its own non-padding ids.

    ``delay_s`` sleeps on the engine thread (simulated compute; the event loop must stay free).
    ``fail_on`` makes ``run`` raise when any row contains that token id.
    ``gate``, when set, blocks each run until the event is set (to hold a batch in flight).
    """

    dims: int = 8
    delay_s: float = 0.0
    fail_on: int | None = None
    gate: threading.Event | None = None
    batches: list[list[int]] = field(default_factory=list)
    threads: set[str] = field(default_factory=set)
    seen_ids: list[list[int]] = field(default_factory=list)

    def run(self, input_ids: Int64Array, attention_mask: Int64Array) -> Float32Array:
        self.threads.add(threading.current_thread().name)
        if self.gate is not None:
            self.gate.wait(timeout=30)
        if self.delay_s:
            time.sleep(self.delay_s)
        rows = [
            ids[mask.astype(bool)].tolist()
            for ids, mask in zip(input_ids, attention_mask, strict=True)
        ]
        self.batches.append([len(r) for r in rows])
        self.seen_ids.extend(rows)
        if self.fail_on is not None and any(self.fail_on in r for r in rows):
            raise RuntimeError("injected engine failure")
        out = np.zeros((len(rows), self.dims), dtype=np.float32)
        for i, r in enumerate(rows):
            for j, tok in enumerate(r):
                out[i, (tok + j) % self.dims] += 1.0 + (tok % 7)
        return out


def fake_loader(
    engine: EncoderEngine, tokenizer_file: str = MINILM_TOKENIZER, max_length: int = 256
) -> Callable[[EncoderModelSettings], tuple[TextTokenizer, EncoderEngine]]:
    """A loader for ``EncoderService`` with the real tokenizer and ``engine``."""
    from sluiceway.config.resources import resolve_file

    def load(settings: EncoderModelSettings) -> tuple[TextTokenizer, EncoderEngine]:
        return TextTokenizer(str(resolve_file(tokenizer_file)), max_length), engine

    return load


def settings(models: tuple[ModelSettings, ...] = (), **server: Any) -> Settings:
    """Settings for tests: port 0 (ephemeral) and the given models (default: none)."""
    base = {"port": 0, "watch_config": False, "shutdown_grace_s": 5.0}
    base.update(server)
    return Settings(server=msgspec.convert(base, ServerSettings), models=models)


@contextlib.asynccontextmanager
async def running_gateway(gateway: Gateway) -> AsyncIterator[Gateway]:
    """Serve ``gateway`` on 127.0.0.1 (ephemeral port) for the duration of the block."""
    async with gateway.running(host="127.0.0.1", port=0) as g:
        yield g


def fake_encoder_gateway(
    engine: EncoderEngine,
    *,
    model: EncoderModelSettings | None = None,
    **server: Any,
) -> Gateway:
    """A gateway serving one encoder model backed by ``engine`` (real tokenizer, fake runtime)."""
    from sluiceway.clock import SystemClock
    from sluiceway.observability.metrics import Metrics
    from sluiceway.providers.base import ServiceContext
    from sluiceway.providers.encoder import EncoderService
    from sluiceway.providers.registry import Registry

    model = model or EncoderModelSettings(id="fake-encoder", tokenizer_file=MINILM_TOKENIZER)
    s = settings((model,), **server)
    metrics, clock = Metrics(), SystemClock()
    registry = Registry()
    ctx = ServiceContext(metrics, clock, s.server)
    registry.add_embedder(EncoderService(model, ctx, loader=fake_loader(engine)))
    return Gateway(s, clock=clock, metrics=metrics, registry=registry)


async def eventually(predicate: Callable[[], object], within: float = 10.0) -> None:
    """Wait until ``predicate()`` is truthy (state owned by other threads or processes)."""
    import asyncio

    async with asyncio.timeout(within):
        while not predicate():  # noqa: ASYNC110 - polling state no event announces
            await asyncio.sleep(0.005)
