"""The oracle bound on the prompt-cache hit rate of a request sequence.

The oracle replays the exact requests a contender sent, in send order, through ONE prompt
cache of unbounded capacity with the simulator's own tokenizer and block hashing
(:mod:`sluiceway.bench.simulated_cache`). A block is then recomputed only the first time any
request needs it, which no routing over any number of finite caches can beat: it is an upper
bound. It is also reachable in these workloads: each workload's working set (distinct prefix
blocks in use at once) fits in the fleet's total cache when split by prefix, and the only
extra misses a perfect router pays are the first requests of a hot prefix that the load bound
replicates onto a second backend (a handful of blocks).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import msgspec
import numpy as np

from sluiceway.bench.simulated_app import render_chat
from sluiceway.bench.simulated_cache import PrefixCache, tokenize


def oracle_hit_rate(
    bodies: Iterable[bytes],
    block_tokens: int,
    *,
    overhead_ms: float = 0.0,
    us_per_token: float = 0.0,
) -> dict[str, float]:
    """Prompt tokens, cached tokens and hit rate of ``bodies`` through one unbounded cache.

    With the simulator's timings it also gives the TTFT floor: the p50/p99 of each request's
    prefill time with the oracle's cache and no queueing at all. No router can beat it; with
    a cold first request per prefix group above 1% of the traffic, its p99 is a cold prefill.
    """
    cache = PrefixCache(capacity_blocks=1 << 40, block_tokens=block_tokens)
    prompt = cached = 0
    floor_ms: list[float] = []
    for body in bodies:
        messages = msgspec.json.decode(body)["messages"]
        tokens = tokenize(render_chat(messages))
        hashes = cache.hashes(tokens)
        hit = cache.match(hashes)
        cache.commit(hashes)
        cached += hit
        prompt += len(tokens)
        floor_ms.append(overhead_ms + (len(tokens) - hit) * us_per_token / 1e3)
    p50, p99 = np.percentile(floor_ms, (50, 99)) if floor_ms else (math.nan, math.nan)
    return {
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "prefill_tokens": prompt - cached,
        "hit_rate": cached / prompt if prompt else float("nan"),
        "ttft_floor_p50_ms": float(p50),
        "ttft_floor_p99_ms": float(p99),
    }


def partitioned_hit_rate(
    bodies: Iterable[bytes], block_tokens: int, backends: int, capacity_blocks: int, by: str
) -> float:
    """Hit rate of a perfect static partition over ``backends`` finite LRU caches.

    Each request goes to the backend of its group (``by="system"``: its first message;
    ``by="conversation"``: its first user message), groups dealt round-robin in order of first
    appearance. It checks that the unbounded oracle is reachable with the fleet's real caches.
    """
    caches = [PrefixCache(capacity_blocks, block_tokens) for _ in range(backends)]
    owner: dict[str, int] = {}
    prompt = cached = 0
    for body in bodies:
        messages = msgspec.json.decode(body)["messages"]
        group = str(messages[0 if by == "system" else 1]["content"])
        cache = caches[owner.setdefault(group, len(owner) % backends)]
        tokens = tokenize(render_chat(messages))
        hashes = cache.hashes(tokens)
        cached += cache.match(hashes)
        cache.commit(hashes)
        prompt += len(tokens)
    return cached / prompt if prompt else float("nan")
