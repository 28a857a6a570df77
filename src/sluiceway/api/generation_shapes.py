"""The OpenAI response shapes of ``/v1/completions`` and ``/v1/chat/completions``.

One :class:`Shape` per endpoint turns generated deltas into chunks (streaming) or a whole
response; the handlers in :mod:`sluiceway.api.generation` do not know the JSON layouts.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sluiceway.engines.llama_job import TokenLogprob

#: token id → its bytes (the model's vocabulary).
TokenBytes = Callable[[int], bytes]


@dataclass(slots=True)
class Choice:
    """One generated choice being accumulated for a non-streaming response."""

    index: int
    text: list[str] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    prefix: str = ""


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


def _text(token_bytes: TokenBytes, token: int) -> str:
    return token_bytes(token).decode("utf-8", errors="replace")


class Shape:
    """Common envelope: id, object, created, model."""

    object_full = ""
    object_chunk = ""
    id_prefix = ""

    def __init__(self, model: str, token_bytes: TokenBytes, *, include_usage: bool) -> None:
        self.model = model
        self.token_bytes = token_bytes
        self.id = f"{self.id_prefix}-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.include_usage = include_usage

    def envelope(self, obj: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": choices,
        }
        if obj == self.object_chunk and self.include_usage:
            body["usage"] = None
        return body

    def usage_chunk(self, prompt: int, completion: int, cached: int) -> dict[str, Any]:
        body = self.envelope(self.object_chunk, [])
        body["usage"] = usage(prompt, completion, cached)
        return body

    def full(self, choices: list[Choice]) -> dict[str, Any]:
        body = self.envelope(self.object_full, [self.choice(c) for c in choices])
        body["usage"] = usage(
            sum(c.prompt_tokens for c in choices),
            sum(c.completion_tokens for c in choices),
            sum(c.cached_tokens for c in choices),
        )
        return body

    # per endpoint
    def opening(self, index: int, prefix: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def chunk(
        self, index: int, text: str, logprob: TokenLogprob | None, finish: str | None
    ) -> dict[str, Any]:
        raise NotImplementedError

    def choice(self, c: Choice) -> dict[str, Any]:
        raise NotImplementedError


class CompletionShape(Shape):
    object_full = "text_completion"
    object_chunk = "text_completion"
    id_prefix = "cmpl"

    def opening(self, index: int, prefix: str) -> dict[str, Any] | None:
        if not prefix:
            return None
        return self.envelope(self.object_chunk, [self._choice(index, prefix, None, None)])

    def chunk(
        self, index: int, text: str, logprob: TokenLogprob | None, finish: str | None
    ) -> dict[str, Any]:
        lps = self._logprobs([logprob], 0) if logprob is not None else None
        return self.envelope(self.object_chunk, [self._choice(index, text, lps, finish)])

    def choice(self, c: Choice) -> dict[str, Any]:
        lps = self._logprobs(c.logprobs, len(c.prefix)) if c.logprobs else None
        return self._choice(c.index, c.prefix + "".join(c.text), lps, c.finish_reason)

    @staticmethod
    def _choice(
        index: int, text: str, logprobs: dict[str, Any] | None, finish: str | None
    ) -> dict[str, Any]:
        return {"text": text, "index": index, "logprobs": logprobs, "finish_reason": finish}

    def _logprobs(self, items: list[TokenLogprob], offset: int) -> dict[str, Any]:
        tokens, values, tops, offsets = [], [], [], []
        for lp in items:
            text = _text(self.token_bytes, lp.token)
            tokens.append(text)
            values.append(lp.logprob)
            tops.append({_text(self.token_bytes, t): v for t, v in lp.top})
            offsets.append(offset)
            offset += len(text)
        return {
            "tokens": tokens,
            "token_logprobs": values,
            "top_logprobs": tops,
            "text_offset": offsets,
        }


class ChatShape(Shape):
    object_full = "chat.completion"
    object_chunk = "chat.completion.chunk"
    id_prefix = "chatcmpl"

    def opening(self, index: int, prefix: str) -> dict[str, Any] | None:
        delta = {"role": "assistant", "content": ""}
        return self.envelope(
            self.object_chunk,
            [{"index": index, "delta": delta, "logprobs": None, "finish_reason": None}],
        )

    def chunk(
        self, index: int, text: str, logprob: TokenLogprob | None, finish: str | None
    ) -> dict[str, Any]:
        delta = {"content": text} if text or finish is None else {}
        lps = {"content": [self._entry(logprob)]} if logprob is not None else None
        return self.envelope(
            self.object_chunk,
            [{"index": index, "delta": delta, "logprobs": lps, "finish_reason": finish}],
        )

    def choice(self, c: Choice) -> dict[str, Any]:
        lps = {"content": [self._entry(lp) for lp in c.logprobs]} if c.logprobs else None
        return {
            "index": c.index,
            "message": {"role": "assistant", "content": "".join(c.text)},
            "logprobs": lps,
            "finish_reason": c.finish_reason,
        }

    def _entry(self, lp: TokenLogprob) -> dict[str, Any]:
        raw = self.token_bytes(lp.token)
        return {
            "token": raw.decode("utf-8", errors="replace"),
            "logprob": lp.logprob,
            "bytes": list(raw),
            "top_logprobs": [
                {
                    "token": self.token_bytes(t).decode("utf-8", errors="replace"),
                    "logprob": v,
                    "bytes": list(self.token_bytes(t)),
                }
                for t, v in lp.top
            ],
        }
