"""Generated token bytes → text deltas, with stop sequences. Pure; one instance per request.

Token pieces are bytes and a UTF-8 character may span two tokens, so bytes go through an
incremental decoder. Stop sequences are matched on the text: whatever might be the beginning
of a stop sequence is held back until the next token settles it, so a stop sequence never
reaches the client, even when it spans several tokens.
"""

from __future__ import annotations

import codecs


class TextAssembler:
    """Feeds on token pieces; returns the text that may be sent now."""

    __slots__ = ("_decoder", "_held", "_stops", "stopped")

    def __init__(self, stops: tuple[str, ...] = ()) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stops = tuple(s for s in stops if s)
        self._held = ""
        #: True once a stop sequence matched; the text before it has been returned.
        self.stopped = False

    def push(self, piece: bytes) -> str:
        """Add one token's bytes; the text now safe to send (possibly empty)."""
        text = self._held + self._decoder.decode(piece)
        if not self._stops:
            self._held = ""
            return text
        cut = min((i for i in (text.find(s) for s in self._stops) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            self._held = ""
            return text[:cut]
        keep = self._partial_stop(text)
        self._held = text[len(text) - keep :]
        return text[: len(text) - keep]

    def flush(self) -> str:
        """The text still held back (the stream ended without completing a stop sequence)."""
        text = self._held + self._decoder.decode(b"", final=True)
        self._held = ""
        return text

    def _partial_stop(self, text: str) -> int:
        """Length of the longest suffix of ``text`` that begins some stop sequence."""
        best = 0
        for stop in self._stops:
            for k in range(min(len(stop) - 1, len(text)), best, -1):
                if text.endswith(stop[:k]):
                    best = k
                    break
        return best

    def __repr__(self) -> str:
        return f"TextAssembler(stops={self._stops!r}, held={self._held!r})"
