"""Open napari with the synthetic sample and the SAM 3 dock (on its Clicks and boxes tab).

Usage::

    python -m napari_sam3_onnx                  # pick a model in the widget
    python -m napari_sam3_onnx --bundle DIR     # load a SAM 3 ONNX bundle
    python -m napari_sam3_onnx --test-bundle    # toy model, no weights needed

``--test-bundle`` loads the registry's toy model (built once into the plugin's cache; it needs
the ``onnx`` package, the ``toy`` extra): tiny hand-made graphs that outline bright blobs, so
every tab (clicks and boxes, text, propagation) can be tried on the sample without downloading
SAM 3. The widget labels it as a toy model.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

PLUGIN = "napari-sam3-onnx"
WIDGET = "SAM 3"


def build_parser() -> argparse.ArgumentParser:
    """Command-line options of the launcher."""
    parser = argparse.ArgumentParser(prog="python -m napari_sam3_onnx",
                                     description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--bundle", help="folder with a SAM 3 ONNX bundle to load")
    group.add_argument("--test-bundle", action="store_true",
                       help="build and load the toy test model (not SAM 3; needs 'onnx')")
    parser.add_argument("--no-sample", action="store_true", help="do not open the sample")
    return parser


def open_viewer(bundle: str | None = None, test_bundle: bool = False, sample: bool = True,
                show: bool = True, viewer=None):
    """Create the viewer, add the sample and dock the widget; returns ``(viewer, widget)``.

    ``viewer``: use this viewer instead of creating one (tests pass napari's fixture viewer, so
    napari's per-process action registry is not filled twice).
    """
    if viewer is None:
        import napari

        viewer = napari.Viewer(show=show)
    if sample:
        viewer.open_sample(PLUGIN, "synthetic_nuclei")
    _dock, widget = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    if show:  # the dock took canvas width: lay the window out, then fit the image to the rest
        from qtpy.QtWidgets import QApplication

        QApplication.processEvents()
        viewer.reset_view()
    if test_bundle:
        widget.model.load_toy()
    elif bundle:
        widget.load_bundle(bundle)
    return viewer, widget


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: open the viewer and run the Qt event loop."""
    import napari

    args = build_parser().parse_args(argv)
    open_viewer(args.bundle, args.test_bundle, sample=not args.no_sample)
    napari.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
