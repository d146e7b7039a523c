"""What the model section says about a bundle: its name, its model line, whether it is usable.

Reads only small files (``manifest.json``) and the registry; no Qt.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path

from napari_sam3_onnx._napari.model.precision_note import per_workflow_note
from napari_sam3_onnx.models.base import Capability, SamAdapter
from napari_sam3_onnx.models.cpu_features import (
    bundle_int8_weights,
    convert_offer,
    cpu_features,
    int8_format_warning,
)
from napari_sam3_onnx.models.errors import Sam3OnnxError
from napari_sam3_onnx.models.gate_verdicts import verdict_words, workflow_verdicts
from napari_sam3_onnx.models.openvino_runtime import openvino_precision
from napari_sam3_onnx.models.registry import home_dir
from napari_sam3_onnx.models.runtime import device_label
from napari_sam3_onnx.models.workflow_precision import WORKFLOWS, read_bf16

TOY_NOTE = ("TOY TEST MODEL: tiny hand-written graphs that outline bright blobs, so every tab "
            "can be tried on the sample. It is not SAM 3; load real SAM 3 weights for real work.")

#: Words for a provider on the model line.
DEVICE_NAMES = {"CPUExecutionProvider": "CPU", "CUDAExecutionProvider": "CUDA GPU",
                "TensorrtExecutionProvider": "TensorRT GPU", "CoreMLExecutionProvider": "CoreML",
                "DmlExecutionProvider": "DirectML GPU"}
#: What each capability lets the user do, in the order the tabs show them.
CAPABILITY_WORDS = ((Capability.CLICKS, "clicks"), (Capability.BOXES, "boxes"),
                    (Capability.TEXT, "text"), (Capability.EXEMPLARS, "exemplars"),
                    (Capability.MEMORY, "propagation"))


def _registered(folder: Path):
    """The registry entry ``folder`` was downloaded (or built) for, or None."""
    try:
        from napari_sam3_onnx.models.registry import KNOWN_BUNDLES, bundle_dir
    except ImportError:
        return None
    folder = folder.resolve()
    for spec in KNOWN_BUNDLES:
        home = bundle_dir(spec.id).resolve()
        if folder == home or folder.parent == home:
            return spec
    return None


def bundle_precision(folder: Path) -> str | None:
    """Storage precision from the bundle's ``manifest.json`` or its registry entry."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        if isinstance(manifest, dict) and manifest.get("precision"):
            return str(manifest["precision"])
    except (OSError, ValueError):
        pass
    spec = _registered(folder)
    return spec.precision if spec is not None else None


def cpu_path_notes(folder: Path, device: str, per_workflow: bool = True) -> str:
    """Warnings for the CPU path: an int8 format slow or inexact on this CPU, what bf16 runs.

    ``""`` when there is nothing to say; otherwise HTML lines for the model section.
    ``per_workflow``: as in :func:`bf16_notes`.
    """
    notes = []
    if device not in ("cuda", "tensorrt", "coreml", "dml", "directml"):
        warning = int8_format_warning(bundle_int8_weights(folder), cpu_features())
        if warning:
            notes.append(f"<b style='color:orange'>int8 on this CPU:</b> {warning}")
            if offer := convert_offer(folder, cpu_features(), home_dir()):
                notes.append(f"Convert it for this CPU: <tt>{html.escape(offer)}</tt>")
    verdicts = workflow_verdicts(folder)
    if plan_note := per_workflow_note(folder):  # it runs fp32 where the gate failed
        notes.append(plan_note)
    elif verdicts is not None and not all(verdicts.values()):
        notes.append(f"Decision gate against fp32: {verdict_words(verdicts)}. For the "
                     "workflows it fails (or did not run), fp32's answers may differ: use the "
                     "fp32 bundle for them.")
    if openvino_precision(device) == "bf16":
        notes.extend(bf16_notes(folder, per_workflow))
    return "".join(f"<br>{n}" for n in notes)


