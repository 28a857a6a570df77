"""Upstream backends: state, circuit breaker, health probes, the pool and the proxy I/O."""
