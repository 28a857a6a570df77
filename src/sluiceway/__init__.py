"""sluiceway: an AI inference gateway speaking the OpenAI-compatible HTTP API."""

__version__ = "0.1.0"