def bf16_notes(folder: Path, per_workflow: bool = True) -> list[str]:
    """What the bf16 device does with this bundle: which workflows compute in bf16, and why.

    ``per_workflow``: the layout chooses bf16 per workflow (this project's ``nso-sam3``);
    others run it for every workflow or none (:func:`~napari_sam3_onnx.models.bundle.
    open_adapter`).
    """
    grants = read_bf16(folder)
    if not per_workflow and grants.verdicts is not None and not grants.workflow_bf16(None):
        return [html.escape(f"OpenVINO CPU bf16: {grants.words()} by the bf16 gate, but this "
                            "layout runs one arithmetic for all workflows: every workflow "
                            "runs f32 (exact, as OpenVINO CPU).")]
    notes = [html.escape(f"OpenVINO CPU bf16: {grants.note()}.")]
    if grants.workflow_bf16(None) or (per_workflow and any(
            grants.workflow_bf16(k) for k, _ in WORKFLOWS)):
        notes.append("bf16 arithmetic: faster, not exact (about 1.5 % feature error measured "
                     "on SAM 3); choose OpenVINO CPU for fp32's answers.")
    return notes


def bundle_name(folder: Path, toy: bool = False) -> str:
    """What the Model field shows: the toy's or registry entry's name, else the folder's."""
    if toy:
        return "Toy model (not SAM 3)"
    spec = _registered(folder)
    return spec.id if spec is not None else folder.name


def model_line(adapter: SamAdapter, precision: str | None, providers: list[str],
               toy: bool = False) -> str:
    """``"SAM 3 (nso-sam3) · clicks, boxes, text, propagation · fp32 · CPU"``.

    A student image encoder is named first: ``"EfficientSAM3 student image encoder, 12.3 M
    parameters + SAM 3 heads (pixl-sam3) · ..."``.
    """
    family = "Toy model, not SAM 3" if toy else (
        "SAM 3.1" if "3.1" in adapter.layout else "SAM 3")
    if not toy and adapter.encoder_kind:  # a student image encoder feeding SAM 3's heads
        family = f"{adapter.encoder_kind} + {family} heads"
    can = ", ".join(word for cap, word in CAPABILITY_WORDS if adapter.has(cap)) or "nothing"
    device = DEVICE_NAMES.get(providers[0], providers[0]) if providers else "CPU"
    parts = [f"{family} ({adapter.layout})", can, *([precision] if precision else []), device]
    return " · ".join(parts)


def check_usable(adapter: SamAdapter) -> None:
    """Refuse a bundle that can answer neither clicks, boxes nor text (e.g. memory graphs alone).

    Raises
    ------
    Sam3OnnxError
        With what the bundle can do.
    """
    if not (adapter.has(Capability.CLICKS) or adapter.has(Capability.TEXT)):
        caps = ", ".join(sorted(c.value for c in adapter.capabilities))
        raise Sam3OnnxError(f"The {adapter.layout} bundle cannot answer clicks, boxes or text "
                            f"(it can: {caps}). Choose a bundle with a SAM head or a detector.")


def capability_note(adapter: SamAdapter, toy: bool = False) -> str:
    """What the model line adds: a bundle that cannot take clicks (or boxes), the toy's warning.

    HTML, each note on a line of its own (empty for a full bundle that is not the toy).
    """
    note = ""
    if not adapter.has(Capability.CLICKS):
        note = "<br>Boxes only: this bundle has no click decoder."
        if not adapter.has(Capability.BOXES):
            note = "<br>Text only: this bundle has no click or box decoder; use the Text tab."
    if toy:
        note += f"<br><b style='color:orange'>{TOY_NOTE}</b>"
    return note


@dataclass(frozen=True)
class BundleWords:
    """What the model section shows for an opened bundle (worked out off the Qt thread).

    Attributes
    ----------
    name : str
        The Model field's text (:func:`bundle_name`).
    where : str
        The folder's resolved path (the field's tooltip).
    line : str
        The model line with its notes, HTML (:func:`model_line`, :func:`capability_note`,
        :func:`cpu_path_notes`).
    """

    name: str
    where: str
    line: str


def bundle_words(folder: Path, adapter: SamAdapter, device: str, toy: bool) -> BundleWords:
    """:class:`BundleWords` of ``adapter`` opened from ``folder`` for ``device``.

    Reads the manifest, the gate's verdicts and the registry's folders (file system calls and
    path resolution: ~20 ms), so the dock's background load works it out in its worker.
    """
    line = model_line(adapter, bundle_precision(folder), [device_label(device)], toy)
    return BundleWords(bundle_name(folder, toy), str(folder.resolve()),
                       f"{line}{capability_note(adapter, toy)}"
                       f"{cpu_path_notes(folder, device, getattr(adapter, 'routes_bf16', False))}")
