"""The one place that creates the sessions that run a bundle's graphs.

Execution providers are chosen here (automatic, or a user's list), threads and memory options are
set on purpose, sessions are created lazily (a workflow that never uses the language encoder never
loads its 1.4 GB), and every run asks only for the outputs its caller uses.

Two runtimes sit behind :class:`LazySession`: onnxruntime (the default, always installed) and,
when the device asked for is ``"OpenVINO CPU"`` or ``"OpenVINO CPU bf16"``, OpenVINO's own
(:mod:`.openvino_runtime`, the optional ``[openvino]`` extra). A graph OpenVINO cannot compile
(or an OpenVINO that is not installed) falls back to onnxruntime's CPU provider, per graph, with a
warning that names the graph and the reason.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import onnxruntime as ort

from .errors import CorruptModelError
from .graph_info import GraphSignature, check_external_data, read_signature
from .openvino_runtime import (
    CACHE_SUBDIR,
    OPENVINO_F32,
    OpenVinoSession,
    device_name,
    openvino_precision,
)
from .preempt import CancelToken, current_token

log = logging.getLogger(__name__)

#: Providers tried, best first, when the user asks for "auto".
AUTO_PROVIDERS = (
    "CUDAExecutionProvider",
    "CoreMLExecutionProvider",
    "DmlExecutionProvider",
    "CPUExecutionProvider",
)

#: Short names a user may type for a provider.
PROVIDER_ALIASES = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "gpu": "CUDAExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "directml": "DmlExecutionProvider",
    "dml": "DmlExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
}


def device_label(request: str | Sequence[str] = "auto") -> str:
    """The runtime a device request runs on: ``"OpenVINO CPU bf16"`` or the first provider."""
    precision = openvino_precision(request)
    return device_name(precision) if precision else resolve_providers(request)[0]


def approximate_arithmetic(adapter: object) -> str | None:
    """``"bf16"`` if a workflow-less encode computes in OpenVINO's bf16, else None.

    A workflow-less encode is an embedding store's or a precompute's. Embeddings computed
    that way are not fp32's: embedding stores key them apart
    (:meth:`~napari_sam3_onnx.engine.store.keys.BundleTag.for_folder`). An adapter that
    routes bf16 per workflow says it itself (``store_arithmetic()``); for the others any
    graph session that asks OpenVINO for bf16 counts.
    """
    own = getattr(adapter, "store_arithmetic", None)
    if callable(own):
        return own()
    for value in vars(adapter).values():
        if isinstance(value, LazySession) and value.config.openvino == "bf16":
            return "bf16"
    return None


def available_providers() -> list[str]:
    """Providers the installed onnxruntime build offers (CPU is always among them)."""
    return list(ort.get_available_providers())


def resolve_providers(request: str | Sequence[str] = "auto") -> list[str]:
    """Turn a user's provider request into a list onnxruntime accepts.

    ``"auto"`` picks the best available of :data:`AUTO_PROVIDERS`. A provider that this
    onnxruntime build lacks is dropped with a warning; CPU is always appended as the fallback.
    An OpenVINO device (``"OpenVINO CPU"``, see :mod:`.openvino_runtime`) gives onnxruntime's
    CPU provider: what a graph that OpenVINO cannot compile falls back to.
    """
    if openvino_precision(request) is not None:
        return ["CPUExecutionProvider"]
    available = available_providers()
    if isinstance(request, str):
        if request == "auto":
            best = [p for p in AUTO_PROVIDERS if p in available]
            return best or ["CPUExecutionProvider"]
        request = [request]
    chosen: list[str] = []
    for name in request:
        full = PROVIDER_ALIASES.get(name.lower(), name)
        if full in available:
            if full not in chosen:
                chosen.append(full)
        else:
            warnings.warn(
                f"Execution provider {name!r} is not available in this onnxruntime build "
                f"(available: {', '.join(available)}); falling back to the CPU.",
                RuntimeWarning,
                stacklevel=2,
            )
    if "CPUExecutionProvider" not in chosen:
        chosen.append("CPUExecutionProvider")
    return chosen


@dataclass(frozen=True)
class RuntimeConfig:
    """How sessions are created.

    Attributes
    ----------
    providers : str or sequence of str
        ``"auto"``, or provider names / aliases (``"cpu"``, ``"cuda"``, ...), best first.
    intra_op_threads : int
        Threads per operator; 0 lets onnxruntime decide (all physical cores).
    cpu_mem_arena : bool
        onnxruntime's CPU arena. Off by default: measured on the full SAM 3 encoder it raised the
        peak from 5.65 GB to 8.2 GB at the same speed (docs/performance.md).
    graph_optimization : {"all", "extended", "basic", "disable"}
        Lower it if a tracker graph misbehaves after ORT's fusions (reported on CPU).
    cache_dir : Path, optional
        Where OpenVINO caches compiled graphs (default: ``openvino-cache`` in the data folder).
    bf16_everywhere : bool
        With ``"OpenVINO CPU bf16"``: every workflow's image encoder (and propagation's memory
        attention) in bf16, whatever the bundle's bf16 gate verdicts. The decision gate's mode
        (it judges bf16); the plugin leaves it off, so a workflow computes in bf16 only where
        the bundle's manifest records a passing bf16 verdict for it
        (:class:`~.workflow_precision.Bf16Grants`).
    """

    providers: str | tuple[str, ...] = "auto"
    intra_op_threads: int = 0
    cpu_mem_arena: bool = False
    graph_optimization: str = "all"
    cache_dir: Path | None = None
    bf16_everywhere: bool = False

    @property
    def openvino(self) -> str | None:
        """The OpenVINO inference precision (``"f32"``, ``"bf16"``), None for onnxruntime."""
        return openvino_precision(self.providers)

    def exact(self) -> RuntimeConfig:
        """The same config with OpenVINO's f32 instead of bf16 (itself when it is not bf16)."""
        return replace(self, providers=OPENVINO_F32) if self.openvino == "bf16" else self

    def openvino_cache(self) -> Path:
        """The compiled-model cache folder (:attr:`cache_dir` or the data folder's)."""
        if self.cache_dir is not None:
            return Path(self.cache_dir)
        from .registry import home_dir

        return home_dir() / CACHE_SUBDIR

    def session_options(self) -> ort.SessionOptions:
        """Build the onnxruntime session options."""
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.intra_op_threads
        opts.enable_cpu_mem_arena = self.cpu_mem_arena
        opts.graph_optimization_level = {
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        }[self.graph_optimization]
        opts.log_severity_level = 3
        return opts


