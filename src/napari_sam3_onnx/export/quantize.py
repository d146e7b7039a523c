"""int8 variants of the encoder graphs (onnxruntime quantization; no torch).

Two methods, both on the linear layers only (``MatMul`` with a constant weight, ``Gemm``):

* ``dynamic`` (default): ``quantize_dynamic`` with **per-channel** weights and activations
  quantised per call (``DynamicQuantizeLinear``); onnxruntime fuses each into
  ``DynamicQuantizeMatMul`` and runs it with integer kernels. Per-tensor weights were tried
  first: 20 % feature error on the full encoder. The weights are ``s8`` (signed, full 8-bit
  range), ``u8`` (unsigned, full range) or ``s8-7bit`` (signed, 7-bit range); the exporter's
  ``--int8-weights auto`` picks s8 or u8 for the CPU it runs on
  (:func:`~napari_sam3_onnx.models.cpu_features.best_int8_format`). On x86 CPUs without VNNI
  (AVX2 only) onnxruntime multiplies u8 x s8 pairs into saturating 16-bit lanes, so full-range
  signed weights overflow there (toy chain: 9.7 % output error) and need the 7-bit range; its
  u8 x u8 kernel does not saturate (measured), so unsigned weights keep all 8 bits (reduced
  encoder: 1.3 % feature error against 2.0 % for 7-bit signed; full depth 2.7 % against 4.3 %,
  10 % slower; ``tests/test_export_candidates.py``). With VNNI (AVX-512 VNNI, AVX-VNNI, AMX) the
  products are summed in 32 bits: full-range s8 is exact and the fastest (issue 28: 2.14x fp32
  against u8's 1.46x on an AVX-512 VNNI EPYC);
* ``weight-only``: ``MatMulNBits`` 8-bit blocks of 32, accuracy level 1 (the weights stored
  int8 and widened to fp32 for fp32 arithmetic): the least error, int8 storage, fp32 speed.
  onnxruntime's quantiser converts ``MatMul`` only; a ``Gemm`` stays fp32.

Attention itself (the fused ``MultiHeadAttention`` kernel, or the score ``MatMul`` of a plain
export, whose both inputs are activations) stays fp32: ``MatMulConstBOnly``.

Sensitive layers stay fp32 by *name*: :func:`excluded_nodes` picks the last ``last_blocks``
transformer blocks of each graph and every node whose name contains one of ``exclude`` (by
default the language encoder's ``/resizer/`` projection to the detector's width). The
patch embedding and the necks are convolutions, never touched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

METHODS = ("dynamic", "weight-only")
#: Weight formats of the ``dynamic`` method (see the module doc).
WEIGHT_FORMATS = ("s8", "u8", "s8-7bit")
#: How a constant ``Gather`` table (the text encoder's token embedding) is stored.
TABLE_STORAGE = ("fp16", "int8", "fp32")
#: Name fragments of linear layers kept fp32 by default (projections into the heads).
DEFAULT_EXCLUDE = ("/resizer/",)
_BLOCK = re.compile(r"/(?:blocks|resblocks)\.(\d+)/")


def linear_nodes(model) -> list:
    """``MatMul`` nodes with a constant right-hand side and every ``Gemm`` (the weights)."""
    inits = {i.name for i in model.graph.initializer}
    return [n for n in model.graph.node
            if n.op_type == "Gemm" or (n.op_type == "MatMul" and n.input[1] in inits)]


def excluded_nodes(model, last_blocks: int = 0,
                   exclude: Sequence[str] = DEFAULT_EXCLUDE) -> list[str]:
    """Names of the linear nodes to keep fp32: the last ``last_blocks`` blocks, ``exclude``."""
    nodes = linear_nodes(model)
    blocks = sorted({int(m.group(1)) for n in nodes if (m := _BLOCK.search(n.name))})
    tail = set(blocks[len(blocks) - last_blocks:]) if last_blocks > 0 else set()
    out = []
    for n in nodes:
        m = _BLOCK.search(n.name)
        if (m and int(m.group(1)) in tail) or any(frag in n.name for frag in exclude):
            out.append(n.name)
    return out


def fp16_tables(model) -> int:
    """Store each constant ``Gather`` table of ``model`` as float16 + a ``Cast`` to float32.

    onnxruntime folds the cast when the session loads (fp32 lookups, half the bytes on disk).
    Returns how many tables were converted.
    """
    from onnx import TensorProto, helper, numpy_helper

    inits = {i.name: i for i in model.graph.initializer}
    names = sorted({n.input[0] for n in model.graph.node if n.op_type == "Gather"
                    and n.input[0] in inits
                    and inits[n.input[0]].data_type == TensorProto.FLOAT})
    casts = []
    for name in names:
        init = inits[name]
        half = numpy_helper.from_array(numpy_helper.to_array(init).astype("float16"),
                                       name + "__fp16")
        model.graph.initializer.remove(init)
        model.graph.initializer.append(half)
        casts.append(helper.make_node("Cast", [half.name], [name], to=TensorProto.FLOAT,
                                      name=name + "__to_fp32"))
    nodes = casts + list(model.graph.node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return len(names)


def quantize_graph(src: Path | str, dst: Path | str, *, method: str = "dynamic",
                   last_blocks: int = 0, exclude: Sequence[str] = DEFAULT_EXCLUDE,
                   embeddings: bool | str = False, weights: str = "u8") -> dict:
    """Write ``src`` (fp32 ONNX) to ``dst`` with its linear layers int8 (see module doc).

    ``embeddings``: how constant ``Gather`` tables (the text encoder's 49408 x 1024 token
    embedding, 200 MB) are stored - ``"fp16"`` (float16 on disk, fp32 lookups), ``"int8"`` or
    True (onnxruntime's 8-bit: uint8 with one scale for the whole table; the looked-up rows
    feed the next quantised ``MatMul`` directly, dynamic method only), ``"fp32"`` or False
    (unchanged). One scale for 50 M values is coarse: on the reduced model the int8 table
    alone gives 1.4 % text-feature error, all int8 linear layers 0.4 %, so ``"fp16"`` is what
    :func:`.precision.to_int8` asks for.
    ``weights``: ``s8`` (full 8-bit signed: CPUs with VNNI), ``u8`` (full 8-bit unsigned: AVX2
    CPUs) or ``s8-7bit`` (signed, 7-bit range) for the ``dynamic`` method; see the module doc.

    Returns what was done: method, quantised and excluded node counts, the excluded names.
    """
    import onnx

    model = onnx.load(str(src))
    keep = excluded_nodes(model, last_blocks, exclude)
    targets = [n.name for n in linear_nodes(model) if n.name not in set(keep)]
    inits = {i.name for i in model.graph.initializer}
    storage = embeddings if isinstance(embeddings, str) else ("int8" if embeddings else "fp32")
    if weights not in WEIGHT_FORMATS:
        raise ValueError(f"weights must be one of {WEIGHT_FORMATS}, not {weights!r}")
    if storage not in TABLE_STORAGE:
        raise ValueError(f"embeddings must be one of {TABLE_STORAGE}, not {embeddings!r}")
    tables = [n.name for n in model.graph.node
              if storage == "int8" and n.op_type == "Gather" and n.input[0] in inits]
    if method == "dynamic":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(model, str(dst),
                         op_types_to_quantize=["MatMul", "Gemm"] + (["Gather"] if tables else []),
                         per_channel=True, reduce_range=weights == "s8-7bit",
                         weight_type=QuantType.QUInt8 if weights == "u8" else QuantType.QInt8,
                         nodes_to_quantize=targets + tables, nodes_to_exclude=keep,
                         extra_options={"MatMulConstBOnly": True})
    elif method == "weight-only":
        import logging

        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

        # it logs every node it skips at INFO (thousands of lines per encoder)
        logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(
            logging.WARNING)

        q = MatMulNBitsQuantizer(model, bits=8, block_size=32, is_symmetric=True,
                                 accuracy_level=1, nodes_to_exclude=keep)
        q.process()
        onnx.save(q.model.model, str(dst))
    else:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    half = 0
    if storage == "fp16":
        quantised = onnx.load(str(dst))
        half = fp16_tables(quantised)
        if half:
            onnx.save(quantised, str(dst))
    return {"method": method, "weights": weights if method == "dynamic" else "int8 blocks of 32",
            "quantized": len(targets), "tables": len(tables) + half,
            "token_table": storage if (tables or half) else None,
            "kept_fp32": len(keep),
            "kept_fp32_nodes": keep}
