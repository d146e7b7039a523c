"""Headless Python API: SAM 3 through ONNX Runtime on arrays and files, no napari.

Every workflow has the same two entry points:

* ``iter_<workflow>(workspace, refs, <prompts>, *, cancelled=None)`` yields one result per
  plane as it finishes. ``workspace`` is a :class:`Workspace` (the model, its encoder and
  caches, an embedding store, tiling: ``bundle.workspace(store)``), ``refs`` the planes
  (:func:`refs_along_axis`), ``cancelled`` a cancel token checked between planes. The dock's
  tabs and the CLI run these same generators.
* ``<workflow>(model_or_folder, data, ...)`` does the whole run in one call on an array or a
  file (``model_or_folder``: an opened :class:`Bundle`, a bundle folder or a registry id) and
  returns labels.

============================  ==================================  ===========================
workflow                      per plane                           one call
============================  ==================================  ===========================
clicks and boxes              :func:`iter_segment`                :func:`segment`
automatic ("everything")      :func:`iter_segment_all`            :func:`segment_all`
concept search (text)         :func:`iter_search`                 :func:`search_text`
exemplar search from labels   :func:`iter_search`                 :func:`search_like`
propagation through a stack   :func:`iter_propagate`              :func:`propagate`
tracked automatic             :func:`iter_segment_tracked`        :func:`segment_all_tracked`
============================  ==================================  ===========================

plus :func:`precompute` (encode once into a store), :func:`refine` and :func:`repropagate`
(correct existing labels) and :func:`evaluate` (score labels against ground truth).

Everything works plane by plane, so numpy arrays, dask arrays, zarr arrays and files opened
with :func:`read_image` (TIFF, ``.npy``, zarr, OME-Zarr) are never loaded whole. Images are
``(..., rows, cols)`` (or ``(..., rows, cols, 3|4)`` with ``rgb=True``); ``axis`` names the
slice axis, which is moved to the front (the other axes keep their order); points and boxes are
``(row, col)`` in slice pixels. Labels are int32, 0 = background. Anything not listed in
``__all__`` is internal: importable from its module, but not a promise.

Examples
--------
>>> from napari_sam3_onnx import api
>>> bundle = api.open_bundle("hf-tracker")            # or a folder of .onnx files
>>> stack = api.read_image("nuclei.tif")              # (z, rows, cols), read lazily
>>> api.precompute(bundle, stack, "nuclei.zarr", window=(500, 4000))   # encode once
>>> mask = api.segment(bundle, stack, [[40, 61]], index=(3,), window=(500, 4000),
...                    store="nuclei.zarr").mask     # (rows, cols) bool, no encoding
>>> ws = bundle.workspace("nuclei.zarr")             # the model, its encoder over the store
>>> refs = api.refs_along_axis(stack, window=(500, 4000))             # one per z
>>> for step in api.iter_search(ws, refs, ["nucleus"]):              # plane by plane
...     print(step.index, len(step.result.instances))

The encoder is the slow step (seconds per slice on a CPU); :func:`precompute` writes each
slice's embedding once into an embedding store, and every other function takes ``store=`` to
read from it (and fill it). Pass ``client=`` (a ``dask.distributed.Client``) to
:func:`precompute` to spread the slices over a cluster.
"""

from __future__ import annotations

from ..engine.automatic import AutoMaskSettings
from ..engine.encoding import refs_along_axis
from ..engine.interactive import Prompt
from ..engine.store.verify import verify_store
from .automatic import iter_segment_all, segment_all
from .automatic_tracked import iter_segment_tracked, segment_all_tracked
from .bundles import Bundle, open_bundle
from .clicks import iter_segment, segment
from .encode import precompute
from .evaluate import evaluate
from .exemplars import search_like
from .io import InputError, read_image
from .propagate import Seed, iter_propagate, propagate
from .refine import refine
from .repropagate import repropagate
from .search import iter_search
from .text import search_text
from .workspace import Workspace

__all__ = [
    "AutoMaskSettings", "Bundle", "InputError", "Prompt", "Seed", "Workspace", "evaluate",
    "iter_propagate", "iter_search", "iter_segment", "iter_segment_all", "iter_segment_tracked",
    "open_bundle", "precompute", "propagate", "read_image", "refine", "refs_along_axis",
    "repropagate", "search_like", "search_text", "segment", "segment_all",
    "segment_all_tracked", "verify_store",
]
