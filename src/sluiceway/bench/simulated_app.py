"""The HTTP face of one simulated backend: OpenAI-compatible routes over a SimulatedEngine.

Routes (aiohttp.web)::

    POST /v1/chat/completions   chat; stream or not; usage.prompt_tokens_details.cached_tokens
    POST /v1/completions        text completion (prompt: a string or a list of strings)
    POST /v1/embeddings         deterministic 8-dimension vectors (no timing model)
    GET  /v1/models             the configured model name (any name is accepted in requests)
    GET  /health                200, or 503 under the ``unhealthy`` fault
    GET  /metrics               Prometheus text: requests, tokens, running/queued sequences
    GET  /_stats                the engine's statistics() as JSON
    POST /_reset                empty the cache, zero the counters
    GET|POST /_fault            read or set the injected fault (a JSON Fault)

A chat prompt is rendered as ``<|role|> content`` per message, in order, so every turn of a
conversation extends the previous turn's prompt and hits its cached blocks. Streams follow
OpenAI's chunk shape: the first chunk carries the role and the first token (sent after
prefill, so time to first chunk is queueing + prefill), one chunk per token, a last chunk with
``finish_reason``, an optional usage chunk (``stream_options.include_usage``), ``[DONE]``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import msgspec
import xxhash
from aiohttp import web

from sluiceway.bench.simulated_cache import tokenize
from sluiceway.bench.simulated_engine import Fault, SimulatedEngine
from sluiceway.errors import InvalidRequest

_WORDS = ("the", "model", "says", "hello", "to", "you", "and", "then", "stops", "here")
_ids = itertools.count(1)


class FaultControl(Protocol):
    """What the ``/_fault`` route needs from its backend (``refuse`` closes the listener)."""

    async def set_fault(self, fault: Fault) -> None: ...


def _error(status: int, message: str, kind: str = "invalid_request_error") -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return web.Response(
        status=status, body=msgspec.json.encode(body), content_type="application/json"
    )


def _json(doc: object) -> web.Response:
    return web.Response(body=msgspec.json.encode(doc), content_type="application/json")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def render_chat(messages: Any) -> str:
    """The simulated prompt text of a chat request (raises InvalidRequest when malformed)."""
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("messages must be a non-empty list", param="messages")
    parts = []
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise InvalidRequest("each message needs a role", param="messages")
        parts.append(f"<|{m['role']}|> {_text(m.get('content'))}")
    return " ".join(parts)


def render_prompt(prompt: Any) -> str:
    """The prompt text of a completions request: a string, or a list of strings joined."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and all(isinstance(p, str | int) for p in prompt):
        return " ".join(str(p) for p in prompt)
    raise InvalidRequest("prompt must be a string or a list of strings", param="prompt")


def _max_tokens(body: dict[str, Any], default: int) -> int:
    value = body.get("max_completion_tokens", body.get("max_tokens"))
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidRequest("max_tokens must be an integer >= 1", param="max_tokens")
    return value


def _word(i: int) -> str:
    return (" " if i else "") + _WORDS[i % len(_WORDS)]


class _Generation:
    """One request's shape: ids, model, kind; builds the OpenAI documents."""

    __slots__ = ("chat", "created", "id", "model", "prompt_tokens")

    def __init__(self, chat: bool, model: str, prompt_tokens: int) -> None:
        self.chat = chat
        self.id = f"{'chatcmpl' if chat else 'cmpl'}-sim{next(_ids)}"
        self.created = int(time.time())
        self.model = model
        self.prompt_tokens = prompt_tokens

    def usage(self, completion: int, cached: int) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": self.prompt_tokens + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        }

    def _choice(self, text: str | None, finish: str | None, first: bool) -> dict[str, Any]:
        if not self.chat:
            return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}
        delta: dict[str, str] = {}
        if first:
            delta["role"] = "assistant"
        if text is not None:
            delta["content"] = text
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

    def chunk(self, text: str | None, finish: str | None = None, first: bool = False) -> bytes:
        doc = {
            "id": self.id,
            "object": "chat.completion.chunk" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [self._choice(text, finish, first)],
        }
        return b"data: " + msgspec.json.encode(doc) + b"\n\n"

    def usage_chunk(self, completion: int, cached: int) -> bytes:
        doc: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": self.usage(completion, cached),
        }
        return b"data: " + msgspec.json.encode(doc) + b"\n\n"

    def document(self, text: str, completion: int, cached: int) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": "length"}
        if self.chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return {
            "id": self.id,
            "object": "chat.completion" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": self.usage(completion, cached),
        }


