#!/usr/bin/env bash
# Install the peers of the upstream benchmark (idempotent; safe to run again):
#   - nginx (nginx-light) and wrk from Debian, used with our own -c config on 127.0.0.1 only
#   - sglang-router 0.3.2 (a Rust binary shipped inside a PyPI wheel) in its own venv
# Usage: bash benchmarks/upstream/setup_peers.sh   (as root; network: Debian + PyPI only)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SGLANG_VENV="${SGLANG_VENV:-$ROOT/.bench/sglang}"
SGLANG_VERSION="0.3.2"

missing=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup_peers: apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# The Debian package starts a system nginx on port 80; the benchmark never uses it.
if command -v service >/dev/null 2>&1; then
    service nginx stop >/dev/null 2>&1 || true
fi

if ! "$SGLANG_VENV/bin/python" -c "import importlib.metadata as m, sys; \
sys.exit(m.version('sglang-router') != '$SGLANG_VERSION')" >/dev/null 2>&1; then
    echo "setup_peers: creating $SGLANG_VENV with sglang-router==$SGLANG_VERSION"
    python3 -m venv "$SGLANG_VENV"
    "$SGLANG_VENV/bin/pip" install -q --disable-pip-version-check "sglang-router==$SGLANG_VERSION"
fi

echo "setup_peers: nginx $( (/usr/sbin/nginx -v 2>&1 || nginx -v 2>&1) | sed 's/.*nginx\///')," \
    "wrk $(command -v wrk)," \
    "sglang-router $("$SGLANG_VENV/bin/python" -c \
    "import importlib.metadata as m; print(m.version('sglang-router'))")"
