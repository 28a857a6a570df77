"""Where an encoder's files are and how to pool: from settings, else from its folder's config."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sluiceway.config.resources import resolve_file
from sluiceway.config.settings import EncoderModelSettings


@dataclass(frozen=True, slots=True)
class EncoderFiles:
    onnx: Path
    tokenizer: Path
    pooling: Literal["mean", "cls"]
    max_length: int
    output: str | None


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return data if isinstance(data, dict) else {}


def resolve_encoder_files(settings: EncoderModelSettings) -> EncoderFiles:
    """Settings win; then ``sluiceway.json``; then sentence-transformers' files; then defaults.

    A folder may hold ``sluiceway.json`` with
    ``{"pooling": "mean"|"cls", "max_length": N, "output": "<graph output name>"}``,
    or the sentence-transformers files ``1_Pooling/config.json`` and
    ``sentence_bert_config.json``.
    """
    folder = resolve_file(settings.path) if settings.path else None
    if settings.onnx_file:
        onnx = resolve_file(settings.onnx_file)
    elif folder is not None:
        onnx = resolve_file(str(folder / "model.onnx"))
    else:
        raise FileNotFoundError(f"model {settings.id!r}: set `path` or `onnx_file`")
    if settings.tokenizer_file:
        tokenizer = resolve_file(settings.tokenizer_file)
    elif folder is not None:
        tokenizer = resolve_file(str(folder / "tokenizer.json"))
    else:
        raise FileNotFoundError(f"model {settings.id!r}: set `path` or `tokenizer_file`")

    own: dict[str, Any] = {}
    st_pool: dict[str, Any] = {}
    st_bert: dict[str, Any] = {}
    if folder is not None:
        own = _read_json(folder / "sluiceway.json")
        st_pool = _read_json(folder / "1_Pooling" / "config.json")
        st_bert = _read_json(folder / "sentence_bert_config.json")

    pooling: Literal["mean", "cls"] = "mean"
    if settings.pooling is not None:
        pooling = settings.pooling
    elif own.get("pooling") in ("mean", "cls"):
        pooling = own["pooling"]
    elif st_pool.get("pooling_mode_cls_token"):
        pooling = "cls"

    max_length = 512
    if settings.max_length is not None:
        max_length = settings.max_length
    elif isinstance(own.get("max_length"), int):
        max_length = own["max_length"]
    elif isinstance(st_bert.get("max_seq_length"), int):
        max_length = st_bert["max_seq_length"]
    if max_length < 2:
        raise ValueError(f"model {settings.id!r}: max_length must be at least 2")
    output = settings.output
    if output is None and isinstance(own.get("output"), str):
        output = own["output"]
    return EncoderFiles(
        onnx=onnx, tokenizer=tokenizer, pooling=pooling, max_length=max_length, output=output
    )
