"""Running a bundle's ONNX graphs through OpenVINO's own CPU runtime (the ``[openvino]`` extra).

The same ``.onnx`` files as onnxruntime's, read by OpenVINO's ONNX frontend
(``Core().compile_model(path, "CPU", properties)``) with:

* ``INFERENCE_PRECISION_HINT``: ``f32`` (exact: set on purpose, since OpenVINO picks bf16 by
  itself on CPUs with AMX) or ``bf16`` (approximate, ~2x faster where the CPU has AVX512_BF16 or
  AMX; see :mod:`.cpu_features`);
* ``INFERENCE_NUM_THREADS``: the runtime config's threads (0: OpenVINO's choice);
* ``NUM_STREAMS`` 1 and the ``LATENCY`` performance hint: one image at a time, as the plugin
  encodes;
* ``CACHE_DIR``: the compiled model is cached in the data folder, so the second load of a graph
  skips the compilation. OpenVINO's own cache key does not notice new weights in the external
  data file beside an unchanged ``.onnx`` (measured: the old compiled graph came back), so each
  graph gets its own cache folder named by the size and modification time of its files
  (:func:`graph_cache_dir`); a changed graph compiles afresh and its stale blobs are removed.

``openvino`` is imported only when a graph is compiled: the plugin runs without it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import shutil
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .cpu_features import cpu_features
from .preempt import CancelToken

log = logging.getLogger(__name__)

#: The device menu's names for OpenVINO and the inference precision each asks for.
OPENVINO_F32 = "OpenVINO CPU"
OPENVINO_BF16 = "OpenVINO CPU bf16"
#: Names a user may give for each (compared case-insensitively, with "_" and "-" as spaces).
_NAMES = {"openvino": "f32", "openvino cpu": "f32", "openvino f32": "f32",
          "openvino cpu f32": "f32", "openvino bf16": "bf16", "openvino cpu bf16": "bf16"}
#: Where the compiled models are cached, under the data folder.
CACHE_SUBDIR = "openvino-cache"


def openvino_precision(request: object) -> str | None:
    """``"f32"`` or ``"bf16"`` if ``request`` names an OpenVINO device, else None.

    ``request`` is a device / provider request as :class:`~.runtime.RuntimeConfig` holds it:
    one string (``"OpenVINO CPU bf16"``, ``"openvino"``, ``"openvino-bf16"``) or a sequence
    whose first entry is read.
    """
    if not isinstance(request, str):
        if not isinstance(request, Sequence) or not request:
            return None
        request = request[0]
    if not isinstance(request, str):
        return None
    key = " ".join(request.lower().replace("_", " ").replace("-", " ").split())
    return _NAMES.get(key)


def device_name(precision: str) -> str:
    """The device menu's name for an OpenVINO inference precision."""
    return OPENVINO_BF16 if precision == "bf16" else OPENVINO_F32


def openvino_installed() -> bool:
    """Whether the ``openvino`` package can be imported (found without importing it)."""
    try:
        return importlib.util.find_spec("openvino") is not None
    except (ImportError, ValueError):
        return False


def openvino_devices() -> list[str]:
    """The OpenVINO device names this machine offers (none without ``openvino``).

    ``OpenVINO CPU`` and, where the CPU has native bf16 (AVX512_BF16 or AMX),
    ``OpenVINO CPU bf16``.
    """
    if not openvino_installed():
        return []
    names = [OPENVINO_F32]
    if cpu_features().bf16:
        names.append(OPENVINO_BF16)
    return names


def openvino_version() -> str | None:
    """The installed OpenVINO version (imports it), or None if it cannot be imported."""
    try:
        import openvino as ov
    except Exception:  # a broken install is as good as none here
        return None
    return str(ov.get_version())


