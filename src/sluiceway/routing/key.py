"""The routing key of a request: which prompt prefix it shares with other requests.

- chat: the system message(s) plus the first user message, so every turn of one conversation
  maps to the same key (later turns only append messages) — except that a first turn with a
  long system prompt is keyed by that prompt's prefix (see :func:`chat_key`);
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


def chat_key(body: bytes, prefix_chars: int = 1024) -> int | None:
    """The conversation (system messages + first user message), or, for a first turn whose
    system messages reach ``prefix_chars``, that shared preamble alone.

    A stateless router cannot tell a one-shot request from the first turn of a conversation.
    When the system prompt is long it dominates prefill, so first turns are grouped by its
    first ``prefix_chars`` characters (every request sharing it lands together, and a hot one
    spills under the load bound). From the second turn on — and always when the system prompt
    is short — the key is the whole conversation opening, so every later turn of a
    conversation lands on one backend whatever its system prompt.
    """
    try:
        messages = _chat.decode(body).messages
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    system: list[bytes] = []
    first_user: bytes | None = None
    later_turn = False
    for m in messages:
        role = m.role
        if first_user is None:
            if role == "user":
                first_user = bytes(m.content)
            elif role in ("system", "developer"):
                system.append(bytes(m.content))
        elif role in ("user", "assistant", "tool", "function"):
            later_turn = True
            break
    preamble = _SEP.join(system)
    if first_user is None:
        return _hash(preamble[:prefix_chars]) if preamble else None
    if not later_turn and len(preamble) >= prefix_chars:
        return _hash(preamble[:prefix_chars])
    return _hash(preamble + _SEP + first_user)


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
        return chat_key(body, prefix_chars)
    if tail == "completions":
        return completion_key(body, prefix_chars)
    return None
