"""Which graph file (and precision) each workflow of a per-workflow bundle runs.

``python -m napari_sam3_onnx.export --precision int8`` (and ``napari-sam3-onnx convert``) write
**one bundle** holding the fp32 graphs and, beside them, an int8 image encoder (and an int8
memory attention) for the workflows whose decision-gate verdict passed. The manifest says which
file each workflow uses::

    "workflow_precision": {
      "clicks": {"precision": "int8",
                 "graphs": {"image_encoder": "image_encoder.int8.onnx"}},
      "text": {"precision": "fp32", "graphs": {"image_encoder": "image_encoder.onnx"}},
      "exemplars": {"precision": "fp32", "graphs": {"image_encoder": "image_encoder.onnx"}},
      "propagation": {"precision": "int8",
                      "graphs": {"image_encoder": "image_encoder.int8.onnx",
                                 "memory_attention": "memory_attention.int8.onnx"}},
      "automatic": {"precision": "int8",
                    "graphs": {"image_encoder": "image_encoder.int8.onnx"}}
    }

``graphs`` (the manifest's usual role -> file map) keeps naming the fp32 files: a reader that
knows nothing of this record runs fp32 everywhere. An embedding made by one encoder file is
never served to a workflow that runs another (:meth:`WorkflowPlan.variant` is part of the cache
key), so **a plane used by two workflows of different precisions is encoded once per
precision**. Reading the plan needs no weights and no exporter.

OpenVINO's bf16 arithmetic is chosen per workflow the same way (:class:`Bf16Grants`): the
gate's bf16 verdicts (``python -m napari_sam3_onnx.export.gate BUNDLE BUNDLE --device
"OpenVINO CPU bf16" --record``) are kept in the manifest under :data:`BF16_KEY`, and on the
"OpenVINO CPU bf16" device the image encoder (and propagation's memory attention) compute in
bf16 only for the workflows whose verdict passed; every other workflow, and every other graph,
runs OpenVINO's f32. A bundle without the record runs f32 for every workflow there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .values import Capability

#: The manifest key of the record.
KEY = "workflow_precision"
#: Workflow keys (those of the gate, :data:`~.gate_verdicts.WORKFLOW_WORDS`) with their words.
WORKFLOWS = (("clicks", "clicks and boxes"), ("text", "text"), ("exemplars", "exemplars"),
             ("propagation", "propagation"), ("automatic", "automatic"))
#: The workflow an encoder request serves (``SliceEncoder.embed(ref, need)``); the automatic
#: generator asks with :attr:`Capability.ENCODE`, propagation with :attr:`Capability.MEMORY`.
WORKFLOW_OF = {Capability.CLICKS: "clicks", Capability.BOXES: "clicks",
               Capability.TEXT: "text", Capability.EXEMPLARS: "exemplars",
               Capability.MEMORY: "propagation", Capability.ENCODE: "automatic"}
#: The roles a plan may route per workflow.
ROLES = ("image_encoder", "memory_attention")


class WorkflowPlanError(ValueError):
    """A ``workflow_precision`` record that does not say which file a workflow uses."""


@dataclass(frozen=True)
class WorkflowPlan:
    """The per-workflow graphs of one bundle.

    Attributes
    ----------
    folder : Path
        The bundle folder.
    precision : dict of str to str
        Workflow key -> ``"int8"`` / ``"fp32"`` (as the manifest says).
    graphs : dict of str to dict of str to str
        Workflow key -> role (:data:`ROLES`) -> file name in ``folder``.
    default : dict of str to str
        Role -> the file the manifest's ``graphs`` names (what a request without a
        workflow runs: the fp32 graphs).
    """

    folder: Path
    precision: dict[str, str]
    graphs: dict[str, dict[str, str]]
    default: dict[str, str]

    def file_for(self, need: Capability | None, role: str = "image_encoder") -> str | None:
        """The file ``role`` runs for the workflow behind ``need`` (None: the role is absent)."""
        workflow = None if need is None else WORKFLOW_OF.get(need)
        if workflow is not None and role in self.graphs.get(workflow, {}):
            return self.graphs[workflow][role]
        return self.default.get(role)

    def variant(self, need: Capability | None) -> str | None:
        """What identifies the embeddings of ``need``'s encoder: its file name (None: default).

        Embeddings of the default (fp32) encoder keep the bundle's plain cache key, so a bundle
        without a plan and one whose every workflow runs fp32 cache alike.
        """
        chosen = self.file_for(need)
        return None if chosen == self.default.get("image_encoder") else chosen

    def files(self, role: str) -> list[str]:
        """Every file ``role`` runs, the default first."""
        out = [self.default[role]] if role in self.default else []
        for routes in self.graphs.values():
            if role in routes and routes[role] not in out:
                out.append(routes[role])
        return out

    def words(self) -> str:
        """``"int8: clicks and boxes, propagation; fp32: text, exemplars, automatic"``."""
        groups: dict[str, list[str]] = {}
        for key, words in WORKFLOWS:
            if key in self.precision:
                groups.setdefault(self.precision[key], []).append(words)
        return "; ".join(f"{p}: {', '.join(w)}" for p, w in groups.items())

    def double_encode_note(self) -> str:
        """Which workflows encode a plane with different files ("" when all share one)."""
        by_file: dict[str, list[str]] = {}
        for key, words in WORKFLOWS:
            chosen = self.file_for(_need_of(key))
            if chosen is not None and key in self.precision:
                by_file.setdefault(chosen, []).append(words)
        if len(by_file) < 2:
            return ""
        sides = " / ".join(f"{', '.join(w)} ({self.precision_of(f)})"
                           for f, w in by_file.items())
        return (f"a plane used by workflows of different precisions is encoded once per "
                f"precision ({sides}): the first prompt of the other kind on a plane pays "
                "a second encode, and both embeddings are cached")

    def precision_of(self, file: str) -> str:
        """The precision the plan gives ``file`` (``"fp32"`` for the default graphs)."""
        for key, routes in self.graphs.items():
            if file in routes.values():
                return self.precision.get(key, "?")
        return "fp32"


def _need_of(workflow: str) -> Capability:
    return next(n for n, w in WORKFLOW_OF.items() if w == workflow)


def _safe_name(folder: Path, name: object, where: str) -> str:
    if not isinstance(name, str) or not name or Path(name).name != name:
        raise WorkflowPlanError(f"{folder / 'manifest.json'}: {where} should name a file in the "
                                f"bundle folder, not {name!r}")
    if not (folder / name).is_file():
        raise WorkflowPlanError(f"{folder / 'manifest.json'}: {where} names {name}, which is "
                                f"not in {folder}")
    return name


def plan_from_manifest(folder: Path | str, manifest: dict) -> WorkflowPlan | None:
    """The plan a parsed ``manifest`` records for ``folder`` (None: no per-workflow record).

    Raises
    ------
    WorkflowPlanError
        The record names a file that is not in the folder, or is malformed.
    """
    folder = Path(folder)
    record = manifest.get(KEY)
    if record is None:
        return None
    if not isinstance(record, dict):
        raise WorkflowPlanError(f"{folder / 'manifest.json'}: {KEY} should be a mapping")
    listed = manifest.get("graphs")
    base: dict = listed if isinstance(listed, dict) else {}
    default = {r: _safe_name(folder, base[r], f"graphs.{r}") for r in ROLES if r in base}
    precision, graphs = {}, {}
    for key, _ in WORKFLOWS:
        entry = record.get(key)
        if entry is None:
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("graphs", {}), dict):
            raise WorkflowPlanError(f"{folder / 'manifest.json'}: {KEY}.{key} is malformed")
        precision[key] = str(entry.get("precision", "?"))
        graphs[key] = {r: _safe_name(folder, f, f"{KEY}.{key}.graphs.{r}")
                       for r, f in entry.get("graphs", {}).items() if r in ROLES}
    return WorkflowPlan(folder, precision, graphs, default)


def read_plan(folder: Path | str) -> WorkflowPlan | None:
    """The plan of the bundle in ``folder`` (None: no manifest or no per-workflow record).

    Raises
    ------
    WorkflowPlanError
        As :func:`plan_from_manifest`.
    """
    try:
        manifest = json.loads((Path(folder) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return plan_from_manifest(folder, manifest) if isinstance(manifest, dict) else None


# ---- OpenVINO bf16, per workflow ------------------------------------------------------------
#: The manifest key of the bf16 gate verdicts (``python -m napari_sam3_onnx.export.gate FP32
#: BUNDLE --device "OpenVINO CPU bf16" --record`` writes it into BUNDLE's manifest).
BF16_KEY = "openvino_bf16"
#: The roles that compute in bf16 for a workflow whose bf16 verdict passed; every other graph
#: (prompt decoder, language encoder, detector, memory encoder) runs f32 on that device, in the
#: gate as in the plugin, so what was judged is what runs.
BF16_ROLES = {"clicks": ("image_encoder",), "text": ("image_encoder",),
              "exemplars": ("image_encoder",), "automatic": ("image_encoder",),
              "propagation": ("image_encoder", "memory_attention")}
#: How to record the verdicts (said where none are recorded).
BF16_RECORD_HINT = ('python -m napari_sam3_onnx.export.gate BUNDLE BUNDLE '
                    '--device "OpenVINO CPU bf16" --record')


@dataclass(frozen=True)
class Bf16Grants:
    """Which workflows compute in bf16 on the ``"OpenVINO CPU bf16"`` device.

    Attributes
    ----------
    verdicts : dict of str to bool or None, or None
        Workflow key -> the bf16 gate verdict the manifest records (None: no record, or one
        made for other graph files: see ``stale``).
    everywhere : bool
        Every workflow in bf16 whatever the verdicts (the gate's own mode: it judges bf16).
    stale : str
        Why a record in the manifest was not used ("" when none was ignored).
    """

    verdicts: dict[str, bool | None] | None
    everywhere: bool = False
    stale: str = ""

    def workflow_bf16(self, workflow: str | None) -> bool:
        """Whether ``workflow`` (a key of :data:`WORKFLOWS`) computes in bf16.

        None is a request without a workflow (an embedding store's); it runs bf16 only when
        every workflow passed: a store's embeddings serve them all.
        """
        if self.everywhere:
            return True
        if self.verdicts is None:
            return False
        if workflow is None:
            return all(self.verdicts.get(k) is True for k, _ in WORKFLOWS)
        return self.verdicts.get(workflow) is True

    def runs_bf16(self, need: Capability | None) -> bool:
        """:meth:`workflow_bf16` of the workflow behind an encoder request ``need``."""
        workflow = None if need is None else WORKFLOW_OF.get(need)
        if need is not None and workflow is None:
            return self.everywhere
        return self.workflow_bf16(workflow)

    def words(self) -> str:
        """``"bf16: text, propagation, automatic; f32: clicks and boxes, exemplars"``."""
        if self.everywhere:
            return "bf16: every workflow (judged, not granted)"
        on = [w for k, w in WORKFLOWS if self.workflow_bf16(k)]
        off = [w for k, w in WORKFLOWS if not self.workflow_bf16(k)]
        return "; ".join(([f"bf16: {', '.join(on)}"] if on else [])
                         + ([f"f32: {', '.join(off)}"] if off else []))

    def note(self) -> str:
        """What the model line and ``inspect`` say about the bf16 device for this bundle."""
        if self.everywhere:
            return self.words()
        if self.verdicts is None:
            why = self.stale or "this bundle's manifest records no bf16 gate verdicts"
            return (f"{why}, so every workflow runs f32 (exact, as OpenVINO CPU); record "
                    f"them with: {BF16_RECORD_HINT}")
        text = f"per workflow, by its bf16 gate verdict ({self.words()})"
        if any(self.workflow_bf16(k) for k, _ in WORKFLOWS) and not self.workflow_bf16(None):
            text += ("; a plane used by workflows of both kinds is encoded once in each "
                     "arithmetic (both embeddings cached), and an embedding store is f32")
        return text


def _graph_digests(manifest: dict) -> dict[str, str | None]:
    """``{graph file: sha256}`` of the ``.onnx`` files the manifest lists (None: no digest)."""
    files = manifest.get("files")
    if not isinstance(files, dict):
        return {}
    return {n: (f.get("sha256") if isinstance(f, dict) else None)
            for n, f in files.items() if str(n).endswith(".onnx")}


def bf16_record(result: dict, manifest: dict, openvino: str | None) -> dict:
    """The manifest record of one bf16 gate ``result`` (:func:`~..export.gate.compare`'s).

    It holds the per-workflow verdicts, the summary, the thresholds, the OpenVINO version and
    the digests of the graph files the manifest lists: a record made for other files (a
    re-export into the same folder) is not used (:func:`read_bf16`).
    """
    return {"device": "OpenVINO CPU bf16", "openvino": openvino,
            "workflows": {k: result["workflows"].get(k) for k, _ in WORKFLOWS},
            "summary": result.get("summary", {}), "gates": result.get("gates", {}),
            "graphs": _graph_digests(manifest)}


def bf16_from_manifest(manifest: dict, everywhere: bool = False) -> Bf16Grants:
    """The bf16 grants a parsed ``manifest`` records (no record: f32 for every workflow)."""
    record = manifest.get(BF16_KEY) if isinstance(manifest, dict) else None
    if everywhere or not isinstance(record, dict):
        return Bf16Grants(None, everywhere)
    workflows = record.get("workflows")
    if not isinstance(workflows, dict):
        return Bf16Grants(None, stale=f"its {BF16_KEY} record is malformed")
    recorded = record.get("graphs") if isinstance(record.get("graphs"), dict) else {}
    if recorded != _graph_digests(manifest):
        return Bf16Grants(None, stale=f"its {BF16_KEY} verdicts were recorded for other graph "
                                      "files than the manifest lists now")
    return Bf16Grants({k: None if workflows.get(k) is None else bool(workflows[k])
                       for k, _ in WORKFLOWS})


def read_bf16(folder: Path | str, everywhere: bool = False) -> Bf16Grants:
    """The bf16 grants of the bundle in ``folder`` (no manifest or record: none granted)."""
    try:
        manifest = json.loads((Path(folder) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {}
    return bf16_from_manifest(manifest if isinstance(manifest, dict) else {}, everywhere)
