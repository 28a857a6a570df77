"""Exceptions → OpenAI-shaped HTTP error responses."""

from __future__ import annotations

import math

from aiohttp import web

from sluiceway.errors import Overloaded, SluicewayError

JSON = "application/json"


def error_response(exc: SluicewayError) -> web.Response:
    headers = {}
    if isinstance(exc, Overloaded):
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    return web.Response(status=exc.status, body=exc.encode(), content_type=JSON, headers=headers)


def reason_of(exc: SluicewayError) -> str:
    """The bounded ``reason`` label of the failures counter."""
    status = exc.status
    if status == 429:
        return "overloaded"
    if status == 504:
        return "timeout"
    if status == 503:
        return "unavailable"
    if status == 502:
        return "upstream"
    if status == 500:
        return "engine"
    return "validation"
