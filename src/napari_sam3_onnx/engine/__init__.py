"""Numpy algorithms over the adapters: preprocessing, caching, prompting, post-processing."""
