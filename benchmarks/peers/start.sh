#!/usr/bin/env bash
# Start one embeddings-benchmark peer in the foreground on 127.0.0.1:PORT.
# The server replaces this shell (exec), so $! of a backgrounded start.sh is the
# server's PID: measure RSS over its process tree and stop it with `kill PID`.
#
#   bash benchmarks/peers/start.sh naive-1w    PORT   # uvicorn, 1 worker
#   bash benchmarks/peers/start.sh gunicorn-2w PORT   # gunicorn + 2 UvicornWorkers
#   bash benchmarks/peers/start.sh infinity    PORT   # Infinity, optimum (ONNX) engine
#
# All three answer POST /v1/embeddings (model "all-MiniLM-L6-v2") and are ready when
# GET /health returns 200 (Infinity too: its --url-prefix does not apply to /health).
# Run benchmarks/peers/setup.sh first.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BENCH=${BENCH_DIR:-$REPO/.bench}
peer=${1:?usage: start.sh naive-1w|gunicorn-2w|infinity PORT}
port=${2:?usage: start.sh naive-1w|gunicorn-2w|infinity PORT}

# Nothing may come from a model hub, and nothing may phone home: onnxruntime >= 1.29
# (all three peers run 1.32) ships 1DS telemetry on Linux that keeps resolving
# mobile.events.data.microsoft.com unless ORT_DISABLE_TELEMETRY=1 is set before it loads.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 DO_NOT_TRACK=1
export ORT_DISABLE_TELEMETRY=1

case "$peer" in
naive-1w)
    cd "$REPO"
    exec "$BENCH/naive/bin/uvicorn" benchmarks.peers.naive_embed_service:app \
        --host 127.0.0.1 --port "$port" --workers 1 --no-access-log
    ;;
gunicorn-2w)
    cd "$REPO"
    # --no-control-socket: gunicorn 27 otherwise binds ~/.gunicorn/gunicorn.ctl, shared
    # by every gunicorn on the machine.
    exec "$BENCH/naive/bin/gunicorn" -k uvicorn.workers.UvicornWorker -w 2 \
        -b "127.0.0.1:$port" --no-control-socket \
        benchmarks.peers.naive_embed_service:app
    ;;
infinity)
    # Infinity resolves a local model by path; from inside the folder with
    # `--model-id .` its (disabled) optimisation cache path stays well-formed.
    cd "$BENCH/infinity-model"
    export HF_HOME="$BENCH/hf-home"
    exec "$BENCH/infinity/bin/infinity_emb" v2 \
        --model-id . --served-model-name all-MiniLM-L6-v2 \
        --engine optimum --device cpu --pooling-method mean \
        --onnx-disable-optimize --no-vector-disk-cache \
        --url-prefix /v1 --host 127.0.0.1 --port "$port" --log-level warning
    ;;
*)
    echo "unknown peer '$peer' (naive-1w|gunicorn-2w|infinity)" >&2
    exit 2
    ;;
esac
