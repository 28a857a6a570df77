"""Pure, synchronous routing: the prefix key, the consistent-hash ring and backend selection."""
