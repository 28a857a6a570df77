"""Shared fixtures: the anyio backend (asyncio) for ``@pytest.mark.anyio`` tests."""

from __future__ import annotations

import os

import pytest

# Tests import onnxruntime directly too: no telemetry (must be set before it loads).
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
