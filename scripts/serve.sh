#!/usr/bin/env bash
# Set everything up, then run the gateway with its default models on 127.0.0.1:8000.
# Extra arguments go to `sluiceway serve` (e.g. --port 9000, --config sluiceway.toml).
set -euo pipefail
export ORT_DISABLE_TELEMETRY=1  # ONNX Runtime phones home on Linux otherwise
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/sluiceway serve "$@"
