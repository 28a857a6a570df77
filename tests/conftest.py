"""Shared fixtures: the anyio backend (asyncio) for ``@pytest.mark.anyio`` tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
