"""/v1/embeddings through a real server on 127.0.0.1 with the real default model."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import numpy as np
import openai
import pytest

from sluiceway.app import Gateway
from sluiceway.config.settings import BatchingSettings, EncoderModelSettings, default_models
from sluiceway.testing import running_gateway, settings

MODEL = "all-minilm-l6-v2"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def server() -> AsyncIterator[str]:
    (minilm,) = [m for m in default_models() if isinstance(m, EncoderModelSettings)]
    import msgspec

    small = msgspec.structs.replace(
        minilm,
        batching=BatchingSettings(max_inputs_per_request=64, max_tokens_per_request=4096),
    )
    s = settings((small,), max_body_bytes=200_000)
    async with running_gateway(Gateway(s)) as g:
        yield g.url


@pytest.fixture
async def client(server: str) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=server + "/v1", api_key="unused", max_retries=0) as c:
        yield c


async def post(server: str, body: object, path: str = "/v1/embeddings") -> tuple[int, dict, dict]:  # type: ignore[type-arg]
    async with aiohttp.ClientSession() as s, s.post(server + path, json=body) as r:
        return r.status, await r.json(content_type=None), dict(r.headers)


@pytest.mark.anyio
async def test_openai_client_float_and_base64(client: openai.AsyncOpenAI) -> None:
    texts = ["The quick brown fox.", "Un renard brun rapide.", "🦊"]
    as_b64 = await client.embeddings.create(model=MODEL, input=texts)  # client asks for base64
    as_float = await client.embeddings.create(model=MODEL, input=texts, encoding_format="float")
    assert [d.index for d in as_float.data] == [0, 1, 2]
    a = np.array([d.embedding for d in as_b64.data])
    b = np.array([d.embedding for d in as_float.data])
    assert a.shape == (3, 384)
    np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    assert as_float.usage.prompt_tokens == as_float.usage.total_tokens > 3
    assert as_float.model == MODEL


@pytest.mark.anyio
async def test_alias_dimensions_and_normalize(server: str, client: openai.AsyncOpenAI) -> None:
    full = await client.embeddings.create(model=MODEL, input="hello", encoding_format="float")
    alias = await client.embeddings.create(
        model="sentence-transformers/all-MiniLM-L6-v2", input="hello", encoding_format="float"
    )
    short = await client.embeddings.create(
        model=MODEL, input="hello", dimensions=64, encoding_format="float"
    )
    v = np.array(full.data[0].embedding)
    np.testing.assert_allclose(v, alias.data[0].embedding, atol=1e-6)
    s = np.array(short.data[0].embedding)
    assert s.shape == (64,)
    np.testing.assert_allclose(s, v[:64] / np.linalg.norm(v[:64]), atol=1e-5)
    status, body, _ = await post(server, {"model": MODEL, "input": "hello", "normalize": False})
    raw = np.array(body["data"][0]["embedding"])
    assert status == 200 and abs(np.linalg.norm(raw) - 1.0) > 1e-3
    np.testing.assert_allclose(raw / np.linalg.norm(raw), v, atol=1e-5)


@pytest.mark.anyio
async def test_token_id_inputs_match_text(server: str) -> None:
    _, text, _ = await post(server, {"model": MODEL, "input": "hello world"})
    _, ids, _ = await post(server, {"model": MODEL, "input": [7592, 2088]})
    _, many, _ = await post(server, {"model": MODEL, "input": [[7592, 2088], [7592]]})
    np.testing.assert_allclose(text["data"][0]["embedding"], ids["data"][0]["embedding"], atol=1e-6)
    np.testing.assert_allclose(ids["data"][0]["embedding"], many["data"][0]["embedding"], atol=1e-6)
    assert ids["usage"]["prompt_tokens"] == 4  # [CLS] hello world [SEP]
    assert many["usage"]["prompt_tokens"] == 7


@pytest.mark.anyio
async def test_truncation_is_explicit_and_reported(server: str) -> None:
    long = "word " * 400
    status, body, headers = await post(server, {"model": MODEL, "input": ["short", long]})
    assert status == 200 and headers["X-Truncated-Inputs"] == "1"
    assert body["usage"]["prompt_tokens"] == 3 + 256
    status, err, _ = await post(server, {"model": MODEL, "input": ["ok", long], "truncate": False})
    assert status == 400
    msg = err["error"]["message"]
    assert "input[1]" in msg and "402" in msg and "256" in msg
    assert err["error"]["param"] == "input[1]"
    right = (await post(server, {"model": MODEL, "input": "alpha " * 300 + "omega"}))[1]
    left = (
        await post(
            server,
            {"model": MODEL, "input": "alpha " * 300 + "omega", "truncation_direction": "left"},
        )
    )[1]
    assert not np.allclose(right["data"][0]["embedding"], left["data"][0]["embedding"])


BAD_INPUTS = [
    ({"model": MODEL, "input": ""}, 400, "input[0]"),
    ({"model": MODEL, "input": []}, 400, "input"),
    ({"model": MODEL, "input": ["a", ""]}, 400, "input[1]"),
    ({"model": MODEL, "input": ["a", 1]}, 400, "input"),
    ({"model": MODEL, "input": 5}, 400, "input"),
    ({"model": MODEL, "input": [[]]}, 400, "input[0]"),
    ({"model": MODEL, "input": [[1, "x"]]}, 400, "input[0]"),
    ({"model": MODEL, "input": [99999999]}, 400, "input[0]"),
    ({"model": MODEL, "input": "a", "dimensions": 0}, 400, "dimensions"),
    ({"model": MODEL, "input": "a", "dimensions": 385}, 400, "dimensions"),
    ({"model": MODEL, "input": "a", "encoding_format": "int8"}, 422, "encoding_format"),
    ({"model": MODEL, "input": "a", "bogus": 1}, 400, "bogus"),
    ({"input": "a"}, 400, "model"),
    ({"model": "nope", "input": "a"}, 404, "model"),
    ({"model": MODEL, "input": ["x"] * 65}, 413, "input"),
    ({"model": MODEL, "input": ["word " * 250] * 20}, 413, "input"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("body", "status", "param"), BAD_INPUTS)
async def test_bad_input_gets_an_openai_error(
    server: str,
    body: dict,
    status: int,
    param: str | None,  # type: ignore[type-arg]
) -> None:
    got, err, _ = await post(server, body)
    assert got == status, err
    assert set(err["error"]) == {"message", "type", "param", "code"}
    assert err["error"]["message"]
    if param is not None:
        assert err["error"]["param"] == param


@pytest.mark.anyio
async def test_http_level_errors(server: str) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.post(server + "/v1/embeddings", data=b"{not json") as r:
            assert r.status == 400 and (await r.json())["error"]["type"] == "invalid_request_error"
        async with s.post(server + "/v1/embeddings", data=b"x" * 300_000) as r:
            assert r.status == 413 and "error" in await r.json()
        async with s.get(server + "/v1/embeddings") as r:
            assert r.status == 405 and "error" in await r.json()
        async with s.get(server + "/nowhere") as r:
            assert r.status == 404 and "error" in await r.json()
        async with s.post(server + "/v1/rerank", json={"model": MODEL}) as r:
            assert r.status == 404 and "error" in await r.json()


@pytest.mark.anyio
async def test_models_health_ready_metrics(server: str) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.get(server + "/v1/models") as r:
            ids = {m["id"] for m in (await r.json())["data"]}
            assert ids == {MODEL, "sentence-transformers/all-MiniLM-L6-v2"}
        async with s.get(server + "/health") as r:
            assert r.status == 200
        async with s.get(server + "/ready") as r:
            assert r.status == 200
        await post(server, {"model": MODEL, "input": ["a b c", "d"]})
        async with s.get(server + "/metrics") as r:
            text = await r.text()
    for name in (
        "sluiceway_requests_total",
        "sluiceway_request_duration_seconds_bucket",
        "sluiceway_queue_wait_seconds_bucket",
        "sluiceway_tokenize_duration_seconds_bucket",
        "sluiceway_inference_duration_seconds_bucket",
        "sluiceway_batch_size_bucket",
        "sluiceway_batch_tokens_bucket",
        "sluiceway_queue_depth",
        "sluiceway_input_tokens_total",
        "sluiceway_truncations_total",
        "sluiceway_failures_total",
    ):
        assert name in text, name
    assert (
        'sluiceway_requests_total{endpoint="/v1/embeddings",model="all-minilm-l6-v2",status="200"}'
        in text
    )
