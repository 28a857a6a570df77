"""When to cut a batch and which waiting inputs go in it. Pure: numbers in, decision out.

Rules, in order:

1. A *full* batch is available (``max_batch_size`` inputs, or the padded cost of everything
   waiting reaches ``max_batch_tokens``): cut it now, even while the engine is busy, so it is
   ready the moment the engine frees up (one batch prefetched).
2. The engine is busy and no full batch is waiting: keep collecting; the batch grows for free.
3. The engine is idle: cut at once if no admitted input is still on its way (being tokenized),
   because waiting would only add latency; otherwise hold the window open until the oldest
   input has waited ``max_wait``.

Selection is length-aware: inputs are ordered by length and the batch is the contiguous run
around the oldest input (so nothing starves) that grows towards the neighbour closest in
length while ``longest x count <= max_batch_tokens``, ``count <= max_batch_size`` and the
share of padding in the batch stays under ``max_padding_waste``. Similar lengths together
waste less compute on padding; the inputs left out form the next batch right away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BatchLimits:
    max_batch_size: int
    max_batch_tokens: int
    max_wait_s: float
    #: Most padding allowed in a batch, as a share of its padded tokens (1.0 = no limit).
    max_padding_waste: float = 1.0


@dataclass(frozen=True, slots=True)
class Cut:
    """Cut a batch made of these indices into the waiting list."""

    indices: list[int]


@dataclass(frozen=True, slots=True)
class Wait:
    """Nothing to cut yet; look again after ``seconds`` (None = when something changes)."""

    seconds: float | None


Decision = Cut | Wait


def decide(
    lengths: Sequence[int],
    arrived: Sequence[float],
    now: float,
    limits: BatchLimits,
    *,
    engine_idle: bool,
    incoming: int,
) -> Decision:
    """Decide for the waiting inputs (``lengths[i]`` tokens, waiting since ``arrived[i]``)."""
    n = len(lengths)
    if n == 0:
        return Wait(None)
    if n >= limits.max_batch_size or max(lengths) * n >= limits.max_batch_tokens:
        return Cut(select(lengths, arrived, limits))
    if not engine_idle:
        return Wait(None)
    oldest = min(arrived)
    remaining = oldest + limits.max_wait_s - now
    if incoming == 0 or remaining <= 0:
        return Cut(select(lengths, arrived, limits))
    return Wait(remaining)


def select(lengths: Sequence[int], arrived: Sequence[float], limits: BatchLimits) -> list[int]:
    """The length-aware batch around the oldest input (see the module docstring)."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    anchor_idx = min(range(len(arrived)), key=arrived.__getitem__)
    pos = order.index(anchor_idx)
    lo = hi = pos  # inclusive window in `order`
    longest = lengths[anchor_idx]
    anchor_len = longest
    real = longest  # sum of the window's lengths

    def fits(new_longest: int, count: int, new_real: int) -> bool:
        padded = new_longest * count
        if padded > limits.max_batch_tokens:
            return False
        return padded - new_real <= limits.max_padding_waste * padded

    while hi - lo + 1 < limits.max_batch_size:
        can_lo = lo > 0
        can_hi = hi < len(order) - 1
        if not (can_lo or can_hi):
            break
        # Prefer the neighbour closest in length to the anchor.
        if can_lo and can_hi:
            take_hi = lengths[order[hi + 1]] - anchor_len <= anchor_len - lengths[order[lo - 1]]
        else:
            take_hi = can_hi
        cand = order[hi + 1] if take_hi else order[lo - 1]
        new_longest = max(longest, lengths[cand])
        if not fits(new_longest, hi - lo + 2, real + lengths[cand]):
            if take_hi and can_lo:
                # The longer side does not fit; shorter inputs still might.
                cand = order[lo - 1]
                new_longest = max(longest, lengths[cand])
                if not fits(new_longest, hi - lo + 2, real + lengths[cand]):
                    break
                lo -= 1
                longest = new_longest
                real += lengths[cand]
                continue
            break
        if take_hi:
            hi += 1
        else:
            lo -= 1
        longest = new_longest
        real += lengths[cand]
    return [order[i] for i in range(lo, hi + 1)]
