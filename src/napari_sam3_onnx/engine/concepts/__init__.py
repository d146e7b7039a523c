"""Text and exemplar concept search, the tokenizer, and tiled search on large planes."""
