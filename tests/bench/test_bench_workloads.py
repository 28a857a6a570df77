from __future__ import annotations

import random
from importlib import resources

import msgspec
import pytest

from sluiceway.bench import workloads
from sluiceway.errors import InvalidRequest


def _tokenizer():  # type: ignore[no-untyped-def]
    tokenizers = pytest.importorskip("tokenizers")
    path = resources.files("sluiceway") / "models" / "minilm" / "tokenizer.json"
    if not path.is_file():
        pytest.skip("the MiniLM tokenizer.json is not in the package")
    tok = tokenizers.Tokenizer.from_str(path.read_text(encoding="utf-8"))
    tok.no_padding()
    tok.no_truncation()
    return tok


def _tokens(text: str) -> int:
    """Our own count: every word is one token, and so is every period."""
    return len(text.split()) + text.count(".")


def test_texts_are_deterministic() -> None:
    assert workloads.make_texts("mixed", 20, seed=3) == workloads.make_texts("mixed", 20, seed=3)
    assert workloads.make_texts("short", 20, seed=3) != workloads.make_texts("short", 20, seed=4)


@pytest.mark.parametrize("n", [2, 3, 9, 15, 16, 130, 250])
def test_make_text_hits_the_exact_count(n: int) -> None:
    rng = random.Random(n)
    for _ in range(20):
        text = workloads.make_text(rng, n)
        assert _tokens(text) == n
        assert text.endswith(".")
        assert text[0].isupper()


def test_input_sets_have_their_lengths() -> None:
    assert {_tokens(t) for t in workloads.make_texts("short", 50)} == {workloads.SHORT_TOKENS}
    assert {_tokens(t) for t in workloads.make_texts("long", 10)} == {workloads.LONG_TOKENS}
    mixed = [_tokens(t) for t in workloads.make_texts("mixed", 300)]
    lo, hi = workloads.MIXED_RANGE
    assert lo <= min(mixed) and max(mixed) <= hi
    assert len(set(mixed)) > 50


def test_wordpiece_counts_match_with_the_model_tokenizer() -> None:
    tok = _tokenizer()
    vocab = tok.get_vocab()
    assert sorted(w for w in workloads.VOCABULARY if w not in vocab) == []
    for inputs in workloads.INPUT_SETS:
        for text in workloads.make_texts(inputs, 30, seed=1):
            # + [CLS] and [SEP]
            assert len(tok.encode(text).ids) == _tokens(text) + 2


def test_embeddings_bodies() -> None:
    one = workloads.embeddings("m", "short", 1)
    body = msgspec.json.decode(one.body(0))
    assert body["model"] == "m"
    assert isinstance(body["input"], str)
    assert one.path == "/v1/embeddings"
    assert one.items_per_request == 1
    assert not one.stream

    many = workloads.embeddings("m", "long", 32, encoding_format="base64")
    body = msgspec.json.decode(many.body(7))
    assert len(body["input"]) == 32
    assert body["encoding_format"] == "base64"
    assert many.items_per_request == 32
    assert many.describe()["inputs"] == "long"


def test_bodies_cycle_through_a_bounded_pool() -> None:
    wl = workloads.embeddings("m", "short", 1, distinct_bodies=4)
    assert wl.body(0) == wl.body(4)
    assert len({wl.body(i) for i in range(4)}) == 4
    big = workloads.embeddings("m", "short", 2048)  # pool capped at ~4096 texts
    assert big.body(0) == big.body(2)


def test_chat_bodies() -> None:
    wl = workloads.chat(
        "llm", prompt_tokens=20, max_tokens=8, stream=True, system_tokens=30, prefixes=2
    )
    bodies = [msgspec.json.decode(wl.body(i)) for i in range(50)]
    assert wl.path == "/v1/chat/completions"
    assert wl.stream
    assert all(b["stream"] is True and b["max_tokens"] == 8 for b in bodies)
    assert [m["role"] for m in bodies[0]["messages"]] == ["system", "user"]
    assert len({b["messages"][0]["content"] for b in bodies}) == 2  # two shared prefixes
    assert _tokens(bodies[0]["messages"][1]["content"]) == 20

    plain = msgspec.json.decode(workloads.chat("llm").body(0))
    assert [m["role"] for m in plain["messages"]] == ["user"]
    assert plain["stream"] is False


def test_completion_bodies() -> None:
    wl = workloads.completions("llm", prompt_tokens=12, max_tokens=4, system_tokens=10)
    body = msgspec.json.decode(wl.body(0))
    assert wl.path == "/v1/completions"
    assert _tokens(body["prompt"]) == 22
    assert body["max_tokens"] == 4


@pytest.mark.parametrize(
    "build",
    [
        lambda: workloads.embeddings("m", "short", 0),
        lambda: workloads.embeddings("m", "huge", 1),  # type: ignore[arg-type]
        lambda: workloads.chat("m", max_tokens=0),
        lambda: workloads.completions("m", prompt_tokens=1),
    ],
)
def test_bad_parameters_raise(build) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidRequest):
        build()
