"""One GGUF model loaded by llama.cpp: memory-mapped weights, vocabulary and chat template.

Every context (and so every slot) of the model reads the same mapped weights. Tokenizing and
rendering the chat template only read the vocabulary, so they run on the provider's tokenizer
thread while the decode thread runs the model.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Sequence
from typing import Any

import llama_cpp
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

# llama.cpp logs every load step to stderr through this logger; keep errors only unless the
# application configured it.
_native_log = logging.getLogger("llama-cpp-python")
if _native_log.level == logging.NOTSET:
    _native_log.setLevel(logging.ERROR)


class LlamaWeights:
    """A loaded GGUF model (implements the ``Tokenizer`` seam). Free it with :meth:`close`."""

    def __init__(self, path: str, *, chat_template: str | None = None) -> None:
        llama_cpp.llama_backend_init()
        params = llama_cpp.llama_model_default_params()
        params.n_gpu_layers = 0
        params.use_mmap = True
        model = llama_cpp.llama_model_load_from_file(path.encode(), params)
        if not model:
            raise ValueError(f"llama.cpp could not load the model {path}")
        self.model: Any = model
        self.path = path
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        self._vocab_size = int(llama_cpp.llama_vocab_n_tokens(self._vocab))
        self.n_ctx_train = int(llama_cpp.llama_model_n_ctx_train(model))
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))
        self._pieces: dict[int, bytes] = {}
        template = chat_template
        if template is None:
            raw = llama_cpp.llama_model_chat_template(model, None)
            template = raw.decode() if raw else None
        self.chat_template = template
        self._chat = (
            Jinja2ChatFormatter(
                template,
                eos_token=self._special_text(llama_cpp.llama_vocab_eos(self._vocab)),
                bos_token=self._special_text(llama_cpp.llama_vocab_bos(self._vocab)),
            )
            if template
            else None
        )

    def _special_text(self, token: int) -> str:
        if token < 0:
            return ""
        raw = llama_cpp.llama_vocab_get_text(self._vocab, token)
        return raw.decode("utf-8", errors="replace") if raw else ""

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def has_chat_template(self) -> bool:
        return self._chat is not None

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool) -> list[int]:
        data = text.encode()
        size = len(data) + 8
        for _ in range(2):
            buf = (llama_cpp.llama_token * size)()
            n = llama_cpp.llama_tokenize(
                self._vocab, data, len(data), buf, size, add_special, parse_special
            )
            if n >= 0:
                return list(buf[:n])
            size = -n
        raise RuntimeError(f"llama.cpp could not tokenize {len(data)} bytes")

    def piece(self, token: int) -> bytes:
        """The bytes a generated token stands for (special tokens render as nothing)."""
        cached = self._pieces.get(token)
        if cached is not None:
            return cached
        buf = ctypes.create_string_buffer(64)
        n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, 64, 0, False)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, -n, 0, False)
        out = buf.raw[:n]
        self._pieces[token] = out
        return out

    def is_end(self, token: int) -> bool:
        """An end-of-generation token (EOS, EOT, <|im_end|>, ...)."""
        return bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))

    def render_chat(self, messages: Sequence[dict[str, str]]) -> str:
        """The prompt text for ``messages`` through the chat template (ends with the
        assistant's turn opened)."""
        if self._chat is None:
            raise ValueError("this model has no chat template")
        prompt: str = self._chat(messages=list(messages)).prompt  # type: ignore[arg-type, unused-ignore]
        return prompt

    def close(self) -> None:
        """Free the weights (after every context of this model was freed)."""
        if self.model is not None:
            llama_cpp.llama_model_free(self.model)
            self.model = None

    def __repr__(self) -> str:
        return (
            f"LlamaWeights({self.path!r}, vocab={self._vocab_size}, "
            f"n_ctx_train={self.n_ctx_train}, chat_template={self._chat is not None})"
        )
