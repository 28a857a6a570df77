"""TextAssembler: UTF-8 across tokens, stop sequences held back and cut, never leaked."""

from __future__ import annotations

from sluiceway.engines.llama_text import TextAssembler


def feed(assembler: TextAssembler, pieces: list[bytes]) -> str:
    out = []
    for p in pieces:
        out.append(assembler.push(p))
        if assembler.stopped:
            return "".join(out)
    out.append(assembler.flush())
    return "".join(out)


def test_plain_text_passes_through_at_once() -> None:
    a = TextAssembler()
    assert a.push(b"Hello") == "Hello"
    assert a.push(b" world") == " world"
    assert a.flush() == ""


def test_multibyte_character_split_across_tokens() -> None:
    a = TextAssembler()
    euro = "€".encode()
    assert a.push(euro[:1]) == ""
    assert a.push(euro[1:]) == "€"


def test_stop_inside_one_token_cuts_before_it() -> None:
    a = TextAssembler(("\n\n",))
    assert a.push(b"one\n\ntwo") == "one"
    assert a.stopped


def test_stop_spanning_tokens_is_held_back_then_dropped() -> None:
    a = TextAssembler(("END",))
    assert a.push(b"abc E") == "abc "
    assert a.push(b"N") == ""
    assert a.push(b"D more") == ""
    assert a.stopped


def test_false_start_of_a_stop_is_released() -> None:
    a = TextAssembler(("END",))
    assert a.push(b"E") == ""
    assert a.push(b"x") == "Ex"
    assert not a.stopped


def test_held_text_is_flushed_at_the_end() -> None:
    a = TextAssembler(("STOP",))
    assert feed(a, [b"go S", b"T"]) == "go ST"


def test_earliest_of_several_stops_wins() -> None:
    a = TextAssembler(("b", "a"))
    assert a.push(b"xxaybz") == "xx"
