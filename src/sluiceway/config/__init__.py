"""Typed, frozen settings: the file + environment + flags loader and the model definitions."""

from sluiceway.config.loader import ConfigError, load_settings
from sluiceway.config.settings import (
    BatchingSettings,
    EncoderModelSettings,
    ModelSettings,
    ServerSettings,
    Settings,
)

__all__ = [
    "BatchingSettings",
    "ConfigError",
    "EncoderModelSettings",
    "ModelSettings",
    "ServerSettings",
    "Settings",
    "load_settings",
]
