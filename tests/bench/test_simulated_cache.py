"""The simulated backend's block-LRU prefix cache (pure, no event loop)."""

from __future__ import annotations

import pytest

from sluiceway.bench.simulated_cache import PrefixCache, block_hashes, tokenize
from sluiceway.errors import InvalidRequest


def words(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def test_tokenize_splits_on_whitespace() -> None:
    assert tokenize("  a b\n c\td ") == ["a", "b", "c", "d"]


def test_block_hashes_chain_over_the_whole_prefix() -> None:
    a = words("a", 10) + words("x", 6)
    b = words("a", 10) + words("y", 6)
    ha, hb = block_hashes(a, 4), block_hashes(b, 4)
    assert len(ha) == 4  # 16 tokens, 4 full blocks
    assert ha[:2] == hb[:2]  # the first 8 tokens are shared
    assert ha[2] != hb[2]  # block 2 differs (a8 a9 x0 x1 vs a8 a9 y0 y1)
    assert ha[3] != hb[3]
    # Same block tokens behind a different parent: a different hash (chained).
    c = words("z", 4) + words("a", 4)
    assert block_hashes(c, 4)[1] != ha[0]
    assert block_hashes(words("a", 3), 4) == []  # a partial block is not cacheable


def test_match_counts_the_longest_leading_run_of_cached_blocks() -> None:
    cache = PrefixCache(capacity_blocks=100, block_tokens=4)
    first = [*words("p", 16), "q"]
    cache.commit(cache.hashes(first))
    assert cache.match(cache.hashes(first)) == 16
    # Shares 10 tokens: two full blocks.
    other = words("p", 10) + words("r", 10)
    assert cache.match(cache.hashes(other)) == 8
    # Nothing in common.
    assert cache.match(cache.hashes(words("s", 20))) == 0
    assert cache.statistics()["lookups"] == 3
    assert cache.statistics()["hits"] == 2


def test_the_last_token_is_always_computed() -> None:
    cache = PrefixCache(capacity_blocks=100, block_tokens=4)
    prompt = words("p", 16)  # block-aligned
    cache.commit(cache.hashes(prompt))
    # An exact repeat still computes one block (15 usable tokens: 3 full blocks).
    assert cache.match(cache.hashes(prompt)) == 12


def test_a_missing_head_block_hides_its_tails() -> None:
    cache = PrefixCache(capacity_blocks=100, block_tokens=2)
    hashes = cache.hashes(words("p", 9))
    cache.commit(hashes[1:])  # every block but the first
    assert cache.match(hashes) == 0


def test_lru_evicts_the_least_recently_used_prefix_tail_first() -> None:
    cache = PrefixCache(capacity_blocks=4, block_tokens=2)
    a = cache.hashes(words("a", 5))  # 2 blocks
    b = cache.hashes(words("b", 5))  # 2 blocks
    c = cache.hashes(words("c", 3))  # 1 block
    cache.commit(a)
    cache.commit(b)
    assert len(cache) == 4
    cache.match(a)  # a lookup alone does not refresh
    assert cache.commit(c) == 1  # one block of a (the least recently committed) goes
    assert a[0] in cache and a[1] not in cache  # the tail went first, the head stays
    assert cache.match(a) == 2
    cache.commit(a)  # refresh a: now b is the oldest
    cache.commit(cache.hashes(words("d", 5)))
    assert cache.match(b) == 0
    assert cache.match(a) == 4
    assert cache.statistics()["evictions"] == 4


def test_a_prompt_longer_than_the_cache_keeps_its_head() -> None:
    cache = PrefixCache(capacity_blocks=3, block_tokens=2)
    hashes = cache.hashes(words("p", 21))  # 10 blocks
    cache.commit(hashes)
    assert len(cache) == 3
    assert cache.match(hashes) == 6


def test_zero_capacity_caches_nothing_and_clear_resets() -> None:
    empty = PrefixCache(capacity_blocks=0, block_tokens=4)
    hashes = empty.hashes(words("p", 20))
    empty.commit(hashes)
    assert empty.match(hashes) == 0
    cache = PrefixCache(capacity_blocks=8, block_tokens=4)
    cache.commit(hashes)
    cache.clear()
    assert len(cache) == 0
    assert cache.statistics()["evictions"] == 0
    assert "PrefixCache(blocks=0/8" in repr(cache)


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(InvalidRequest):
        PrefixCache(capacity_blocks=4, block_tokens=0)
