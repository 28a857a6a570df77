"""Routing keys: one conversation → one key; completions by prefix; header overrides."""

from __future__ import annotations

import msgspec

from sluiceway.routing.key import routing_key


def chat(*messages: tuple[str, object]) -> bytes:
    return msgspec.json.encode(
        {"model": "m", "messages": [{"role": r, "content": c} for r, c in messages]}
    )


def test_every_turn_of_a_conversation_has_the_same_key() -> None:
    turn1 = chat(("system", "be brief"), ("user", "hello"))
    turn2 = chat(
        ("system", "be brief"), ("user", "hello"), ("assistant", "hi!"), ("user", "and then?")
    )
    k1 = routing_key("chat/completions", turn1, None)
    assert k1 is not None
    assert routing_key("chat/completions", turn2, None) == k1


def test_system_prompt_and_first_user_message_both_matter() -> None:
    base = routing_key("chat/completions", chat(("system", "A"), ("user", "q")), None)
    assert routing_key("chat/completions", chat(("system", "B"), ("user", "q")), None) != base
    assert routing_key("chat/completions", chat(("system", "A"), ("user", "r")), None) != base


def test_multimodal_content_parts_are_hashed() -> None:
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}}]
    k = routing_key("chat/completions", chat(("user", parts)), None)
    assert k is not None
    assert k == routing_key("chat/completions", chat(("user", parts), ("assistant", "ok")), None)


def test_no_messages_or_bad_json_means_no_key() -> None:
    assert routing_key("chat/completions", chat(), None) is None
    assert routing_key("chat/completions", chat(("system", "x")), None) is not None
    assert routing_key("chat/completions", b"{not json", None) is None
    assert routing_key("chat/completions", b'{"messages": 3}', None) is None
    assert routing_key("embeddings", b'{"input": "x"}', None) is None


def test_completions_key_is_the_prompt_prefix() -> None:
    def key(prompt: object) -> int | None:
        return routing_key("completions", msgspec.json.encode({"prompt": prompt}), None, 8)

    assert key("12345678-tail-one") == key("12345678-tail-two")
    assert key("12345678") != key("abcdefgh")
    assert key(["12345678xx", "other"]) == key("12345678yy")
    assert key([1, 2, 3, 4, 5, 6, 7, 8, 9]) == key([1, 2, 3, 4, 5, 6, 7, 8, 0])
    assert key([[1, 2], [3]]) == key([[1, 2]])
    assert key("") is None and key([]) is None and key(None) is None


def test_session_header_overrides() -> None:
    a = routing_key("chat/completions", chat(("user", "x")), "sess-1")
    b = routing_key("embeddings", b"{}", "sess-1")
    assert a == b
    assert a != routing_key("chat/completions", chat(("user", "x")), None)


def test_first_turns_sharing_a_long_system_prompt_share_a_key() -> None:
    long_system = "You are a careful assistant. " * 60  # > prefix_chars
    a = routing_key("chat/completions", chat(("system", long_system), ("user", "q1")), None, 1024)
    b = routing_key("chat/completions", chat(("system", long_system), ("user", "q2")), None, 1024)
    assert a == b
    # ...but from the second turn on, each conversation has its own key again
    t2a = chat(("system", long_system), ("user", "q1"), ("assistant", "r"), ("user", "more"))
    t2b = chat(("system", long_system), ("user", "q2"), ("assistant", "r"), ("user", "more"))
    t3a = chat(
        ("system", long_system), ("user", "q1"), ("assistant", "r"), ("user", "more"),
        ("assistant", "r2"), ("user", "again"),
    )  # fmt: skip
    ka, kb = (routing_key("chat/completions", t, None, 1024) for t in (t2a, t2b))
    assert ka != kb
    assert routing_key("chat/completions", t3a, None, 1024) == ka


def test_short_system_prompts_key_the_conversation_from_the_first_turn() -> None:
    a = routing_key("chat/completions", chat(("system", "brief"), ("user", "q1")), None, 1024)
    b = routing_key("chat/completions", chat(("system", "brief"), ("user", "q2")), None, 1024)
    assert a != b