@dataclass
class LazySession:
    """An ONNX graph whose session is created on first use.

    The graph's signature (names, dtypes, shapes) is read from the file header at once, so
    geometry and layout checks cost nothing; the weights load on the first :meth:`run`.

    Attributes
    ----------
    fallback : str or None
        Why this graph runs on onnxruntime although the config asked for OpenVINO (None if it
        did not ask, or if OpenVINO compiled it).
    """

    path: Path
    config: RuntimeConfig = field(default_factory=RuntimeConfig)
    signature: GraphSignature = field(init=False)
    runs: int = field(default=0, init=False)
    fallback: str | None = field(default=None, init=False)
    _session: ort.InferenceSession | OpenVinoSession | None = field(default=None, init=False,
                                                                    repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        self.signature = read_signature(self.path)

    @property
    def loaded(self) -> bool:
        """Whether the weights are in memory."""
        return self._session is not None

    @property
    def session(self) -> ort.InferenceSession | OpenVinoSession:
        """The session, created on first access (thread-safe).

        OpenVINO's where the config asks for it and OpenVINO compiles the graph, else
        onnxruntime's.
        """
        with self._lock:
            if self._session is None:
                check_external_data(self.signature)
                self._session = self._openvino() or self._onnxruntime()
            return self._session

    def _openvino(self) -> OpenVinoSession | None:
        """The graph compiled by OpenVINO, or None (onnxruntime's then, with a warning)."""
        precision = self.config.openvino
        if precision is None:
            return None
        log.info("compiling %s for %s", self.path.name, device_name(precision))
        try:
            return OpenVinoSession(self.path, precision, self.config.intra_op_threads,
                                   self.config.openvino_cache())
        except ImportError:
            reason = "openvino is not installed (pip install 'napari-sam3-onnx[openvino]')"
        except Exception as exc:  # OpenVINO raises RuntimeError/OpConversionFailure/...
            reason = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else repr(exc)
        self.fallback = reason
        warnings.warn(f"{self.path.name}: {device_name(precision)} cannot run this graph "
                      f"({reason}); it runs on onnxruntime's CPU provider instead.",
                      RuntimeWarning, stacklevel=4)
        return None

    def _onnxruntime(self) -> ort.InferenceSession:
        """The onnxruntime session."""
        providers = resolve_providers(self.config.providers)
        log.info("loading %s on %s", self.path.name, providers)
        try:
            return ort.InferenceSession(
                str(self.path), self.config.session_options(), providers=providers
            )
        except Exception as exc:  # onnxruntime raises bare RuntimeError/Fail
            raise CorruptModelError(self.path, str(exc).splitlines()[0][:300]) from exc

    @property
    def providers(self) -> list[str]:
        """Providers of the loaded session."""
        return list(self.session.get_providers())

    def run(
        self, outputs: Sequence[str], feeds: Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """Run the graph, asking only for ``outputs``; feeds the graph does not declare are dropped.

        Under a :class:`~.preempt.CancelToken` (:func:`~.preempt.preemptible` in the calling
        thread) another thread can stop the run: onnxruntime's through its own ``RunOptions``'
        ``terminate`` flag, OpenVINO's through ``InferRequest.cancel()``.

        Returns
        -------
        dict[str, numpy.ndarray]
            The requested outputs by name.

        Raises
        ------
        Preempted
            The calling thread's token was cancelled before or during the run.
        """
        wanted = self.signature.input_names
        feed = {k: v for k, v in feeds.items() if k in wanted}
        missing = wanted - feed.keys()
        if missing:
            raise ValueError(f"{self.path.name}: missing inputs {sorted(missing)}")
        token = current_token()
        result = (self.session.run(list(outputs), feed) if token is None
                  else self._run_stoppable(token, list(outputs), feed))
        self.runs += 1
        return dict(zip(outputs, result, strict=True))

    def _run_stoppable(self, token: CancelToken, outputs: list[str],
                       feed: dict[str, np.ndarray]) -> list:
        """One run that ``token.cancel()`` stops (a fresh ``RunOptions`` per onnxruntime run)."""
        token.check(self.path.name)
        session = self.session
        if isinstance(session, OpenVinoSession):
            return session.run(outputs, feed, token)
        options = ort.RunOptions()
        return token.run(lambda: session.run(outputs, feed, options),
                         lambda: setattr(options, "terminate", True), self.path.name)

    def close(self) -> None:
        """Drop the session (it is re-created on next use)."""
        with self._lock:
            self._session = None