def graph_cache_dir(root: Path, path: Path, data_files: Sequence[str] = ()) -> Path:
    """The compiled-model cache folder of one graph and the exact files it is made of.

    ``root / <graph path digest> / <files digest>``: the second part changes whenever the
    ``.onnx`` or one of its external ``data_files`` (names beside it) is rewritten (size,
    modification or change time, inode); other versions of the same graph's folder are
    removed (they are this plugin's own cache, never a user's file).
    """
    path = Path(path).resolve()
    files = [path, *sorted({path.parent / name for name in data_files})]
    # ctime and inode too: a tool can set an mtime back (touch -r), never a ctime, and a file
    # replaced by another gets a new inode; size and mtime alone could serve stale weights.
    stats = [(f.name, *((st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
                        if (st := _stat(f)) else (None,) * 5)) for f in files]
    graph = root / hashlib.sha256(str(path).encode()).hexdigest()[:16]
    here = graph / hashlib.sha256(json.dumps(stats).encode()).hexdigest()[:16]
    if graph.is_dir():
        for old in graph.iterdir():
            if old != here and old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
    return here


def _stat(path: Path):
    try:
        return path.stat()
    except OSError:
        return None


class OpenVinoSession:
    """One graph compiled for OpenVINO's CPU plugin; runs like an onnxruntime session.

    Parameters
    ----------
    path : Path
        The ``.onnx`` file (external data beside it is read by OpenVINO too).
    precision : {"f32", "bf16"}
        ``INFERENCE_PRECISION_HINT``.
    threads : int
        ``INFERENCE_NUM_THREADS``; 0 lets OpenVINO decide.
    cache_dir : Path or None
        The cache root for compiled models (each graph gets its own folder in it,
        :func:`graph_cache_dir`); None: no cache.

    Raises
    ------
    ImportError
        ``openvino`` is not installed.
    RuntimeError
        OpenVINO cannot read or compile the graph (an operator it lacks, ...).
    """

    def __init__(self, path: Path, precision: str = "f32", threads: int = 0,
                 cache_dir: Path | None = None) -> None:
        import openvino as ov

        self.path, self.precision = Path(path), precision
        props: dict[str, Any] = {"INFERENCE_PRECISION_HINT": precision, "NUM_STREAMS": 1,
                                 "PERFORMANCE_HINT": "LATENCY"}
        if threads > 0:
            props["INFERENCE_NUM_THREADS"] = int(threads)
        if cache_dir is not None:
            from .graph_info import read_signature

            data = [ref.location for ref in read_signature(self.path).external]
            folder = graph_cache_dir(Path(cache_dir), self.path, data)
            folder.mkdir(parents=True, exist_ok=True)
            props["CACHE_DIR"] = str(folder)
        core = ov.Core()
        self._model = core.compile_model(str(self.path), "CPU", props)
        self._names = {name for port in self._model.outputs for name in port.get_names()}
        self._lock = threading.Lock()
        self._request = self._model.create_infer_request()

    def get_providers(self) -> list[str]:
        """``["OpenVINO CPU"]`` or ``["OpenVINO CPU bf16"]`` (onnxruntime's method name)."""
        return [device_name(self.precision)]

    def run(self, outputs: Sequence[str], feed: Mapping[str, np.ndarray],
            token: CancelToken | None = None) -> list[np.ndarray]:
        """Run the graph on ``feed`` and return ``outputs`` in order (copies, owned by the caller).

        With ``token``, ``token.cancel()`` from another thread stops the run
        (``InferRequest.cancel()``, armed only while this run holds the request, so it never
        stops another caller's run); the request is reusable afterwards.

        Raises
        ------
        KeyError
            An output the graph does not have.
        Preempted
            ``token`` was cancelled before or during the run.
        """
        unknown = [name for name in outputs if name not in self._names]
        if unknown:
            raise KeyError(f"{self.path.name}: no outputs {unknown} in OpenVINO's graph")
        with self._lock:  # one request, reused: infer requests are not thread-safe
            if token is None:
                result = self._request.infer(dict(feed))
            else:
                result = token.run(lambda: self._request.infer(dict(feed)), self._request.cancel,
                                   self.path.name)
            return [np.array(result[self._model.output(name)], copy=True) for name in outputs]
