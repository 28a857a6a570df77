"""Framework-free dynamic batching: a pure flush policy, admission bounds and the scheduler."""
