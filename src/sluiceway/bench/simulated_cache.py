"""The simulated backend's prompt cache: token blocks, chained hashes, one LRU.

No real tokenizer: a "token" is a whitespace-separated word of the rendered prompt
(:func:`tokenize`). Tokens are cut into blocks of ``block_tokens``; only full blocks are
cacheable. Like vLLM's automatic prefix caching, a block is named by a hash chained over its
parent: ``hash(block i) = H(hash(block i-1), tokens of block i)``, so one block hash stands for
the whole prefix up to its end and two prompts share a cached block only if they share every
token before it.

A prompt's cached tokens are the tokens of the longest run of leading blocks present in the
cache (a gap ends the run even if later blocks are present). At most ``len(tokens) - 1``
tokens can be served from the cache: the last prompt token is always computed, as in vLLM, so
an exact repeat of a block-aligned prompt still costs one block of prefill.

The cache is one LRU over blocks with a fixed capacity. :meth:`PrefixCache.commit` touches a
prompt's blocks from the last to the first, so within a prompt the first block is the most
recently used and eviction removes the tails of prefixes before their heads (evicting a head
first would orphan its tails: they could never be matched again). Pure and synchronous.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import xxhash

from sluiceway.errors import InvalidRequest

_ROOT = 0x51CE  # the parent hash of the first block
_SEPARATOR = b"\x1f"


def tokenize(text: str) -> list[str]:
    """Simulated tokens: the whitespace-separated words of ``text``."""
    return text.split()


def block_hashes(tokens: Sequence[str], block_tokens: int) -> list[int]:
    """Chained hashes of the full blocks of ``tokens`` (a trailing partial block has none)."""
    hashes: list[int] = []
    parent = _ROOT
    for start in range(0, len(tokens) - block_tokens + 1, block_tokens):
        block = _SEPARATOR.join(t.encode() for t in tokens[start : start + block_tokens])
        parent = xxhash.xxh3_64_intdigest(parent.to_bytes(8, "little") + block)
        hashes.append(parent)
    return hashes


class PrefixCache:
    """A fixed-capacity LRU of prompt blocks named by chained hashes (see the module doc)."""

    __slots__ = ("_blocks", "block_tokens", "capacity", "evictions", "hits", "lookups")

    def __init__(self, capacity_blocks: int, block_tokens: int) -> None:
        if capacity_blocks < 0 or block_tokens < 1:
            raise InvalidRequest("cache capacity must be >= 0 blocks of >= 1 token")
        self.capacity = capacity_blocks
        self.block_tokens = block_tokens
        self._blocks: OrderedDict[int, None] = OrderedDict()
        self.evictions = 0
        self.lookups = 0
        self.hits = 0  # lookups that matched at least one block

    def hashes(self, tokens: Sequence[str]) -> list[int]:
        """The hashes of the blocks of ``tokens`` that could ever be served from a cache."""
        usable = max(0, len(tokens) - 1)  # the last token is always computed
        return block_hashes(tokens[:usable], self.block_tokens)

    def match(self, hashes: Sequence[int]) -> int:
        """Cached tokens for a prompt with these block hashes (longest leading run)."""
        self.lookups += 1
        run = 0
        for h in hashes:
            if h not in self._blocks:
                break
            run += 1
        if run:
            self.hits += 1
        return run * self.block_tokens

    def commit(self, hashes: Sequence[int]) -> int:
        """Insert or refresh a computed prompt's blocks; return how many blocks were evicted."""
        evicted = 0
        if self.capacity == 0:
            return 0
        blocks = self._blocks
        for h in reversed(hashes[: self.capacity]):
            if h in blocks:
                blocks.move_to_end(h)
            else:
                blocks[h] = None
        while len(blocks) > self.capacity:
            blocks.popitem(last=False)
            evicted += 1
        self.evictions += evicted
        return evicted

    def __contains__(self, block_hash: object) -> bool:
        return block_hash in self._blocks

    def __len__(self) -> int:
        return len(self._blocks)

    def clear(self) -> None:
        """Drop every block and zero the counters."""
        self._blocks.clear()
        self.evictions = self.lookups = self.hits = 0

    def statistics(self) -> dict[str, int]:
        return {
            "blocks": len(self._blocks),
            "capacity_blocks": self.capacity,
            "block_tokens": self.block_tokens,
            "evictions": self.evictions,
            "lookups": self.lookups,
            "hits": self.hits,
        }

    def __repr__(self) -> str:
        return (
            f"PrefixCache(blocks={len(self._blocks)}/{self.capacity}, "
            f"block_tokens={self.block_tokens}, evictions={self.evictions})"
        )
