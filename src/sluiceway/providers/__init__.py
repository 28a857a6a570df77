"""Model name → provider: local (engine + batcher) or upstream (backend pool + routing)."""
