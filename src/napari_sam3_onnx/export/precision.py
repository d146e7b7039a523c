"""fp16 variants of an ``nso-sam3`` bundle, gated by a decision-level comparison with fp32.

``to_fp16`` stores the weights of the big graphs (by default the image and language encoders,
~90 % of the bytes) as float16; graph inputs and outputs stay float32, so the adapter and the
engine are unchanged, and the prompt graphs stay fp32. Two modes:

* ``storage`` (default): fp16 *weights*, fp32 *compute*: each large float initializer is stored
  as float16 and cast back to float32 by a ``Cast`` node, which onnxruntime folds when the session
  loads. Half the download and disk, the same speed and run-time memory as fp32 (measured: the
  CPU lacks fast fp16 kernels, so fp16 compute is ~2.8x slower there);
* ``compute``: onnxruntime's ``convert_float_to_float16`` (``keep_io_types``): fp16 arithmetic,
  for execution providers with fp16 kernels (GPU).
 ``compare`` then runs the same scenes and prompts through the plugin's engine
on both bundles and compares **decisions**: the candidate chosen for each click/box prompt and
its mask, the detections kept at 0.5 and their masks, the propagated masks. A precision change
is judged by these, not by tensor differences (model-contracts section 15).

Needs ``onnx`` and ``onnxruntime`` only (no torch).
Usage: ``python -m napari_sam3_onnx.export.precision FP32_BUNDLE OUT_BUNDLE [--graphs ...]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

DEFAULT_GRAPHS = ("image_encoder", "language_encoder")
#: Decision gates (fp16 against fp32 on the same prompts).
GATES = {"click_mask_iou_min": 0.98, "concept_f1_min": 0.95, "concept_mask_iou_min": 0.95,
         "propagation_mask_iou_min": 0.98}


#: Initializers smaller than this stay float32 in ``storage`` mode (biases, norms: no gain).
MIN_FP16_ELEMENTS = 4096


def fp16_storage(model):
    """The model with large float32 initializers stored as float16 + a Cast back to float32."""
    import onnx
    from onnx import helper, numpy_helper

    graph = model.graph
    casts, keep = [], []
    for init in graph.initializer:
        n = int(np.prod(init.dims)) if init.dims else 1
        if init.data_type != onnx.TensorProto.FLOAT or n < MIN_FP16_ELEMENTS:
            keep.append(init)
            continue
        half = numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16),
                                       init.name + "__fp16")
        keep.append(half)
        casts.append(helper.make_node("Cast", [half.name], [init.name], to=onnx.TensorProto.FLOAT,
                                      name=init.name + "__to_fp32"))
    del graph.initializer[:]
    graph.initializer.extend(keep)
    nodes = casts + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def to_fp16(src: Path | str, dst: Path | str, graphs: Sequence[str] = DEFAULT_GRAPHS,
            mode: str = "storage") -> dict:
    """Copy bundle ``src`` to ``dst`` with ``graphs`` (manifest roles) in fp16 (see ``mode``)."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    if mode not in ("storage", "compute"):
        raise ValueError(f"mode must be 'storage' or 'compute', not {mode!r}")

    from .writer import MANIFEST, sha256

    src, dst = Path(src), Path(dst)
    manifest = json.loads((src / MANIFEST).read_text(encoding="utf-8"))
    dst.mkdir(parents=True, exist_ok=True)
    converted = {manifest["graphs"][r] for r in graphs}
    for name in manifest["files"]:
        if name not in converted:
            shutil.copyfile(src / name, dst / name)
    for name in sorted(converted):
        model = onnx.load(str(src / name))
        half = (fp16_storage(model) if mode == "storage"
                else convert_float_to_float16(model, keep_io_types=True))
        onnx.save(half, str(dst / name))
    manifest["precision"] = (f"fp16 {'weights (fp32 compute)' if mode == 'storage' else 'compute'}"
                             " in " + ", ".join(graphs) + "; fp32 elsewhere")
    manifest["fp16_graphs"] = list(graphs)
    manifest["fp16_mode"] = mode
    manifest["files"] = {n: {"sha256": sha256(dst / n), "bytes": (dst / n).stat().st_size}
                         for n in manifest["files"]}
    (dst / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.logical_or(a, b).sum()
    return 1.0 if union == 0 else float(np.logical_and(a, b).sum() / union)


def _decisions(folder: Path) -> dict:
    """Every decision the engine makes on the fixed scenes with one bundle."""
    from ..engine.concepts import TextCache
    from ..engine.encoding import SliceEncoder, SliceRef
    from ..engine.interactive import Prompt, segment
    from ..engine.postprocess import logits_to_mask
    from ..engine.propagation import propagate
    from ..engine.propagation_types import Seed
    from ..engine.tokenizer import ClipTokenizer
    from ..models.bundle import open_bundle
    from .scenes import test_image

    adapter = open_bundle(folder)
    img = test_image(0)
    emb = adapter.encode(img)
    out: dict = {"clicks": [], "concepts": [], "propagation": []}
    for pts, labs, box in ([[(510, 420)], [1], None], [[(510, 420), (260, 700)], [1, 0], None],
                           [[], [], (350, 300, 720, 640)]):
        res = segment(adapter, emb, Prompt.clicks(np.asarray(pts, float).reshape(-1, 2), labs,
                                                  box))
        out["clicks"].append((res.candidate, res.mask))
    texts = TextCache(adapter, ClipTokenizer.from_folder(folder))
    box = np.array([[0.47, 0.5, 0.3, 0.34]], np.float32)
    for phrase, boxes in (("cell", None), ("visual", box)):
        labels = None if boxes is None else np.array([1], np.int64)
        det = adapter.detect(emb, texts.get(phrase), boxes, labels)
        keep = np.flatnonzero(det.scores > 0.5)
        out["concepts"].append({int(i): logits_to_mask(det.masks[i], img.shape[:2], 0.0)
                                for i in keep})
    frames = np.stack([test_image(1, shift=(4.0 * i, 6.0 * i)) for i in range(5)])
    refs = [SliceRef(frames, (k,), rgb=True, source="precision") for k in range(5)]
    run = propagate(adapter, SliceEncoder(adapter), refs, {1: Seed.clicks(2, [(518, 432)])},
                    stop_after_absent=None)
    out["propagation"] = [run.objects[1].outputs[k].mask for k in range(5)]
    adapter.close()
    return out


def compare(fp32: Path | str, other: Path | str) -> dict:
    """Decision-level comparison of two bundles; returns measurements and ``passed``."""
    a, b = _decisions(Path(fp32)), _decisions(Path(other))
    clicks = [{"same_candidate": ca == cb, "mask_iou": _iou(ma, mb)}
              for (ca, ma), (cb, mb) in zip(a["clicks"], b["clicks"], strict=True)]
    concepts = []
    for da, db in zip(a["concepts"], b["concepts"], strict=True):
        both = set(da) & set(db)
        f1 = 1.0 if not da and not db else 2 * len(both) / (len(da) + len(db))
        ious = [_iou(da[i], db[i]) for i in sorted(both)]
        concepts.append({"kept_fp32": len(da), "kept_other": len(db), "f1": f1,
                         "min_mask_iou": min(ious) if ious else 1.0})
    prop = [_iou(x, y) for x, y in zip(a["propagation"], b["propagation"], strict=True)]
    g = GATES
    passed = (all(c["same_candidate"] and c["mask_iou"] >= g["click_mask_iou_min"]
                  for c in clicks)
              and all(c["f1"] >= g["concept_f1_min"]
                      and c["min_mask_iou"] >= g["concept_mask_iou_min"] for c in concepts)
              and min(prop) >= g["propagation_mask_iou_min"])
    return {"clicks": clicks, "concepts": concepts, "propagation_mask_iou": prop,
            "gates": g, "passed": bool(passed)}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: convert, compare, report; exit 1 (and remove the output) if gated out."""
    p = argparse.ArgumentParser(prog="python -m napari_sam3_onnx.export.precision")
    p.add_argument("fp32", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--graphs", default=",".join(DEFAULT_GRAPHS))
    p.add_argument("--mode", choices=("storage", "compute"), default="storage")
    p.add_argument("--keep-failed", action="store_true", help="keep a bundle that fails the gate")
    args = p.parse_args(argv)
    manifest = to_fp16(args.fp32, args.out, [g for g in args.graphs.split(",") if g],
                       args.mode)
    result = compare(args.fp32, args.out)
    size = {k: sum(f["bytes"] for f in m["files"].values()) for k, m in (
        ("fp32", json.loads((args.fp32 / "manifest.json").read_text())), ("out", manifest))}
    result["bytes"] = size
    manifest["decision_gate"] = result
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n",
                                            encoding="utf-8")
    print(json.dumps(result, indent=2))
    if not result["passed"] and not args.keep_failed:
        shutil.rmtree(args.out)
        print("gated out: the fp16 bundle was removed (use --keep-failed to keep it)")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
