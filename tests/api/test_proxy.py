"""Header handling of the proxy edge (no sockets needed)."""

from __future__ import annotations

from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict, CIMultiDictProxy

from sluiceway.api.context import ApiContext
from sluiceway.api.proxy import response_headers, upstream_headers
from sluiceway.config.upstream import BackendSettings, UpstreamModelSettings
from sluiceway.observability.metrics import Metrics
from sluiceway.providers.base import ServiceContext
from sluiceway.providers.registry import Registry
from sluiceway.providers.upstream import UpstreamService
from sluiceway.testing import ManualClock, settings


def make(
    api_key: str = "", server_keys: tuple[str, ...] = ()
) -> tuple[UpstreamService, ApiContext]:
    s = settings(api_keys=server_keys)
    model = UpstreamModelSettings(
        id="m", backends=(BackendSettings("http://127.0.0.1:1"),), api_key=api_key
    )
    metrics, clock = Metrics(), ManualClock()
    svc = UpstreamService(model, ServiceContext(metrics, clock, s.server))
    return svc, ApiContext(metrics, clock, s.server, Registry())


def test_hop_by_hop_dropped_and_forwarding_headers_set() -> None:
    svc, ctx = make()
    req = make_mocked_request(
        "POST",
        "/v1/chat/completions",
        headers=CIMultiDict(
            {
                "Host": "gw",
                "Connection": "keep-alive, X-Private",
                "X-Private": "1",
                "Keep-Alive": "timeout=5",
                "Transfer-Encoding": "chunked",
                "Content-Length": "10",
                "Authorization": "Bearer user",
                "X-Forwarded-For": "10.0.0.1",
                "X-Custom": "kept",
            }
        ),
    )
    out = upstream_headers(req, svc, ctx, "rid-1")
    for gone in ("Host", "Connection", "X-Private", "Keep-Alive", "Transfer-Encoding"):
        assert gone not in out
    assert "Content-Length" not in out
    assert out["X-Custom"] == "kept"
    assert out["Authorization"] == "Bearer user"  # no gateway keys: passed through
    assert out["X-Request-Id"] == "rid-1"
    assert out["X-Forwarded-For"].startswith("10.0.0.1, ")
    assert out["Content-Type"] == "application/json"


def test_gateway_keys_never_leak_upstream_and_the_pool_key_is_sent() -> None:
    svc, ctx = make(server_keys=("gw-key",))
    out = upstream_headers(
        make_mocked_request(
            "POST", "/v1/x", headers=CIMultiDict({"Authorization": "Bearer gw-key"})
        ),
        svc,
        ctx,
        "r",
    )
    assert "Authorization" not in out
    svc, ctx = make(api_key="backend-key")
    out = upstream_headers(
        make_mocked_request("POST", "/v1/x", headers=CIMultiDict({"Authorization": "Bearer u"})),
        svc,
        ctx,
        "r",
    )
    assert out["Authorization"] == "Bearer backend-key"


def test_response_headers_drop_hop_by_hop_and_length() -> None:
    upstream = CIMultiDictProxy(
        CIMultiDict(
            {
                "Content-Type": "text/event-stream",
                "Transfer-Encoding": "chunked",
                "Content-Length": "5",
                "Connection": "close",
                "X-Backend-Thing": "1",
            }
        )
    )
    out = response_headers(upstream, "rid")
    assert dict(out) == {
        "Content-Type": "text/event-stream",
        "X-Backend-Thing": "1",
        "X-Request-Id": "rid",
    }
