"""Admission control: a bound on waiting inputs and waiting tokens. Overload is refused at once."""

from __future__ import annotations

from sluiceway.errors import Overloaded


class Admission:
    """Counts what is admitted and not yet finished; refuses what would exceed the bounds.

    Sync and pure: the caller reserves before work and releases on every exit path.
    """

    __slots__ = ("_items", "_max_items", "_max_tokens", "_tokens", "refused")

    def __init__(self, max_items: int, max_tokens: int) -> None:
        self._max_items = max_items
        self._max_tokens = max_tokens
        self._items = 0
        self._tokens = 0
        self.refused = 0

    def reserve_items(self, n: int) -> None:
        if self._items + n > self._max_items and self._items > 0:
            self.refused += 1
            raise Overloaded(
                f"server overloaded: {self._items} inputs already queued "
                f"(limit {self._max_items}); retry later",
                retry_after=1.0,
            )
        self._items += n

    def reserve_tokens(self, n: int) -> None:
        if self._tokens + n > self._max_tokens and self._tokens > 0:
            self.refused += 1
            raise Overloaded(
                f"server overloaded: {self._tokens} tokens already queued "
                f"(limit {self._max_tokens}); retry later",
                retry_after=1.0,
            )
        self._tokens += n

    def release(self, items: int, tokens: int) -> None:
        self._items -= items
        self._tokens -= tokens

    @property
    def items(self) -> int:
        return self._items

    @property
    def tokens(self) -> int:
        return self._tokens

    def statistics(self) -> dict[str, int]:
        return {"items": self._items, "tokens": self._tokens, "refused": self.refused}

    def __repr__(self) -> str:
        return (
            f"Admission(items={self._items}/{self._max_items}, "
            f"tokens={self._tokens}/{self._max_tokens})"
        )
