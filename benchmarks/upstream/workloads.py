"""The three request mixes of the routing-quality benchmark (deterministic, seeded).

Every request is a streamed ``POST /v1/chat/completions`` whose text is built from the word
list of :mod:`sluiceway.bench.workloads` (``make_text``); bodies are pre-encoded once so the
load generator only looks them up. :class:`Recorded` wraps a body pool and remembers which
bodies were actually sent, in order, so the oracle sees exactly the requests the contender saw.

shared_prefix   G groups, each with its own long system prompt; every request is one group's
                system prompt plus a short, unique question (groups drawn uniformly).
multi_turn      C concurrent conversations of R rounds, all opening with the same system
                prompt; round r repeats rounds 0..r-1 (user and assistant turns) and adds a
                user turn. Requests interleave conversations (round r of every conversation
                in a shuffled order, then round r+1), and after R rounds fresh ones start.
skew            P prefixes like shared_prefix, but one prefix carries ``hot_share`` of all
                requests (the rest uniform over the others).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from sluiceway.bench.workloads import Workload, make_text

Messages = list[dict[str, str]]


def _body(model: str, messages: Messages, max_tokens: int) -> bytes:
    return msgspec.json.encode(
        {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": True}
    )


@dataclass(slots=True)
class Recorded:
    """A pool of bodies and the log of which ones were sent (indices, in send order)."""

    bodies: list[bytes]
    sent: list[int] = field(default_factory=list)

    def body(self, i: int) -> bytes:
        j = i % len(self.bodies)
        self.sent.append(j)
        return self.bodies[j]

    def sent_bodies(self) -> list[bytes]:
        return [self.bodies[j] for j in self.sent]

    def clear(self) -> None:
        self.sent.clear()


@dataclass(frozen=True, slots=True)
class Mix:
    """A named request mix: its description and a body pool of ``n`` requests."""

    name: str
    title: str
    params: dict[str, int | float]
    build: Callable[[int], list[bytes]]

    def workload(self, n: int, model: str) -> tuple[Workload, Recorded]:
        recorded = Recorded(self.build(n))
        wl = Workload(
            name=self.name,
            path="/v1/chat/completions",
            body=recorded.body,
            stream=True,
            params={"model": model, **self.params},
        )
        return wl, recorded


def shared_prefix(
    model: str,
    *,
    groups: int = 64,
    system_tokens: int = 600,
    question_tokens: int = 24,
    max_tokens: int = 16,
    seed: int = 1,
) -> Mix:
    def build(n: int) -> list[bytes]:
        rng = random.Random(seed)
        systems = [make_text(rng, system_tokens) for _ in range(groups)]
        out = []
        for _ in range(n):
            system = systems[rng.randrange(groups)]
            question = make_text(rng, question_tokens)
            messages = [
                {"role": "system", "content": system},
                {"role": "user", "content": question},
            ]
            out.append(_body(model, messages, max_tokens))
        return out

    params = {"groups": groups, "system_tokens": system_tokens, "question_tokens": question_tokens}
    return Mix("shared_prefix", "(i) shared prefixes", {**params, "max_tokens": max_tokens}, build)


def multi_turn(
    model: str,
    *,
    conversations: int = 48,
    rounds: int = 6,
    system_tokens: int = 300,
    user_tokens: int = 50,
    assistant_tokens: int = 80,
    max_tokens: int = 16,
    seed: int = 2,
) -> Mix:
    def conversation(conv: int) -> list[Messages]:
        rng = random.Random(seed * 1_000_003 + conv)
        messages: Messages = [{"role": "system", "content": system}]
        prompts = []
        for _ in range(rounds):
            messages = [*messages, {"role": "user", "content": make_text(rng, user_tokens)}]
            prompts.append(messages)
            messages = [
                *messages,
                {"role": "assistant", "content": make_text(rng, assistant_tokens)},
            ]
        return prompts

    system = make_text(random.Random(seed), system_tokens)

    def build(n: int) -> list[bytes]:
        per_epoch = conversations * rounds
        out: list[bytes] = []
        cache: dict[int, list[Messages]] = {}
        order = random.Random(seed)
        slots: list[int] = []
        for i in range(n):
            epoch, k = divmod(i, per_epoch)
            r, c = divmod(k, conversations)
            if c == 0:  # clients are not in lockstep: a new order of conversations per round
                slots = list(range(conversations))
                order.shuffle(slots)
            conv = epoch * conversations + slots[c]
            if conv not in cache:
                cache[conv] = conversation(conv)
            out.append(_body(model, cache[conv][r], max_tokens))
        return out

    params = {
        "conversations": conversations,
        "rounds": rounds,
        "system_tokens": system_tokens,
        "user_tokens": user_tokens,
        "assistant_tokens": assistant_tokens,
        "max_tokens": max_tokens,
    }
    return Mix("multi_turn", "(ii) multi-turn chat", params, build)


def skew(
    model: str,
    *,
    prefixes: int = 32,
    hot_share: float = 0.5,
    system_tokens: int = 600,
    question_tokens: int = 24,
    max_tokens: int = 16,
    seed: int = 3,
) -> Mix:
    def build(n: int) -> list[bytes]:
        rng = random.Random(seed)
        systems = [make_text(rng, system_tokens) for _ in range(prefixes)]
        out = []
        for _ in range(n):
            g = 0 if rng.random() < hot_share else rng.randrange(1, prefixes)
            messages = [
                {"role": "system", "content": systems[g]},
                {"role": "user", "content": make_text(rng, question_tokens)},
            ]
            out.append(_body(model, messages, max_tokens))
        return out

    params = {
        "prefixes": prefixes,
        "hot_share": hot_share,
        "system_tokens": system_tokens,
        "question_tokens": question_tokens,
        "max_tokens": max_tokens,
    }
    return Mix("skew", "(iii) skewed prefix", params, build)
