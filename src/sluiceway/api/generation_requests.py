"""The request bodies of ``/v1/completions`` and ``/v1/chat/completions``, validated into a plan.

msgspec Structs with ``forbid_unknown_fields``: a field this server does not implement is a
400 naming it (never silently ignored); values out of range are a 400 naming the parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import msgspec

from sluiceway.api.decode import decode
from sluiceway.engines.llama_job import Sampling
from sluiceway.errors import InvalidRequest
from sluiceway.providers.generation import (
    ChatPrompt,
    GenerateOptions,
    Prompt,
    TextPrompt,
    TokenPrompt,
)

#: Most generations (prompts x n) one request may start.
MAX_CHOICES = 16
MAX_STOPS = 4


class StreamOptions(msgspec.Struct, forbid_unknown_fields=True):
    include_usage: bool | None = None


class _Sampling(msgspec.Struct, forbid_unknown_fields=True):
    model: str
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    n: int | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    user: str | None = None


class CompletionRequest(_Sampling, forbid_unknown_fields=True):
    prompt: Any = None
    logprobs: int | None = None
    echo: bool | None = None
    best_of: int | None = None


class ContentPart(msgspec.Struct, forbid_unknown_fields=True):
    type: str
    text: str | None = None


class ChatMessage(msgspec.Struct, forbid_unknown_fields=True):
    role: str
    content: str | list[ContentPart] | None = None
    name: str | None = None


class ChatRequest(_Sampling, forbid_unknown_fields=True):
    messages: list[ChatMessage] = []
    max_completion_tokens: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None


_completion_decoder = msgspec.json.Decoder(CompletionRequest)
_chat_decoder = msgspec.json.Decoder(ChatRequest)


@dataclass(frozen=True, slots=True)
class Plan:
    """A validated request: what to generate and how to answer."""

    model: str
    prompts: list[Prompt]
    n: int
    options: GenerateOptions
    stream: bool
    include_usage: bool


def _check(ok: bool, message: str, param: str) -> None:
    if not ok:
        raise InvalidRequest(message, param=param)


def _options(req: _Sampling, max_tokens: int | None, top_logprobs: int | None) -> GenerateOptions:
    t = 1.0 if req.temperature is None else req.temperature
    _check(0.0 <= t <= 2.0, "temperature must be between 0 and 2", "temperature")
    top_p = 1.0 if req.top_p is None else req.top_p
    _check(0.0 < top_p <= 1.0, "top_p must be in (0, 1]", "top_p")
    top_k = req.top_k or 0
    _check(top_k >= 0, "top_k must be >= 0 (0 = off)", "top_k")
    min_p = req.min_p or 0.0
    _check(0.0 <= min_p <= 1.0, "min_p must be between 0 and 1", "min_p")
    presence = req.presence_penalty or 0.0
    frequency = req.frequency_penalty or 0.0
    _check(-2.0 <= presence <= 2.0, "presence_penalty must be between -2 and 2", "presence_penalty")
    _check(
        -2.0 <= frequency <= 2.0, "frequency_penalty must be between -2 and 2", "frequency_penalty"
    )
    if max_tokens is not None:
        _check(max_tokens >= 1, "max_tokens must be at least 1", "max_tokens")
    stops = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    _check(len(stops) <= MAX_STOPS, f"stop takes at most {MAX_STOPS} sequences", "stop")
    _check(all(stops), "stop sequences must not be empty", "stop")
    bias: list[tuple[int, float]] = []
    for key, value in (req.logit_bias or {}).items():
        _check(key.isdigit(), "logit_bias keys must be token ids", "logit_bias")
        _check(-100.0 <= value <= 100.0, "logit_bias values must be in [-100, 100]", "logit_bias")
        bias.append((int(key), value))
    sampling = Sampling(
        temperature=t,
        top_p=top_p,
        top_k=top_k,
        min_p=min_p,
        seed=req.seed,
        presence_penalty=presence,
        frequency_penalty=frequency,
        logit_bias=tuple(bias),
        top_logprobs=top_logprobs,
    )
    return GenerateOptions(max_tokens=max_tokens, sampling=sampling, stops=tuple(stops))


def _common(req: _Sampling, prompts: list[Prompt], options: GenerateOptions) -> Plan:
    n = 1 if req.n is None else req.n
    _check(n >= 1, "n must be at least 1", "n")
    _check(
        n * len(prompts) <= MAX_CHOICES,
        f"a request may ask for at most {MAX_CHOICES} generations (prompts x n)",
        "n",
    )
    stream = bool(req.stream)
    _check(stream or req.stream_options is None, "stream_options requires stream=true", "stream")
    include_usage = bool(req.stream_options and req.stream_options.include_usage)
    return Plan(req.model, prompts, n, options, stream, include_usage)


def parse_prompt(value: Any) -> list[Prompt]:
    """A string, a list of strings, token ids, or a list of token-id lists."""
    if isinstance(value, str):
        return [TextPrompt(value)]
    if isinstance(value, list) and value:
        if all(isinstance(v, str) for v in value):
            return [TextPrompt(v) for v in value]
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return [TokenPrompt(tuple(value))]
        if all(
            isinstance(v, list)
            and v
            and all(isinstance(t, int) and not isinstance(t, bool) for t in v)
            for v in value
        ):
            return [TokenPrompt(tuple(v)) for v in value]
    raise InvalidRequest(
        "prompt must be a string, a list of strings, a non-empty list of token ids or a list "
        "of non-empty token-id lists",
        param="prompt",
    )


def plan_completion(body: bytes) -> Plan:
    req: CompletionRequest = decode(body, _completion_decoder)
    prompts = parse_prompt(req.prompt)
    _check(req.best_of in (None, 1, req.n), "best_of is not supported (use n)", "best_of")
    if req.logprobs is not None:
        _check(0 <= req.logprobs <= 5, "logprobs must be between 0 and 5", "logprobs")
        _check(not req.echo, "echo together with logprobs is not supported", "echo")
    options = _options(req, req.max_tokens, req.logprobs)
    return _common(req, prompts, replace(options, echo=bool(req.echo)))


def plan_chat(body: bytes) -> Plan:
    req: ChatRequest = decode(body, _chat_decoder)
    _check(bool(req.messages), "messages must hold at least one message", "messages")
    messages: list[dict[str, str]] = []
    for i, m in enumerate(req.messages):
        _check(
            m.role in ("system", "developer", "user", "assistant"),
            f"messages[{i}].role {m.role!r} is not supported (system, user, assistant)",
            f"messages[{i}].role",
        )
        if isinstance(m.content, list):
            for j, part in enumerate(m.content):
                _check(
                    part.type == "text" and part.text is not None,
                    "only text content parts are supported",
                    f"messages[{i}].content[{j}]",
                )
            content = "".join(p.text or "" for p in m.content)
        else:
            content = m.content or ""
        role = "system" if m.role == "developer" else m.role
        messages.append({"role": role, "content": content})
    top: int | None = None
    if req.logprobs:
        top = req.top_logprobs or 0
        _check(0 <= top <= 20, "top_logprobs must be between 0 and 20", "top_logprobs")
    else:
        _check(req.top_logprobs is None, "top_logprobs requires logprobs=true", "top_logprobs")
    max_tokens = (
        req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    )
    options = _options(req, max_tokens, top)
    return _common(req, [ChatPrompt(tuple(messages))], options)
