"""The one exception tree of sluiceway, and the OpenAI error shape.

Everything below the API edge raises one of these; only ``sluiceway.api`` turns them into
HTTP status codes (via :attr:`SluicewayError.status`). Foreign exceptions are mapped at the
boundary where they enter (engine threads, upstream I/O)::

    SluicewayError
    ├── InvalidRequest            400  malformed or semantically invalid input
    │   └── SchemaError           422  body does not match the schema (wrong types, unknown fields)
    ├── Unauthorized              401  missing or wrong API key
    ├── NotFound                  404  unknown model or path
    ├── MethodNotAllowed          405
    ├── PayloadTooLarge           413  body bytes, inputs or tokens over a configured limit
    ├── Overloaded                429  admission refused; carries retry_after seconds
    ├── RequestTimeout            504  the request's deadline passed before it was served
    ├── Unavailable               503  not ready, draining, no healthy backend
    ├── UpstreamError             502  a backend failed in a way we cannot hide
    └── EngineError               500  the model runtime failed for this batch (not a crash)
"""

from __future__ import annotations

from typing import Any

import msgspec


class SluicewayError(Exception):
    """Base of every error sluiceway raises on purpose."""

    status: int = 500
    type: str = "server_error"
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code

    def body(self) -> dict[str, Any]:
        """The OpenAI error body: ``{"error": {"message", "type", "param", "code"}}``."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def encode(self) -> bytes:
        return msgspec.json.encode(self.body())


class InvalidRequest(SluicewayError):
    status = 400
    type = "invalid_request_error"


class SchemaError(InvalidRequest):
    status = 422


class Unauthorized(SluicewayError):
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class NotFound(SluicewayError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class MethodNotAllowed(SluicewayError):
    status = 405
    type = "invalid_request_error"
    code = "method_not_allowed"


class PayloadTooLarge(SluicewayError):
    status = 413
    type = "invalid_request_error"
    code = "payload_too_large"


class Overloaded(SluicewayError):
    """Admission refused. ``retry_after`` is sent as the ``Retry-After`` header."""

    status = 429
    type = "rate_limit_error"
    code = "overloaded"

    def __init__(self, message: str, *, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RequestTimeout(SluicewayError):
    status = 504
    type = "timeout_error"
    code = "timeout"


class Unavailable(SluicewayError):
    status = 503
    type = "service_unavailable"
    code = "unavailable"


class UpstreamError(SluicewayError):
    status = 502
    type = "upstream_error"
    code = "bad_gateway"


class EngineError(SluicewayError):
    status = 500
    type = "server_error"
    code = "engine_error"
