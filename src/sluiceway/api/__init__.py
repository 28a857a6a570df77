"""The HTTP edge: decode, validate, call a provider, encode; the only place statuses are chosen."""
