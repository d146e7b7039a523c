"""What kind of image encoder a bundle has: SAM 3's ViT or a small student that replaces it.

EfficientSAM3 (SimonZeng7108/efficientsam3) trains small image encoders (EfficientViT, RepViT,
TinyViT; 0.7-28 M parameters against the 446 M of SAM 3's ViT) to emit SAM 3's own encoder
tensors, so a bundle with such an encoder opens in the same layout and runs every workflow; the
model line should still say that the image side is a student. The family is recognised from the
encoder's file name (the published exports name it: ``efficientsam3_ev_m_image_encoder``); the
parameter count is read from the graph's initializer shapes without loading weights (packed
4-bit weights count as their storage elements, so the count is a lower bound for them).
"""

from __future__ import annotations

import io
from pathlib import Path

from .protobuf_wire import Truncated, fields, read_exact, read_varint

#: File-name words -> the family they name (checked in order, lower-case).
STUDENT_WORDS = (("efficientsam3", "EfficientSAM3"), ("efficientvit", "EfficientViT"),
                 ("repvit", "RepViT"), ("tinyvit", "TinyViT"), ("student", "student"))


def student_family(path: Path) -> str | None:
    """The student family the encoder file's name says, or None."""
    name = path.name.lower()
    return next((family for word, family in STUDENT_WORDS if word in name), None)


def _elements(head: bytes) -> int:
    """Element count from the start of a TensorProto (``dims`` are field 1, serialised first)."""
    f, count = io.BytesIO(head), 1
    try:
        for num, wire, ln, st in fields(f, len(head)):
            if num > 2:
                break
            if num == 1 and wire == 0:
                count *= ln
            elif num == 1 and wire == 2:
                data = io.BytesIO(read_exact(f, st, ln))
                while data.tell() < ln:
                    count *= read_varint(data)
            elif wire == 2:
                f.seek(st + ln)
    except Truncated:
        pass
    return count


def parameter_count(path: Path) -> int | None:
    """Elements in the graph's initializers (None: not readable)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            graph = next(((st, ln) for num, wire, ln, st in fields(f, size)
                          if num == 7 and wire == 2), None)
            if graph is None:
                return None
            start, length = graph
            f.seek(start)
            total = 0
            for num, wire, ln, st in fields(f, start + length):
                if wire == 2 and num == 5:
                    f.seek(st)
                    total += _elements(f.read(min(ln, 256)))
                    f.seek(st + ln)
                elif wire == 2:
                    f.seek(st + ln)
            return total
    except (OSError, Truncated, ValueError):
        return None


def describe(path: Path) -> str | None:
    """``"EfficientSAM3 student image encoder, 12.3 M parameters"``; None for SAM 3's own."""
    family = student_family(path)
    if family is None:
        return None
    count = parameter_count(path)
    what = "student image encoder" if family != "student" else "image encoder"
    size = f", {count / 1e6:.3g} M parameters" if count is not None else ""
    return f"{family} {what}{size}".replace("student student", "student")
