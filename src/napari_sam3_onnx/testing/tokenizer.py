"""A concept test bundle with the toy tokenizer beside its graphs, and the toy tokenizer itself.

:func:`write_toy_tokenizer` and the merge list it is made of live in
:mod:`napari_sam3_onnx.toy.tokenizer` (the shipped toy model writes it) and are re-exported here
for the tests; :func:`build_text_bundle` builds this package's concept layouts, so it stays here.
"""

from __future__ import annotations

from pathlib import Path

from ..toy.tokenizer import *  # noqa: F403
from ..toy.tokenizer import write_toy_tokenizer


def build_text_bundle(folder: Path | str, layout: str = "wkentaro-v0.3", geometry=None,
                      words: dict[str, int] | None = None) -> Path:
    """A concept test bundle of ``layout`` with the toy tokenizer beside its graphs.

    Parameters
    ----------
    folder : Path or str
        Where to write the bundle.
    layout : {"wkentaro-v0.3", "wkentaro-v0.6", "samexporter", "autognosi"}
        Which export layout to imitate (0.5 cut in the graph for wkentaro; raw heads otherwise).
    geometry : TestGeometry, optional
        :data:`~napari_sam3_onnx.toy.geometry.SMALL` by default.
    words : dict of str to int, optional
        Passed to :func:`write_toy_tokenizer`.
    """
    from ..toy.geometry import SMALL
    from .autognosi import build_autognosi
    from .samexporter import build_samexporter
    from .wkentaro import build_wkentaro_v03, build_wkentaro_v06

    builders = {"wkentaro-v0.3": build_wkentaro_v03, "wkentaro-v0.6": build_wkentaro_v06,
                "samexporter": build_samexporter, "autognosi": build_autognosi}
    if layout not in builders:
        raise ValueError(f"unknown layout {layout!r}; choose one of {sorted(builders)}")
    out = builders[layout](Path(folder), geometry or SMALL)
    write_toy_tokenizer(out, words)
    return Path(out)
