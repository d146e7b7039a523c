"""Tiles and fields of view of large planes: which rectangles to encode and prompt."""
