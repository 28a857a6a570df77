"""A fake generation engine (``Tokenizer`` + ``Decoder``) for precise tests and demos.

Bytes are tokens (id = byte value), so text round-trips exactly. The fake "model" answers
each prompt with the prompt's own bytes, cycled, one token per step, on its own thread,
honouring the same contract as the llama decoder: ``window`` backpressure, cancellation at
the next step, exactly one ``Finished`` per job. ``gate`` holds every step until set;
``fail_on`` fails a job whose prompt contains that token (an engine error).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from sluiceway.engines.llama_job import DecodeJob, Finished, Piece
from sluiceway.engines.llama_text import TextAssembler


class ByteTokenizer:
    """Token id = byte value; chat renders ``role: content`` lines."""

    vocab_size = 256

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool) -> list[int]:
        return list(text.encode())

    def piece(self, token: int) -> bytes:
        return bytes([token])

    def render_chat(self, messages: Sequence[dict[str, str]]) -> str:
        return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"

    def close(self) -> None:
        pass


@dataclass(eq=False)
class FakeDecoder:
    """Implements ``Decoder``; records what it saw."""

    n_slots: int = 2
    context: int = 256
    gate: threading.Event | None = None
    fail_on: int | None = None
    jobs: list[DecodeJob] = field(default_factory=list)
    steps: int = 0

    def __post_init__(self) -> None:
        self._cond = threading.Condition()
        self._inbox: list[DecodeJob] = []
        self._active: dict[int, tuple[DecodeJob, TextAssembler, list[int]]] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="fake-decoder")

    @property
    def slots(self) -> int:
        return self.n_slots

    @property
    def lanes(self) -> int:
        return 1

    @property
    def n_ctx(self) -> int:
        return self.context

    def start(self) -> None:
        self._thread.start()

    def submit(self, job: DecodeJob) -> None:
        with self._cond:
            if self._closed:
                raise RuntimeError("closed")
            self.jobs.append(job)
            self._inbox.append(job)
            self._cond.notify()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self.gate is not None:
            self.gate.set()
        if self._thread.is_alive():
            self._thread.join()

    def statistics(self) -> dict[str, int]:
        return {"active": len(self._active), "steps": self.steps}

    def _ready(self) -> bool:
        return any(j.cancelled or not j.blocked for j, _, _ in self._active.values())

    def _run(self) -> None:
        while True:
            with self._cond:
                while not (self._closed or self._inbox or self._ready()):
                    self._cond.wait()
                if self._closed:
                    break
                new, self._inbox = self._inbox, []
            for job in new:
                self._active[job.slot] = (job, TextAssembler(job.stops), [])
            if self.gate is not None:
                self.gate.wait()
            self.steps += 1
            for slot, (job, text, out) in list(self._active.items()):
                if job.cancelled:
                    self._end(slot, "cancelled", "")
                elif self.fail_on is not None and self.fail_on in job.prompt:
                    self._end(slot, "error", "", error="injected engine failure")
                elif not job.blocked:
                    token = job.prompt[len(out) % len(job.prompt)]
                    out.append(token)
                    delta = text.push(bytes([token]))
                    if text.stopped:
                        self._end(slot, "stop", delta)
                    elif len(out) >= job.max_tokens:
                        self._end(slot, "length", delta + text.flush())
                    else:
                        job.emitted += 1
                        job.emit(Piece(delta, token))
        for slot in list(self._active):
            self._end(slot, "cancelled", "")
        for job in self._inbox:
            job.emit(Finished("cancelled", "", 0, ()))

    def _end(self, slot: int, reason: str, text: str, error: str | None = None) -> None:
        job, _, out = self._active.pop(slot)
        cached = () if reason == "error" else tuple(job.prompt) + tuple(out[:-1])
        job.emit(Finished(reason, text, len(out), cached, error=error))  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"FakeDecoder(slots={self.n_slots}, active={len(self._active)})"
