"""Model runtimes behind small protocols; everything here runs on engine/tokenizer threads."""
