"""Result rows, the printed table, the markdown table and the JSON file."""

from __future__ import annotations

import json
import platform
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: Targets by case: (kind, bound). "ratio": the median ratio must be <= bound; "ms": the
#: measured value must be < bound.
TARGETS: dict[str, tuple[str, float]] = {
    "encode": ("ratio", 1.05),
    "click-gui": ("ratio", 1.2),
    "click-engine": ("ratio", 1.2),
    "text-stack": ("ratio", 1.1),
    "propagation": ("ratio", 1.1),
    "responsiveness": ("ms", 100.0),
}


@dataclass
class Row:
    """One measured case on one bundle and provider.

    ``plugin_ms`` / ``raw_ms`` / ``overhead_ms`` are medians; ``ratio`` is the median of the
    per-repetition ratios, ``ratio_q1`` .. ``ratio_q3`` their inter-quartile range. ``value`` is
    used by rows that report one number (a stall in ms, bytes); ``extra`` holds counters.
    """

    case: str
    layout: str
    provider: str = "-"
    geometry: str = "-"
    plugin_ms: float | None = None
    raw_ms: float | None = None
    overhead_ms: float | None = None
    ratio: float | None = None
    ratio_q1: float | None = None
    ratio_q3: float | None = None
    ratio_min: float | None = None
    ratio_max: float | None = None
    reps: int = 0
    value: float | None = None
    unit: str = ""
    status: str = "info"
    note: str = ""
    extra: dict = field(default_factory=dict)

    def judge(self, also_ok: bool = True) -> Row:
        """Set ``status`` from :data:`TARGETS` (``also_ok`` False forces MISS, e.g. a counter)."""
        target = TARGETS.get(self.case)
        if target is None:
            return self
        kind, bound = target
        measured = self.ratio if kind == "ratio" else self.value
        if measured is None:
            self.status = "skipped"
            return self
        self.status = "PASS" if (measured <= bound if kind == "ratio" else measured < bound) \
            and also_ok else "MISS"
        return self


def target_text(case: str) -> str:
    """``<= 1.05`` or ``< 100 ms`` (empty for cases without a target)."""
    if case not in TARGETS:
        return ""
    kind, bound = TARGETS[case]
    return f"<= {bound:g}" if kind == "ratio" else f"< {bound:g} ms"


def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "" if x is None else format(x, spec)


def table(rows: list[Row], markdown: bool = False) -> str:
    """The result table as fixed-width text or a markdown table."""
    head = ["case", "layout", "provider", "plugin ms", "raw ms", "overhead ms",
            "ratio (IQR)", "target", "result", "note"]
    body = []
    for r in rows:
        if r.ratio is not None:
            ratio = f"{r.ratio:.3f} ({r.ratio_q1:.3f}-{r.ratio_q3:.3f})"
        elif r.value is not None:
            ratio = f"{r.value:,.1f} {r.unit}".strip()
        else:
            ratio = ""
        body.append([r.case, r.layout, r.provider, _fmt(r.plugin_ms, ".2f"),
                     _fmt(r.raw_ms, ".2f"), _fmt(r.overhead_ms, ".2f"), ratio,
                     target_text(r.case), r.status, r.note])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in body]
        return "\n".join(lines)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    widths[-1] = 0  # the note is not padded
    fmt = "  ".join(f"{{:{w}}}" for w in widths)
    return "\n".join(fmt.format(*row).rstrip() for row in [head, *body])


def environment() -> dict:
    """What the numbers were measured on."""
    import os

    import numpy
    import onnxruntime

    return {
        "host": socket.gethostname(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "loadavg_1_5_15": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg")
        else None,
        "onnxruntime": onnxruntime.__version__,
        "onnxruntime_providers": onnxruntime.get_available_providers(),
        "numpy": numpy.__version__,
    }


def write_json(rows: list[Row], args: dict, folder: Path, path: Path | None = None) -> Path:
    """Write ``{"environment", "args", "rows"}`` to ``folder/<host>-<date>.json`` (or ``path``)."""
    env = environment()
    if path is None:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{env['host']}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"environment": env, "args": args, "rows": [asdict(r) for r in rows]}
    tmp = path.with_name(path.name + ".tmp")  # rewritten after every row: replace atomically
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    tmp.replace(path)
    return path
