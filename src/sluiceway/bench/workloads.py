"""Deterministic request sets: what the load generator sends.

A :class:`Workload` is a path plus a function ``i -> body bytes``. Every body is built and
msgspec-encoded up front (a pool of distinct bodies, reused round-robin), so sending a request
costs the generator one tuple lookup.

Texts are plain-English sentences composed from a fixed word list by ``random.Random(seed)``.
Every word in the list is one whole token of the lowercase WordPiece vocabulary used by
all-MiniLM-L6-v2 (and BERT), and a sentence ends with ``.`` (one more token), so a text of
``n`` target tokens is exactly ``n`` WordPiece tokens (plus ``[CLS]``/``[SEP]``) without the
generator needing a tokenizer:

========  ======================================================
``short``  15 tokens per text (17 with the special tokens)
``long``   130 tokens per text (132 with the special tokens)
``mixed``  uniform 8..250 tokens per text, independently per text
========  ======================================================

Chat and completion prompts use the same sentences; ``system_tokens`` adds a shared system
prompt (``prefixes`` distinct ones), the shape prefix-affinity routing cares about.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import msgspec

from sluiceway.errors import InvalidRequest

InputSet = Literal["short", "long", "mixed"]
INPUT_SETS: tuple[InputSet, ...] = ("short", "long", "mixed")
SHORT_TOKENS = 15
LONG_TOKENS = 130
MIXED_RANGE = (8, 250)


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Each entry is one WordPiece token (checked against the model vocabulary in the tests).
_SUBJECTS = (
    "the team",
    "the engineer",
    "a doctor",
    "my neighbour",
    "the teacher",
    "our manager",
    "the student",
    "a farmer",
    "the pilot",
    "his sister",
    "the driver",
    "a writer",
    "the nurse",
    "their father",
    "the council",
    "a child",
    "the artist",
    "her friend",
    "the company",
    "a scientist",
    "the village",
    "the school",
    "the library",
    "the museum",
    "the police",
)
_ADJECTIVES = _words(
    "quiet small large old new early late simple strong bright dark warm cold careful busy "
    "local public private final modern ancient young happy serious quick slow clean heavy "
    "light green red blue golden open short long recent major minor common special famous"
)
_NOUNS = _words(
    "report letter garden house window road bridge market story song plan project meeting "
    "question answer picture river forest mountain village station school office table kitchen "
    "journey problem method system program message lesson record summer winter morning evening "
    "dinner machine engine camera paper book film game music"
)
_VERBS = _words(
    "opened closed found built painted wrote read moved carried checked reviewed changed "
    "finished started visited watched followed cleaned fixed sold bought sent received planned "
    "explained described discussed answered prepared delivered collected"
)
_PREPOSITIONS = _words("before after during near behind under above across through beside")
_ADVERBS = _words("quickly slowly carefully quietly finally again often always never suddenly")
_DETERMINERS = ("the", "a", "this", "that", "every", "our", "their")

VOCABULARY: frozenset[str] = frozenset(
    w
    for group in (_SUBJECTS, _ADJECTIVES, _NOUNS, _VERBS, _PREPOSITIONS, _ADVERBS, _DETERMINERS)
    for entry in group
    for w in entry.split()
)


def _sentence(rng: random.Random) -> list[str]:
    """One sentence as a list of tokens (words and the final ``.``), 9 to 14 tokens."""
    words = rng.choice(_SUBJECTS).split()
    if rng.random() < 0.3:
        words.append(rng.choice(_ADVERBS))
    words += [rng.choice(_VERBS), rng.choice(_DETERMINERS)]
    if rng.random() < 0.7:
        words.append(rng.choice(_ADJECTIVES))
    words.append(rng.choice(_NOUNS))
    if rng.random() < 0.6:
        words += [rng.choice(_PREPOSITIONS), rng.choice(_DETERMINERS), rng.choice(_NOUNS)]
    words.append(".")
    return words


def make_text(rng: random.Random, tokens: int) -> str:
    """A text of exactly ``tokens`` WordPiece tokens (without ``[CLS]``/``[SEP]``)."""
    if tokens < 2:
        raise InvalidRequest(f"a text needs at least 2 tokens, not {tokens}")
    out: list[str] = []
    while len(out) < tokens:
        out += _sentence(rng)
    del out[tokens - 1 :]
    if out and out[-1] == ".":  # the cut left an empty sentence: end the previous one later
        out[-1] = rng.choice(_ADVERBS)
    out.append(".")
    parts: list[str] = []
    capital = True
    for w in out:
        if w == ".":
            parts.append(".")
            capital = True
        else:
            parts.append((" " if parts else "") + (w.capitalize() if capital else w))
            capital = False
    return "".join(parts)


def target_tokens(inputs: InputSet, rng: random.Random) -> int:
    """Token count for the next text of an input set."""
    if inputs == "short":
        return SHORT_TOKENS
    if inputs == "long":
        return LONG_TOKENS
    if inputs == "mixed":
        return rng.randint(*MIXED_RANGE)
    raise InvalidRequest(f"unknown input set {inputs!r}; expected one of {INPUT_SETS}")


def make_texts(inputs: InputSet, count: int, seed: int = 0) -> list[str]:
    """``count`` texts of an input set; the same seed always gives the same texts."""
    rng = random.Random(seed)
    return [make_text(rng, target_tokens(inputs, rng)) for _ in range(count)]


@dataclass(frozen=True, slots=True)
class Workload:
    """What to send: a path and a function from request index to pre-encoded body bytes.

    ``items_per_request`` is what "items/s" counts (texts for embeddings, 1 for generation);
    ``stream`` asks the generator to read the response as SSE and measure TTFT.
    """

    name: str
    path: str
    body: Callable[[int], bytes]
    items_per_request: int = 1
    stream: bool = False
    params: Mapping[str, str | int | bool] = field(default_factory=dict)

    def describe(self) -> dict[str, str | int | bool]:
        """JSON-ready description (everything but the bodies)."""
        return {
            "name": self.name,
            "path": self.path,
            "stream": self.stream,
            "items_per_request": self.items_per_request,
            **self.params,
        }


def _pool(bodies: Sequence[bytes]) -> Callable[[int], bytes]:
    frozen = tuple(bodies)
    n = len(frozen)

    def body(i: int) -> bytes:
        return frozen[i % n]

    return body


def _check_positive(name: str, value: int) -> None:
    if value < 1:
        raise InvalidRequest(f"{name} must be >= 1, not {value}", param=name)


def embeddings(
    model: str,
    inputs: InputSet = "short",
    texts_per_request: int = 1,
    *,
    seed: int = 0,
    distinct_bodies: int = 256,
    encoding_format: str | None = None,
) -> Workload:
    """``POST /v1/embeddings`` with ``texts_per_request`` texts (a bare string when 1)."""
    _check_positive("texts_per_request", texts_per_request)
    _check_positive("distinct_bodies", distinct_bodies)
    if inputs not in INPUT_SETS:
        raise InvalidRequest(f"unknown input set {inputs!r}; expected one of {INPUT_SETS}")
    # Bound the up-front work and memory: at most ~4096 texts in the pool.
    n_bodies = max(1, min(distinct_bodies, 4096 // texts_per_request))
    texts = make_texts(inputs, n_bodies * texts_per_request, seed)
    bodies = []
    for b in range(n_bodies):
        chunk = texts[b * texts_per_request : (b + 1) * texts_per_request]
        payload: dict[str, object] = {
            "model": model,
            "input": chunk[0] if texts_per_request == 1 else chunk,
        }
        if encoding_format is not None:
            payload["encoding_format"] = encoding_format
        bodies.append(msgspec.json.encode(payload))
    params: dict[str, str | int | bool] = {"model": model, "inputs": inputs, "seed": seed}
    if encoding_format is not None:
        params["encoding_format"] = encoding_format
    return Workload(
        name=f"embeddings/{inputs}x{texts_per_request}",
        path="/v1/embeddings",
        body=_pool(bodies),
        items_per_request=texts_per_request,
        params=params,
    )


def _prompts(
    count: int, prompt_tokens: int, system_tokens: int, prefixes: int, seed: int
) -> list[tuple[str | None, str]]:
    rng = random.Random(seed)
    systems = [make_text(rng, system_tokens) for _ in range(prefixes)] if system_tokens else []
    return [
        (rng.choice(systems) if systems else None, make_text(rng, prompt_tokens))
        for _ in range(count)
    ]


def chat(
    model: str,
    *,
    prompt_tokens: int = 64,
    max_tokens: int = 64,
    stream: bool = False,
    system_tokens: int = 0,
    prefixes: int = 1,
    seed: int = 0,
    distinct_bodies: int = 256,
) -> Workload:
    """``POST /v1/chat/completions``: an optional shared system prompt and one user turn."""
    for name, value in (
        ("prompt_tokens", prompt_tokens),
        ("max_tokens", max_tokens),
        ("prefixes", prefixes),
        ("distinct_bodies", distinct_bodies),
    ):
        _check_positive(name, value)
    bodies = []
    for system, user in _prompts(distinct_bodies, prompt_tokens, system_tokens, prefixes, seed):
        messages = [{"role": "system", "content": system}] if system is not None else []
        messages.append({"role": "user", "content": user})
        bodies.append(
            msgspec.json.encode(
                {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": stream}
            )
        )
    return Workload(
        name=f"chat/p{prompt_tokens}-m{max_tokens}{'-stream' if stream else ''}",
        path="/v1/chat/completions",
        body=_pool(bodies),
        stream=stream,
        params={
            "model": model,
            "prompt_tokens": prompt_tokens,
            "max_tokens": max_tokens,
            "system_tokens": system_tokens,
            "prefixes": prefixes,
            "seed": seed,
        },
    )


def completions(
    model: str,
    *,
    prompt_tokens: int = 64,
    max_tokens: int = 64,
    stream: bool = False,
    system_tokens: int = 0,
    prefixes: int = 1,
    seed: int = 0,
    distinct_bodies: int = 256,
) -> Workload:
    """``POST /v1/completions``: a prompt, optionally starting with a shared prefix."""
    for name, value in (
        ("prompt_tokens", prompt_tokens),
        ("max_tokens", max_tokens),
        ("prefixes", prefixes),
        ("distinct_bodies", distinct_bodies),
    ):
        _check_positive(name, value)
    bodies = []
    for prefix, text in _prompts(distinct_bodies, prompt_tokens, system_tokens, prefixes, seed):
        prompt = text if prefix is None else f"{prefix} {text}"
        bodies.append(
            msgspec.json.encode(
                {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": stream}
            )
        )
    return Workload(
        name=f"completions/p{prompt_tokens}-m{max_tokens}{'-stream' if stream else ''}",
        path="/v1/completions",
        body=_pool(bodies),
        stream=stream,
        params={
            "model": model,
            "prompt_tokens": prompt_tokens,
            "max_tokens": max_tokens,
            "system_tokens": system_tokens,
            "prefixes": prefixes,
            "seed": seed,
        },
    )
