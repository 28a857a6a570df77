"""What crosses between the event loop and the llama decode thread: jobs in, events out.

A :class:`DecodeJob` is shared by two threads with a strict split of who writes what:

- the loop writes ``cancelled`` and ``consumed`` (then calls ``Decoder.wake()``);
- the decode thread writes ``emitted`` and calls ``emit`` (which must be thread-safe; the
  provider's hands each event to the loop with ``call_soon_threadsafe``).

Each counter has one writer, so no lock is needed: the decode thread pauses a job while
``emitted - consumed >= window`` (its client is slow) and keeps decoding the other slots.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

FinishReason = Literal["stop", "length", "cancelled", "error"]


@dataclass(frozen=True, slots=True)
class Sampling:
    """Per-request sampling knobs (validated by the API edge)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    #: None = a random seed.
    seed: int | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: tuple[tuple[int, float], ...] = ()
    #: None = no logprobs; else the sampled token's logprob plus this many alternatives.
    top_logprobs: int | None = None


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """The model's log-probability of a sampled token, and of the most likely alternatives."""

    token: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True, slots=True)
class Piece:
    """One sampled token: the text it released (may be empty, or held back) and its logprob."""

    text: str
    token: int
    logprob: TokenLogprob | None = None


@dataclass(frozen=True, slots=True)
class Finished:
    """The job is over; its slot is free again and holds ``cached`` in its KV cache."""

    reason: FinishReason
    #: Text released by the last token(s), after any held-back text was settled.
    text: str
    completion_tokens: int
    cached: tuple[int, ...]
    logprob: TokenLogprob | None = None
    error: str | None = None


Event = Piece | Finished


@dataclass(slots=True, eq=False)
class DecodeJob:
    """One request on one slot: decode ``prompt[reuse:]`` after the slot's cached prefix."""

    slot: int
    prompt: Sequence[int]
    #: Leading prompt tokens already in the slot's KV cache (kept, not decoded again).
    reuse: int
    max_tokens: int
    sampling: Sampling
    stops: tuple[str, ...]
    emit: Callable[[Event], None]
    #: Pieces the client may lag behind before the slot pauses.
    window: int = 16
    cancelled: bool = False
    consumed: int = 0
    emitted: int = field(default=0)

    @property
    def blocked(self) -> bool:
        """The client has not taken the last ``window`` pieces: do not decode for it now."""
        return self.emitted - self.consumed >= self.window


class Decoder(Protocol):
    """The engine seam of a generation model. Implementations: :class:`LlamaDecoder`.

    ``submit`` and ``wake`` are thread-safe and never block; everything else about a job
    reaches the loop through its ``emit`` callback, ending with exactly one :class:`Finished`.
    """

    @property
    def slots(self) -> int: ...

    @property
    def lanes(self) -> int:
        """Slots ``s`` and ``t`` decode in parallel when ``s % lanes != t % lanes``."""
        ...

    @property
    def n_ctx(self) -> int:
        """Tokens per slot (prompt + generated)."""
        ...

    def start(self) -> None: ...

    def submit(self, job: DecodeJob) -> None: ...

    def wake(self) -> None:
        """A job was cancelled or its client consumed pieces: look again."""
        ...

    def close(self) -> None:
        """Finish every job (``cancelled``) and stop the thread. Blocks until it has stopped."""
        ...

    def statistics(self) -> dict[str, int]: ...


class Tokenizer(Protocol):
    """Prompt text ↔ token ids of a generation model (thread-safe; used off the loop)."""

    @property
    def vocab_size(self) -> int: ...

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool) -> list[int]: ...

    def piece(self, token: int) -> bytes: ...

    def render_chat(self, messages: Sequence[dict[str, str]]) -> str: ...

    def close(self) -> None:
        """Release the model (after its decoder was closed)."""
        ...
