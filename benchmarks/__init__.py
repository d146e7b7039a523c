"""Benchmarks: the plugin's paths timed as ratios to the raw ONNX calls they make.

Run ``python benchmarks/run.py --help``. Every timing is measured against a baseline taken in the
same run, interleaved repetition by repetition, so a busy shared machine shifts both alike.
"""
