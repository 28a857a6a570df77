"""Pool snapshots: a reload keeps the state of backends that stay; invalid settings reject."""

from __future__ import annotations

import msgspec
import pytest

from sluiceway.config.upstream import BackendSettings, UpstreamModelSettings
from sluiceway.observability.metrics import Metrics
from sluiceway.upstream.backend import Backend
from sluiceway.upstream.pool import Pool


def model(*urls: str, **kw: object) -> UpstreamModelSettings:
    return UpstreamModelSettings(
        id="m",
        backends=tuple(BackendSettings(u) for u in urls),
        **kw,  # type: ignore[arg-type]
    )


def test_swap_reuses_backends_by_url_and_forgets_the_rest() -> None:
    metrics = Metrics()
    pool = Pool(model("http://a:1", "http://b:1/"), metrics)
    a, b = pool.snapshot.backends
    a.acquire(0.0)  # a request in flight on a
    snapshot = pool.prepare(model("http://b:1", "http://c:1", policy="round_robin"))
    gone = pool.swap(snapshot)
    assert gone == [a]
    assert pool.snapshot.backends[0] is b
    assert pool.selector.policy == "round_robin"
    assert a.in_flight == 1  # the request keeps its backend; releasing it is harmless
    a.release(0.0, "success")
    assert a.in_flight == 0
    assert 'backend="a:1"' not in metrics.render().decode()


def test_weights_change_in_place() -> None:
    pool = Pool(model("http://a:1"), Metrics())
    a = pool.snapshot.backends[0]
    pool.swap(
        pool.prepare(
            UpstreamModelSettings(id="m", backends=(BackendSettings("http://a:1", weight=3),))
        )
    )
    assert pool.snapshot.backends[0] is a and a.weight == 3


def test_admin_snapshots() -> None:
    pool = Pool(model("http://a:1"), Metrics())
    pool.swap(pool.with_backend(BackendSettings("http://b:1")))
    assert [b.url for b in pool.snapshot.backends] == ["http://a:1", "http://b:1"]
    with pytest.raises(ValueError):
        pool.with_backend(BackendSettings("http://b:1/"))
    pool.swap(pool.without_backend("http://a:1"))
    with pytest.raises(ValueError):
        pool.without_backend("http://b:1")  # the last one stays
    with pytest.raises(KeyError):
        pool.without_backend("http://zzz:1")


@pytest.mark.parametrize(
    "bad",
    [
        {"backends": []},
        {"backends": [{"url": "http://a:1"}, {"url": "http://a:1/"}]},
        {"backends": [{"url": "a:1"}]},
        {"backends": [{"url": "http://a:1", "weight": 0}]},
        {"backends": [{"url": "http://a:1"}], "load_factor": 0.5},
        {"backends": [{"url": "http://a:1"}], "health": {"interval_s": 0}},
    ],
)
def test_invalid_settings_are_rejected(bad: dict[str, object]) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"engine": "upstream", "id": "m", **bad}, UpstreamModelSettings)


def test_probe_thresholds() -> None:
    from sluiceway.config.upstream import BreakerSettings, HealthSettings

    b = Backend(
        BackendSettings("http://a:1"),
        "m",
        HealthSettings(unhealthy_threshold=2, healthy_threshold=3),
        BreakerSettings(),
        Metrics(),
    )
    assert not b.record_probe(False) and b.healthy
    assert b.record_probe(False) and not b.healthy
    assert not b.record_probe(True) and not b.record_probe(True)
    assert b.record_probe(True) and b.healthy
    assert "healthy" in repr(b)