def _drop_connection(request: web.Request) -> None:
    if request.transport is not None:
        request.transport.abort()
    raise ConnectionResetError("simulated backend died mid-stream")


async def _stream(
    request: web.Request,
    engine: SimulatedEngine,
    gen: _Generation,
    max_tokens: int,
    cached: int,
    *,
    die: bool,
    include_usage: bool,
) -> web.StreamResponse:
    resp = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await resp.prepare(request)
    interval = engine.token_interval
    after = engine.fault.after_chunks
    for i in range(max_tokens):
        if die and i >= after:
            _drop_connection(request)
        if i and interval:
            await asyncio.sleep(interval)
        await resp.write(gen.chunk(_word(i), first=i == 0))
        engine.counters.generated_tokens += 1
    if die:
        _drop_connection(request)
    await resp.write(gen.chunk(None if gen.chat else "", finish="length"))
    if include_usage:
        await resp.write(gen.usage_chunk(max_tokens, cached))
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


def make_app(engine: SimulatedEngine, control: FaultControl) -> web.Application:
    """The aiohttp application of one simulated backend."""
    settings = engine.settings

    async def generate(request: web.Request, chat: bool) -> web.StreamResponse:
        try:
            body = msgspec.json.decode(await request.read())
            if not isinstance(body, dict):
                raise InvalidRequest("the body must be a JSON object")
            text = render_chat(body.get("messages")) if chat else render_prompt(body.get("prompt"))
            max_tokens = _max_tokens(body, settings.default_max_tokens)
        except msgspec.DecodeError as exc:
            return _error(400, f"invalid JSON: {exc}")
        except InvalidRequest as exc:
            return _error(400, exc.message)
        if engine.fault_hits("oom"):
            return _error(503, "CUDA out of memory. Tried to allocate 2.00 GiB", "server_error")
        stream = bool(body.get("stream"))
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        tokens = tokenize(text)
        gen = _Generation(chat, str(body.get("model") or settings.model), len(tokens))
        try:
            async with engine.sequence():
                if engine.fault_hits("slow"):
                    await asyncio.sleep(engine.fault.delay_ms / 1e3)
                cached = await engine.prefill(tokens)
                die = engine.fault_hits("die_mid_stream")
                if stream:
                    resp = await _stream(
                        request,
                        engine,
                        gen,
                        max_tokens,
                        cached,
                        die=die,
                        include_usage=include_usage,
                    )
                else:
                    if die:
                        _drop_connection(request)
                    if engine.token_interval:
                        await asyncio.sleep(engine.token_interval * (max_tokens - 1))
                    engine.counters.generated_tokens += max_tokens
                    text_out = "".join(_word(i) for i in range(max_tokens))
                    resp = _json(gen.document(text_out, max_tokens, cached))
        except (asyncio.CancelledError, ConnectionError):
            engine.counters.aborted += 1
            raise
        engine.counters.completed += 1
        return resp

    async def chat_completions(request: web.Request) -> web.StreamResponse:
        return await generate(request, chat=True)

    async def completions(request: web.Request) -> web.StreamResponse:
        return await generate(request, chat=False)

    async def embeddings(request: web.Request) -> web.Response:
        try:
            body = msgspec.json.decode(await request.read())
            inputs = body["input"] if isinstance(body, dict) else None
        except (msgspec.DecodeError, KeyError):
            return _error(400, "a JSON body with `input` is required")
        texts = [inputs] if isinstance(inputs, str) else inputs
        if not isinstance(texts, list) or not texts:
            return _error(400, "input must be a string or a non-empty list")
        data = []
        for i, t in enumerate(texts):
            h = xxhash.xxh64_intdigest(str(t).encode())
            vector = [((h >> (8 * k)) & 0xFF) / 255.0 - 0.5 for k in range(8)]
            data.append({"object": "embedding", "index": i, "embedding": vector})
        n = sum(len(tokenize(str(t))) for t in texts)
        return _json(
            {
                "object": "list",
                "data": data,
                "model": str(body.get("model") or settings.model),
                "usage": {"prompt_tokens": n, "total_tokens": n},
            }
        )

    async def models(request: web.Request) -> web.Response:
        card = {"id": settings.model, "object": "model", "created": 0, "owned_by": "sluiceway-sim"}
        return _json({"object": "list", "data": [card]})

    async def health(request: web.Request) -> web.Response:
        if engine.fault.mode == "unhealthy":
            return _error(503, "unhealthy (injected fault)", "server_error")
        return _json({"status": "ok"})

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(
            text=prometheus_text(engine), content_type="text/plain", charset="utf-8"
        )

    async def stats(request: web.Request) -> web.Response:
        return _json(engine.statistics())

    async def reset(request: web.Request) -> web.Response:
        engine.reset()
        return _json(engine.statistics())

    async def get_fault(request: web.Request) -> web.Response:
        return _json(engine.fault.to_dict())

    async def post_fault(request: web.Request) -> web.StreamResponse:
        try:
            fault = msgspec.json.decode(await request.read(), type=Fault)
        except (msgspec.DecodeError, msgspec.ValidationError, InvalidRequest) as exc:
            return _error(400, f"bad fault: {exc}")
        resp = _json(fault.to_dict())
        # Answer first: `refuse` drops every open connection, this one included.
        await resp.prepare(request)
        await resp.write_eof()
        await control.set_fault(fault)
        return resp

    routes: list[tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]]] = [
        ("POST", "/v1/chat/completions", chat_completions),
        ("POST", "/v1/completions", completions),
        ("POST", "/v1/embeddings", embeddings),
        ("GET", "/v1/models", models),
        ("GET", "/health", health),
        ("GET", "/metrics", metrics),
        ("GET", "/_stats", stats),
        ("POST", "/_reset", reset),
        ("GET", "/_fault", get_fault),
        ("POST", "/_fault", post_fault),
    ]
    app = web.Application(client_max_size=64 * 1024 * 1024)
    for method, path, handler in routes:
        app.router.add_route(method, path, handler)
    return app


