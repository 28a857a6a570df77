"""Per-request llama.cpp sampler chains and log-probabilities (used on the decode thread)."""

from __future__ import annotations

from typing import Any

import llama_cpp
import numpy as np

from sluiceway.engines.llama_job import Sampling, TokenLogprob

_RANDOM_SEED = 0xFFFFFFFF  # llama.cpp's LLAMA_DEFAULT_SEED: draw a random seed


def native_seed(seed: int | None) -> int:
    """A request's seed as llama.cpp's uint32 (None = random; never the 'random' sentinel)."""
    if seed is None:
        return _RANDOM_SEED
    value = seed & 0xFFFFFFFF
    return value if value != _RANDOM_SEED else _RANDOM_SEED - 1


def build_sampler(sampling: Sampling, n_vocab: int, max_tokens: int) -> Any:
    """A new sampler chain for one request; free it with :func:`free_sampler`.

    Order as in llama.cpp's own server: bias → penalties → top-k → top-p → min-p →
    temperature → seeded draw; temperature 0 means greedy.
    """
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())

    def add(sampler: Any) -> None:
        llama_cpp.llama_sampler_chain_add(chain, sampler)

    if sampling.logit_bias:
        biases = (llama_cpp.llama_logit_bias * len(sampling.logit_bias))()
        for i, (token, bias) in enumerate(sampling.logit_bias):
            biases[i] = llama_cpp.llama_logit_bias(token, bias)
        add(llama_cpp.llama_sampler_init_logit_bias(n_vocab, len(sampling.logit_bias), biases))
    if sampling.presence_penalty or sampling.frequency_penalty:
        # The chain only sees generated tokens, so the window is this request's output.
        add(
            llama_cpp.llama_sampler_init_penalties(
                max_tokens, 1.0, sampling.frequency_penalty, sampling.presence_penalty
            )
        )
    if sampling.temperature <= 0.0:
        add(llama_cpp.llama_sampler_init_greedy())
        return chain
    if sampling.top_k > 0:
        add(llama_cpp.llama_sampler_init_top_k(sampling.top_k))
    if sampling.top_p < 1.0:
        add(llama_cpp.llama_sampler_init_top_p(sampling.top_p, 1))
    if sampling.min_p > 0.0:
        add(llama_cpp.llama_sampler_init_min_p(sampling.min_p, 1))
    add(llama_cpp.llama_sampler_init_temp(sampling.temperature))
    add(llama_cpp.llama_sampler_init_dist(native_seed(sampling.seed)))
    return chain


def free_sampler(chain: Any) -> None:
    llama_cpp.llama_sampler_free(chain)


def logprob_of(logits: Any, n_vocab: int, token: int, top: int) -> TokenLogprob:
    """The model's log-softmax at ``token`` and the ``top`` most likely tokens.

    ``logits`` is llama.cpp's float pointer for one output row (read, not kept).
    """
    row = np.ctypeslib.as_array(logits, shape=(n_vocab,))
    peak = float(row.max())
    log_norm = peak + float(np.log(np.exp(row - peak).sum()))
    alternatives: tuple[tuple[int, float], ...] = ()
    if top > 0:
        idx = np.argpartition(row, -top)[-top:]
        idx = idx[np.argsort(row[idx])[::-1]]
        alternatives = tuple((int(i), float(row[i]) - log_norm) for i in idx)
    return TokenLogprob(token=token, logprob=float(row[token]) - log_norm, top=alternatives)
