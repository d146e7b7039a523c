"""One bundle, precision per workflow, from the reduced export (export environment only).

``--precision int8`` (``--int8-candidates per-workflow``, the default) converts the image encoder
and the memory attention, gates them workflow by workflow and keeps the int8 graphs for the
workflows that pass beside the fp32 ones. Checked here on the reduced random-weight bundle
(``NSO_BUNDLE``): the manifest grants int8 exactly where the verdicts pass, the fp32 graphs are
the source's bytes, and the bundle, run as the plugin runs it (each workflow through the
encoder the manifest grants it), keeps fp32's decisions in **every** workflow.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("sam3")

pytestmark = [pytest.mark.export, pytest.mark.slow, pytest.mark.timeout(2400)]


@pytest.fixture(scope="module")
def bundle() -> Path:
    given = os.environ.get("NSO_BUNDLE")
    if not given or not (Path(given) / "manifest.json").is_file():
        pytest.skip("set NSO_BUNDLE to an exported reduced bundle (scripts/test_export.sh)")
    return Path(given)


@pytest.fixture(scope="module")
def built(bundle, tmp_path_factory):
    from napari_sam3_onnx.export import precision
    from napari_sam3_onnx.export.gate import decisions

    fp32 = decisions(bundle)
    p = argparse.ArgumentParser()
    precision.add_precision_arguments(p)
    out = tmp_path_factory.mktemp("per-workflow") / "bundle"
    original = precision.cached_decisions
    precision.cached_decisions = lambda folder, cache: fp32  # made once, above
    try:
        code = precision.run_precision(
            p.parse_args(["--precision", "int8", "--keep-failed"]), bundle, out)
    finally:
        precision.cached_decisions = original
    return out, code, fp32


def test_the_manifest_grants_int8_where_the_verdicts_pass(bundle, built):
    from napari_sam3_onnx.export.manifest import sha256
    from napari_sam3_onnx.models.workflow_precision import read_plan

    out, code, _ = built
    manifest = json.loads((out / "manifest.json").read_text())
    verdicts = manifest["decision_gate"]["workflows"]
    routes = manifest["workflow_precision"]
    print("per-workflow bundle (reduced):", manifest["precision"], json.dumps(verdicts))
    assert {k: r["precision"] == "int8" for k, r in routes.items()} == {
        k: v is True for k, v in verdicts.items()}
    assert code == (0 if any(v is True for v in verdicts.values()) else 1)
    source = json.loads((bundle / "manifest.json").read_text())
    assert manifest["graphs"] == source["graphs"]  # the fp32 files keep their names
    for name in source["graphs"].values():
        assert sha256(out / name) == source["files"][name]["sha256"], name
    plan = read_plan(out)
    assert plan is not None
    for key, route in routes.items():
        want = "image_encoder.int8.onnx" if route["precision"] == "int8" else "image_encoder.onnx"
        assert route["graphs"]["image_encoder"] == want, key
    prop = routes["propagation"]["graphs"]["memory_attention"]
    assert prop == ("memory_attention.int8.onnx" if routes["propagation"]["precision"] == "int8"
                    else "memory_attention.onnx")
    on_disk = {p.name for p in out.iterdir()}
    assert on_disk == set(manifest["files"]) | {"manifest.json"}  # nothing unlisted, none lost


def test_every_workflow_keeps_fp32_decisions_as_the_plugin_runs_it(built):
    from napari_sam3_onnx.export.gate import compare, decisions

    out, _, fp32 = built
    manifest = json.loads((out / "manifest.json").read_text())
    routed = decisions(out)  # each stage through the encoder the manifest grants it
    result = compare(fp32, routed)
    print("per-workflow bundle against fp32:", json.dumps(result["summary"]))
    assert result["workflows"] == dict.fromkeys(result["workflows"], True)
    routes = manifest["workflow_precision"]
    # an int8 grant really runs int8 (not fp32 under another name); an fp32 one runs fp32
    clicks_same = all(np.array_equal(a["logits"], b["logits"])
                      for a, b in zip(fp32["clicks"], routed["clicks"], strict=True))
    assert clicks_same == (routes["clicks"]["precision"] == "fp32")
    prop_same = all(np.array_equal(a[1], b[1]) for a, b in
                    zip(fp32["propagation"], routed["propagation"], strict=True))
    assert prop_same == (routes["propagation"]["precision"] == "fp32")
    text_same = np.array_equal(fp32["concepts"][0]["scores"], routed["concepts"][0]["scores"])
    assert text_same == (routes["text"]["precision"] == "fp32")