def prometheus_text(engine: SimulatedEngine) -> str:
    """The engine's counters in the Prometheus text exposition format."""
    c = engine.counters
    families: list[tuple[str, str, str, list[tuple[str, float]]]] = [
        ("requests_total", "counter", "Generation requests received.", [("", c.requests)]),
        ("requests_completed_total", "counter", "Requests answered in full.", [("", c.completed)]),
        ("requests_aborted_total", "counter", "Requests cut short.", [("", c.aborted)]),
        ("prompt_tokens_total", "counter", "Prompt tokens received.", [("", c.prompt_tokens)]),
        ("cached_tokens_total", "counter", "Prompt tokens cached.", [("", c.cached_tokens)]),
        ("prefill_tokens_total", "counter", "Prompt tokens computed.", [("", c.prefill_tokens)]),
        ("generated_tokens_total", "counter", "Tokens generated.", [("", c.generated_tokens)]),
        ("running_sequences", "gauge", "Sequences holding a slot.", [("", engine.running)]),
        ("queued_sequences", "gauge", "Sequences waiting for a slot.", [("", engine.queued)]),
        ("cache_blocks", "gauge", "Blocks in the prompt cache.", [("", len(engine.cache))]),
        ("cache_evictions_total", "counter", "Blocks evicted.", [("", engine.cache.evictions)]),
        (
            "faults_injected_total",
            "counter",
            "Requests struck by an injected fault.",
            [(f'{{mode="{mode}"}}', n) for mode, n in sorted(c.faults.items())],
        ),
    ]
    lines: list[str] = []
    for name, kind, help_, samples in families:
        lines.append(f"# HELP sim_{name} {help_}")
        lines.append(f"# TYPE sim_{name} {kind}")
        lines.extend(f"sim_{name}{labels} {value:g}" for labels, value in samples)
    return "\n".join(lines) + "\n"
