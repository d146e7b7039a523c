"""Embedding stores on disk: keys, files, integrity, lookup and precompute."""
