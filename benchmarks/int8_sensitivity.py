"""Which linear layers of an encoder are sensitive to int8: one group quantised at a time.

Usage::

    python benchmarks/int8_sensitivity.py FP32_BUNDLE [--graph image_encoder] [--group block]
        [--json sens.json]

For every group of linear nodes (``node``: each ``MatMul``/``Gemm`` alone; ``kind``: the same
layer kind in every block, e.g. all ``mlp/fc2``; ``block``: one transformer block) the graph is
written with only that group int8 (the exporter's own :func:`quantize_graph`, per-channel 7-bit
dynamic) and run on the gate's test image; each output's relative L2 error against fp32 is
printed as it is measured. The groups with the largest error are the candidates to keep fp32
(``--int8-exclude`` / ``--int8-last-blocks``); the decision gate has the last word.
Needs onnx and onnxruntime (the export environment); writes only into a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def groups_of(names: list[str], how: str) -> dict[str, list[str]]:
    """Node names grouped by ``how`` (``node``, ``kind`` or ``block``)."""
    out: dict[str, list[str]] = {}
    for n in names:
        if how == "node":
            key = n
        elif how == "kind":
            key = re.sub(r"\.\d+/", ".N/", n)
        else:
            m = re.search(r"/((?:blocks|resblocks)\.\d+)/", n)
            key = m.group(1) if m else n
        out.setdefault(key, []).append(n)
    return out


def run_graph(path: Path, feed: dict, threads: int) -> dict[str, np.ndarray]:
    """Outputs of one graph on ``feed`` (CPU, arena off)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.enable_cpu_mem_arena = False
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feed), strict=True))


def main(argv: list[str] | None = None) -> int:
    """Quantise each group alone, print its output errors against fp32."""
    import onnx

    from napari_sam3_onnx.export.gate import rel_error
    from napari_sam3_onnx.export.manifest import read_manifest
    from napari_sam3_onnx.export.quantize import linear_nodes, quantize_graph
    from napari_sam3_onnx.export.scenes import test_image

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bundle", type=Path)
    p.add_argument("--graph", default="image_encoder")
    p.add_argument("--group", choices=("node", "kind", "block"), default="node")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    src = args.bundle / read_manifest(args.bundle)["graphs"][args.graph]
    names = [n.name for n in linear_nodes(onnx.load(str(src), load_external_data=False))]
    img = test_image(0).astype(np.float32) / 255.0
    feed = {"pixel_values": ((img - 0.5) / 0.5).transpose(2, 0, 1)[None].copy()}
    ref = run_graph(src, feed, args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for key, members in groups_of(names, args.group).items():
            t0 = time.perf_counter()
            dst = Path(tmp) / "q.onnx"
            quantize_graph(src, dst, exclude=[n for n in names if n not in members],
                           last_blocks=0)
            got = run_graph(dst, feed, args.threads)
            err = {k: rel_error(v, got[k]) for k, v in ref.items()}
            rows.append({"group": key, "nodes": len(members), "rel_error": err,
                         "max": max(err.values())})
            print(f"{key:<48} {max(err.values()):.4f}  " + " ".join(
                f"{k}={v:.4f}" for k, v in err.items()) + f"  ({time.perf_counter() - t0:.0f} s)",
                flush=True)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=2))
    print("most sensitive first:")
    for r in sorted(rows, key=lambda r: -r["max"])[:10]:
        print(f"  {r['group']:<48} {r['max']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
