"""Metrics, logging and tracing: leaves every layer may import."""
