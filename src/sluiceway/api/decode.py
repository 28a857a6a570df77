"""Reading and decoding request bodies at the edge (msgspec), with OpenAI-shaped failures."""

from __future__ import annotations

from typing import TypeVar

import msgspec
from aiohttp import web

from sluiceway.errors import InvalidRequest, PayloadTooLarge, SchemaError

T = TypeVar("T")


class _ModelOnly(msgspec.Struct):
    model: str | None = None


_model_decoder = msgspec.json.Decoder(_ModelOnly)


async def read_body(request: web.Request, limit: int) -> bytes:
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(f"request body of {request.content_length} bytes exceeds {limit}")
    body = await request.content.read(limit + 1)
    # content.read(n) may return less than n before EOF; keep reading until EOF or over limit.
    while len(body) <= limit and not request.content.at_eof():
        chunk = await request.content.read(limit + 1 - len(body))
        if not chunk:
            break
        body += chunk
    if len(body) > limit:
        raise PayloadTooLarge(f"request body exceeds {limit} bytes")
    return body


def model_of(body: bytes) -> str:
    """The ``model`` field, decoded without decoding the rest."""
    try:
        model = _model_decoder.decode(body).model
    except msgspec.DecodeError as e:
        raise InvalidRequest(f"the body is not valid JSON: {e}") from None
    except msgspec.ValidationError as e:
        raise SchemaError(f"invalid request: {e}", param="model") from None
    if not model:
        raise InvalidRequest("you must provide a model parameter", param="model")
    return model


def decode(body: bytes, decoder: msgspec.json.Decoder[T]) -> T:
    """Decode and validate a request body.

    Malformed JSON and unsupported parameters (unknown fields, never silently ignored) are 400;
    a known field with a value of the wrong type or shape is 422.
    """
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as e:
        text = str(e)
        param = text.rpartition("at `$.")[2].rstrip("`") if "at `$." in text else None
        if text.startswith("Object contains unknown field"):
            field = text.split("`")[1] if "`" in text else None
            raise InvalidRequest(
                f"{text}; this server does not support that parameter",
                param=field,
                code="unsupported_parameter",
            ) from None
        raise SchemaError(f"invalid request: {text}", param=param) from None
    except msgspec.DecodeError as e:
        raise InvalidRequest(f"the body is not valid JSON: {e}") from None
