"""Resolve file references: a filesystem path or ``pkg:<package>/<file inside it>``."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def resolve_file(ref: str) -> Path:
    """The real path of ``ref``; raises FileNotFoundError naming what is missing.

    ``pkg:`` references locate the package without importing it (some model packages import
    heavy or missing dependencies from their ``__init__``).
    """
    if ref.startswith("pkg:"):
        package, _, inner = ref[4:].partition("/")
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(f"{ref}: package {package!r} is not installed")
        path = Path(next(iter(spec.submodule_search_locations))) / inner
    else:
        path = Path(ref).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"{ref}: no such file ({path})")
    return path
