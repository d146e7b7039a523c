"""A tiny helper for writing ONNX graphs by hand with ``onnx.helper``.

Test graphs carry a real layout's input/output names, dtypes and ranks and compute something
simple and checkable (see :mod:`napari_sam3_onnx.toy.semantics`). This builder keeps their
code short: every method adds one node (or a constant) and returns the new tensor's name.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as exc:  # pragma: no cover - message for users without the toy extra
    raise ImportError(
        "napari_sam3_onnx.toy builds ONNX graphs and needs the 'onnx' package: "
        "pip install 'napari-sam3-onnx[toy]'"
    ) from exc

DTYPES = {
    "float32": TensorProto.FLOAT,
    "float16": TensorProto.FLOAT16,
    "uint8": TensorProto.UINT8,
    "int32": TensorProto.INT32,
    "int64": TensorProto.INT64,
    "bool": TensorProto.BOOL,
}

OPSET = 18


class GraphBuilder:
    """Accumulates nodes, initializers, inputs and outputs of one graph."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._ids = itertools.count()

    def _fresh(self, hint: str) -> str:
        return f"{hint}_{next(self._ids)}"

    # ---- declarations -------------------------------------------------------------------
    def input(self, name: str, dtype: str, shape: list[Any]) -> str:
        """Declare a graph input (``shape`` entries: int, str for a symbolic dim, or None)."""
        self.inputs.append(helper.make_tensor_value_info(name, DTYPES[dtype], shape))
        return name

    def output(self, src: str, name: str, dtype: str, shape: list[Any]) -> str:
        """Expose tensor ``src`` as graph output ``name`` (adds an Identity/Cast node)."""
        if dtype in ("float32",):
            self.op("Identity", [src], out=name)
        else:
            self.op("Cast", [src], out=name, to=DTYPES[dtype])
        self.outputs.append(helper.make_tensor_value_info(name, DTYPES[dtype], shape))
        return name

    def const(self, value: Any, dtype: str = "float32", name: str | None = None) -> str:
        """Add an initializer and return its name."""
        arr = np.asarray(value, dtype={"bool": np.bool_}.get(dtype, dtype))
        name = name or self._fresh("c")
        self.initializers.append(numpy_helper.from_array(arr, name))
        return name

    # ---- nodes --------------------------------------------------------------------------
    def op(self, op_type: str, inputs: list[str], out: str | None = None, **attrs: Any) -> str:
        """Add one node with one output; returns the output name."""
        out = out or self._fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def op_n(self, op_type: str, inputs: list[str], n_out: int, **attrs: Any) -> list[str]:
        """Add one node with ``n_out`` outputs (``TopK``: values, indices); returns their names."""
        outs = [self._fresh(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, **attrs))
        return outs

    def __getattr__(self, op_type: str):
        """``b.Add(x, y)`` is ``b.op("Add", [x, y])``; keyword arguments become attributes."""
        if not op_type[:1].isupper():
            raise AttributeError(op_type)

        def make(*inputs: str, **attrs: Any) -> str:
            return self.op(op_type, list(inputs), **attrs)

        return make

    # ---- convenience --------------------------------------------------------------------
    def resize_to(self, x: str, size: tuple[int, int], batch_channels: tuple[int, int]) -> str:
        """Bilinear Resize of an NCHW tensor to ``size`` (half-pixel, like torch)."""
        sizes = self.const([*batch_channels, *size], "int64")
        return self.op(
            "Resize", [x, "", "", sizes], mode="linear",
            coordinate_transformation_mode="half_pixel",
        )

    def pad_channels(self, x: str, channels: int) -> str:
        """Zero-pad an N1HW tensor to ``channels`` channels (channel 0 keeps ``x``)."""
        if channels == 1:
            return x
        pads = self.const([0, 0, 0, 0, 0, channels - 1, 0, 0], "int64")
        return self.op("Pad", [x, pads], mode="constant")

    def weights(self, x: str, shape: tuple[int, ...]) -> str:
        """Multiply ``x`` by a ones tensor of ``shape``: a "weight" that lands in external data.

        Keeps results unchanged but gives a graph an initializer big enough (> 1 KiB) to be
        written to its ``.data`` file, so tests can damage that file.
        """
        return self.Mul(x, self.const(np.ones(shape, dtype=np.float32)))

    def model(self) -> onnx.ModelProto:
        """Assemble and check the model."""
        graph = helper.make_graph(
            self.nodes, self.name, self.inputs, self.outputs, self.initializers
        )
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="nso-testing"
        )
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model

    def save(self, path: Path, external_data: str | None = None) -> Path:
        """Write the model; with ``external_data`` its initializers go to that file beside it."""
        path = Path(path)
        model = self.model()
        if external_data:
            onnx.save_model(
                model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                location=external_data, size_threshold=1024,
            )
        else:
            onnx.save_model(model, str(path))
        return path
