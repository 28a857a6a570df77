"""Tokenization with explicit truncation control (HF ``tokenizers``; runs off the event loop)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from tokenizers import Tokenizer

from sluiceway.engines.protocol import Int64Array

Direction = Literal["right", "left"]


@dataclass(frozen=True, slots=True)
class Encoded:
    """One input's token ids (special tokens included).

    ``length`` is the untruncated token count when the input was encoded without truncation
    (so an over-long input can be refused with its real size), else ``len(ids)``.
    """

    ids: Int64Array
    truncated: bool
    length: int


class TextTokenizer:
    """A ``tokenizer.json`` configured three ways: truncating right, truncating left, whole.

    The file's own padding/truncation settings are always overridden: padding happens later,
    into the batch buffers, and truncation is explicit per request.
    """

    def __init__(self, path: str, max_length: int) -> None:
        self.max_length = max_length
        self._by_direction: dict[Direction, Tokenizer] = {}
        for direction in ("right", "left"):
            tok = Tokenizer.from_file(path)
            tok.no_padding()
            tok.enable_truncation(max_length, direction=direction)
            self._by_direction[direction] = tok
        self._whole = Tokenizer.from_file(path)
        self._whole.no_padding()
        self._whole.no_truncation()
        self.vocab_size = self._whole.get_vocab_size(with_added_tokens=True)
        # The special tokens the post-processor wraps around content (e.g. [CLS] … [SEP]),
        # found by encoding one plain word with and without them.
        probe = self._whole.encode("a", add_special_tokens=True).ids
        content = self._whole.encode("a", add_special_tokens=False).ids
        at = _find(probe, content)
        self._prefix = probe[:at]
        self._suffix = probe[at + len(content) :]
        self._path = path

    def encode(self, texts: list[str], truncate: bool, direction: Direction) -> list[Encoded]:
        """Batch-encode texts (HF tokenizers parallelises large batches internally)."""
        if truncate:
            encodings = self._by_direction[direction].encode_batch(texts)
            return [
                Encoded(np.asarray(e.ids, dtype=np.int64), bool(e.overflowing), len(e.ids))
                for e in encodings
            ]
        encodings = self._whole.encode_batch(texts)
        return [Encoded(np.asarray(e.ids, dtype=np.int64), False, len(e.ids)) for e in encodings]

    def wrap_ids(self, ids: list[int], truncate: bool, direction: Direction) -> Encoded:
        """Token-id input (content ids, no special tokens) → the model's full sequence."""
        room = self.max_length - len(self._prefix) - len(self._suffix)
        length = len(ids) + len(self._prefix) + len(self._suffix)
        truncated = truncate and len(ids) > room
        if truncated:
            ids = ids[:room] if direction == "right" else ids[len(ids) - room :]
        seq = np.asarray([*self._prefix, *ids, *self._suffix], dtype=np.int64)
        return Encoded(seq, truncated, length)

    def __repr__(self) -> str:
        return f"TextTokenizer({self._path!r}, max_length={self.max_length})"


def _find(seq: list[int], sub: list[int]) -> int:
    for i in range(len(seq) - len(sub) + 1):
        if seq[i : i + len(sub)] == sub:
            return i
    raise ValueError("cannot locate content tokens inside the special-token template")
