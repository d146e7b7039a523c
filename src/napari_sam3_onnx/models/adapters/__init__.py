"""Adapters, one per public SAM 3 ONNX export layout."""
