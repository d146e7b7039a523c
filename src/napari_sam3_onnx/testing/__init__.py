"""Small ONNX graphs with the real layouts' input/output names, built at test time (needs onnx)."""
