"""Build :class:`Settings` from defaults < config file < ``SLUICEWAY_*`` env < CLI flags.

Any bad value fails the whole load with a :class:`ConfigError` naming the key; nothing is
half-applied (hot reload relies on that).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from sluiceway.config.settings import ServerSettings, Settings

ENV_PREFIX = "SLUICEWAY_"


class ConfigError(Exception):
    """The configuration cannot be used; the message names the key and the problem."""


def _server_env(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in ServerSettings.__struct_fields__:
        raw = env.get(ENV_PREFIX + field.upper())
        if raw is None:
            continue
        if field == "api_keys":
            out[field] = [k for k in raw.split(",") if k]
        else:
            out[field] = raw
    return out


def read_file(path: str | Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError as e:
        raise ConfigError(f"config file {str(path)!r} not found") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {e}") from e


def load_settings(
    config: str | Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Load, merge and validate. ``overrides`` are [server] fields from CLI flags."""
    env = os.environ if env is None else env
    if config is None:
        config = env.get(ENV_PREFIX + "CONFIG") or None
    data: dict[str, Any] = read_file(config) if config is not None else {}
    server = dict(data.get("server", {}))
    server.update(_server_env(env))
    server.update({k: v for k, v in (overrides or {}).items() if v is not None})
    data["server"] = server
    if config is not None:
        data["source"] = str(Path(config).resolve())
    try:
        # strict=False lets env strings like "8080" become ints; type errors still name the key.
        return msgspec.convert(data, Settings, strict=False)
    except msgspec.ValidationError as e:
        raise ConfigError(f"invalid configuration: {e}") from e
    except ValueError as e:
        raise ConfigError(f"invalid configuration: {e}") from e
