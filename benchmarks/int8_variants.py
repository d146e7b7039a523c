"""Speed, feature error and size of int8 recipes of one image encoder, side by side in one run.

Usage::

    python benchmarks/int8_variants.py FP32_BUNDLE OUT_FOLDER [--variants s8-7bit,u8,wo8-b32-a1]

Each variant of the bundle's ``image_encoder`` is written into ``OUT_FOLDER`` as
``VARIANT.onnx`` (built under a temporary name and renamed when complete, so a variant already
there is a whole one: it is reused, never rewritten), run on the decision
gate's test image with 2 intra-op threads, CPU arena off, and reported against fp32: best of
2 encodes, the worst output's relative L2 error, the file size. Variants: ``s8-7bit``,
``s8``, ``u8``, ``u8-7bit`` (``quantize_dynamic``, per-channel) and
``wo{bits}-b{block}-a{level}`` (``MatMulNBits``; needs ``onnx_ir``). A probe for choosing
recipes; the decision gate (``export.gate``) has the last word.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np

DYNAMIC = {"s8-7bit": ("s8", True), "s8": ("s8", False), "u8": ("u8", False),
           "u8-7bit": ("u8", True)}


def build(src: Path, dst: Path, variant: str) -> None:
    """Write ``variant`` of ``src`` to ``dst`` (the ``.onnx`` appears last, complete)."""
    tmp = dst.with_name(f".{dst.name}.partial")
    try:
        _build(src, tmp, variant, data_name=dst.name + ".data")
        tmp.replace(dst)
    finally:
        tmp.unlink(missing_ok=True)


def _build(src: Path, dst: Path, variant: str, data_name: str) -> None:
    import onnx

    model = onnx.load(str(src))
    if variant in DYNAMIC:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        from napari_sam3_onnx.export.quantize import linear_nodes

        kind, reduce = DYNAMIC[variant]
        quantize_dynamic(model, str(dst), op_types_to_quantize=["MatMul", "Gemm"],
                         per_channel=True, reduce_range=reduce,
                         weight_type=QuantType.QUInt8 if kind == "u8" else QuantType.QInt8,
                         nodes_to_quantize=[n.name for n in linear_nodes(model)],
                         extra_options={"MatMulConstBOnly": True})
        return
    m = re.fullmatch(r"wo(\d)-b(\d+)-a(\d)", variant)
    if m is None:
        raise SystemExit(f"unknown variant {variant!r}")
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    q = MatMulNBitsQuantizer(model, bits=int(m[1]), block_size=int(m[2]), is_symmetric=True,
                             accuracy_level=int(m[3]))
    q.process()
    onnx.save(q.model.model, str(dst), save_as_external_data=True,
              all_tensors_to_one_file=True, location=data_name)


def timed(path: Path, feed: dict) -> tuple[dict, float]:
    """Outputs and the best of two encodes of one graph."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.enable_cpu_mem_arena = False
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    best, out = float("inf"), []
    for _ in range(2):
        t0 = time.perf_counter()
        out = sess.run(None, feed)
        best = min(best, time.perf_counter() - t0)
    return dict(zip(names, out, strict=True)), best


def main(argv: list[str] | None = None) -> int:
    """Build, run and report every variant."""
    from napari_sam3_onnx.export.gate import rel_error
    from napari_sam3_onnx.export.manifest import read_manifest
    from napari_sam3_onnx.export.scenes import test_image

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bundle", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--variants", default="s8-7bit,s8,u8,u8-7bit,wo8-b32-a4,wo8-b32-a1")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    src = args.bundle / read_manifest(args.bundle)["graphs"]["image_encoder"]
    img = test_image(0).astype(np.float32) / 255.0
    feed = {"pixel_values": ((img - 0.5) / 0.5).transpose(2, 0, 1)[None].copy()}
    ref, t_ref = timed(src, feed)
    print(f"{'fp32':<14} {t_ref:6.2f} s  {src.stat().st_size / 1e6:6.0f} MB", flush=True)
    for variant in [v for v in args.variants.split(",") if v]:
        dst = args.out / f"{variant}.onnx"
        if not dst.exists():
            build(src, dst, variant)
        got, t = timed(dst, feed)
        err = max(rel_error(v, got[k]) for k, v in ref.items())
        size = sum(f.stat().st_size for f in args.out.glob(f"{variant}.onnx*")) / 1e6
        print(f"{variant:<14} {t:6.2f} s  {size:6.0f} MB  x{t_ref / t:4.2f}  "
              f"feature error {100 * err:.2f} %", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
