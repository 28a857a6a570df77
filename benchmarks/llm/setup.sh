#!/bin/sh
# The llama_cpp.server contender, in its own venv so its server extras (fastapi, uvicorn,
# sse-starlette, pydantic-settings, starlette-context) never touch the project's pins.
# pip reuses the llama-cpp-python wheel it built for .venv (same version, same machine).
set -eu
cd "$(dirname "$0")/../.."
python3 -m venv .bench/llm
.bench/llm/bin/pip install --quiet 'llama-cpp-python[server]==0.3.36'
.bench/llm/bin/python -c "import llama_cpp.server, llama_cpp; print('llama_cpp.server', llama_cpp.__version__)"
