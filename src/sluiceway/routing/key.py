"""The routing key of a request: which prompt prefix it shares with other requests.

- chat: the system message(s) plus the first user message, so every turn of one conversation
  maps to the same key (later turns only append messages);
- completions: the first ``prefix_chars`` characters (or tokens) of the prompt;
- a session header, when present, overrides both;
- anything else: no key (no affinity).

Only the fields needed are decoded (msgspec); message contents are hashed as their raw JSON
bytes, so multimodal content parts cost nothing to decode. Keys are 64-bit xxhash values.
"""

from __future__ import annotations

from typing import Any

import msgspec
import xxhash

_hash = xxhash.xxh3_64_intdigest


class _Message(msgspec.Struct):
    role: str = ""
    content: msgspec.Raw = msgspec.Raw(b"null")


class _Chat(msgspec.Struct):
    messages: list[_Message] = []


class _Completion(msgspec.Struct):
    prompt: str | list[Any] | None = None


_chat = msgspec.json.Decoder(_Chat)
_completion = msgspec.json.Decoder(_Completion)
_SEP = b"\x1e"


def chat_key(body: bytes) -> int | None:
    """System messages + the first user message; None if there is no user message."""
    try:
        messages = _chat.decode(body).messages
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    parts: list[bytes] = []
    for m in messages:
        if m.role in ("system", "developer"):
            parts.append(bytes(m.content))
        elif m.role == "user":
            parts.append(bytes(m.content))
            return _hash(_SEP.join(parts))
    return None


def completion_key(body: bytes, prefix_chars: int) -> int | None:
    """The first ``prefix_chars`` characters (string prompt) or tokens (token-id prompt)."""
    try:
        prompt = _completion.decode(body).prompt
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if isinstance(prompt, list):
        if not prompt:
            return None
        first = prompt[0]
        if isinstance(first, str):
            prompt = first
        elif isinstance(first, list):
            return _hash(msgspec.json.encode(first[:prefix_chars]))
        else:
            return _hash(msgspec.json.encode(prompt[:prefix_chars]))
    if not prompt:
        return None
    return _hash(prompt[:prefix_chars].encode())


def session_key(value: str) -> int:
    return _hash(value.encode())


def routing_key(
    tail: str, body: bytes, session: str | None, prefix_chars: int = 1024
) -> int | None:
    """The key of a ``POST /v1/<tail>`` request, or None for no affinity."""
    if session:
        return session_key(session)
    if tail == "chat/completions":
        return chat_key(body)
    if tail == "completions":
        return completion_key(body, prefix_chars)
    return None
