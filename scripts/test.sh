#!/usr/bin/env bash
# Set everything up, then run the quality gates and the whole test suite.
set -euo pipefail
export ORT_DISABLE_TELEMETRY=1  # ONNX Runtime phones home on Linux otherwise
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== ruff"
.venv/bin/ruff check src tests benchmarks scripts
echo "== mypy --strict"
.venv/bin/mypy --strict src/sluiceway
echo "== pytest"
.venv/bin/python -m pytest -W error -q "$@"
