"""``POST /v1/embeddings`` (OpenAI shape, plus TEI-style extensions)."""

from __future__ import annotations

import asyncio
import base64
from typing import Any, Literal

import msgspec
import orjson
from aiohttp import web

from sluiceway.api.context import ApiContext
from sluiceway.api.decode import decode
from sluiceway.errors import InvalidRequest
from sluiceway.providers.base import EmbedOptions, EmbedResult

#: Responses with more vectors than this are encoded on a worker thread, not on the loop.
OFFLOAD_ROWS = 64


class EmbeddingsRequest(msgspec.Struct, forbid_unknown_fields=True):
    model: str
    input: Any
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None
    user: str | None = None
    # extensions
    truncate: bool | None = None
    truncation_direction: Literal["right", "left"] = "right"
    normalize: bool = True


_decoder = msgspec.json.Decoder(EmbeddingsRequest)


def parse_input(value: Any) -> list[str] | list[list[int]]:
    """A string, a list of strings, a token-id list, or a list of token-id lists."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise InvalidRequest(
            "input must be a non-empty string, a list of strings, or token ids", param="input"
        )
    if all(isinstance(v, str) for v in value):
        for i, text in enumerate(value):
            if not text:
                raise InvalidRequest(f"input[{i}] is an empty string", param=f"input[{i}]")
        return value
    if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return [value]
    if all(isinstance(v, list) for v in value):
        for i, ids in enumerate(value):
            if not ids or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
                raise InvalidRequest(
                    f"input[{i}] must be a non-empty list of token ids", param=f"input[{i}]"
                )
        return value
    raise InvalidRequest(
        "input must be a string, a list of strings, a list of token ids or a list of lists "
        "of token ids (not a mix)",
        param="input",
    )


def encode_response(result: EmbedResult, model: str, fmt: str) -> bytes:
    vectors = result.vectors
    if fmt == "base64":
        little = vectors.astype("<f4", copy=False)
        items: list[dict[str, Any]] = [
            {
                "object": "embedding",
                "index": i,
                "embedding": base64.b64encode(row.tobytes()).decode(),
            }
            for i, row in enumerate(little)
        ]
    else:
        items = [
            {"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(vectors)
        ]
    body = {
        "object": "list",
        "data": items,
        "model": model,
        "usage": {"prompt_tokens": result.prompt_tokens, "total_tokens": result.prompt_tokens},
    }
    return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)


async def handle_embeddings(request: web.Request, body: bytes, ctx: ApiContext) -> web.Response:
    req = decode(body, _decoder)
    inputs = parse_input(req.input)
    if req.dimensions is not None and req.dimensions < 1:
        raise InvalidRequest("dimensions must be a positive integer", param="dimensions")
    embedder = ctx.registry.embedder(req.model)
    options = EmbedOptions(
        truncate=req.truncate,
        truncation_direction=req.truncation_direction,
        normalize=req.normalize,
        dimensions=req.dimensions,
    )
    deadline = ctx.deadline(request.headers.get("X-Request-Timeout"))
    result = await embedder.embed(inputs, options, deadline)
    if len(result.vectors) > OFFLOAD_ROWS:
        payload = await asyncio.to_thread(encode_response, result, req.model, req.encoding_format)
    else:
        payload = encode_response(result, req.model, req.encoding_format)
    return web.Response(
        body=payload,
        content_type="application/json",
        headers={"X-Truncated-Inputs": str(result.truncated)},
    )


__all__ = ["EmbeddingsRequest", "encode_response", "handle_embeddings", "parse_input"]
