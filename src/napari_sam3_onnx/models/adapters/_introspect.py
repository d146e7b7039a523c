"""Find the roles of a concept graph's inputs from their rank, dtype and shape.

For exports whose input names are not published (SAM 3.1 ComicApp,
docs/layouts.md#comicapp-sam31) the adapter reads what each input must be from its declaration:

* rank-4 float: an image feature level, placed by ``(channels, rows, cols)`` among the encoder's
  levels (in declaration order when the sizes are dynamic);
* names with ``text``/``lang`` are text inputs, names with ``box``/``label``/``pad``/``valid``
  exemplar inputs; without such a hint the shape decides:
* rank-3 float: exemplar boxes ``cx, cy, w, h`` if the last dim is 4, else text features
  (batch-first ``[1,T,C]`` or sequence-first ``[T,1,C]``);
* rank-2 of the context length: the text mask (bool: True = pad; integer: 1 = token); other
  rank-2: exemplar labels (integer) or slot padding (bool: True = unused, unless the name says
  ``valid``);
* int scalars named like ``*height*``/``*width*``: the original image size.

Anything else, or two inputs for one role, raises :class:`LayoutMismatchError` listing every input
with the role it got, so a user can report what their file looks like.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import LayoutMismatchError
from ..graph_info import GraphSignature, TensorInfo

ROLES = ("feature_0", "feature_1", "feature_2", "text_features", "text_mask", "box_coords",
         "box_labels", "box_padding", "height", "width")
BOX_WORDS = ("box", "geo", "exemplar", "prompt_label", "label", "pad", "valid")


def _float(t: TensorInfo) -> bool:
    return t.dtype in ("float32", "float16", "float64")


def _chw(t: TensorInfo) -> tuple:
    return tuple(t.shape[1:])


def classify_inputs(
    sig: GraphSignature, levels: Sequence[TensorInfo], context: int, layout: str
) -> dict[str, TensorInfo]:
    """Map roles (:data:`ROLES`) to ``sig``'s inputs.

    Parameters
    ----------
    sig : GraphSignature
        The prompt graph.
    levels : sequence of TensorInfo
        The encoder outputs that may feed it, largest level first.
    context : int
        Text context length (32).
    layout : str
        For messages.
    """
    roles: dict[str, TensorInfo] = {}
    problems: list[str] = []

    def put(role: str, t: TensorInfo) -> None:
        if role in roles:
            problems.append(f"both {roles[role].name} and {t.name} look like {role}")
        roles[role] = t

    features = [t for t in sig.inputs if t.rank == 4 and _float(t)]
    free = list(range(len(levels)))
    for t in features:
        hit = next((i for i in free if _chw(levels[i]) == _chw(t)), None)
        dynamic = not all(isinstance(d, int) for d in _chw(t))
        hit = free[0] if hit is None and dynamic and free else hit
        if hit is None or hit > 2:
            problems.append(f"{t.name}{list(t.shape)} matches none of the encoder's levels")
            continue
        free.remove(hit)
        put(f"feature_{hit}", t)
    for t in sig.inputs:
        name = t.name.lower()
        texty = "text" in name or "lang" in name
        boxy = not texty and any(w in name for w in BOX_WORDS)
        if t.rank == 4 and _float(t):
            continue
        if t.rank == 3 and _float(t):
            put("box_coords" if boxy or (not texty and t.shape[-1] == 4) else "text_features", t)
        elif t.rank == 2 and (boxy or (not texty and context not in t.shape)):
            put("box_padding" if t.dtype == "bool" else "box_labels", t)
        elif t.rank == 2:
            put("text_mask", t)
        elif t.rank <= 1 and not _float(t) and ("height" in name or "width" in name):
            put("height" if "height" in name else "width", t)
        else:
            problems.append(f"{t.name} {t.dtype}{list(t.shape)} has no known role")
    for need in ("feature_0", "text_features", "text_mask"):
        if need not in roles:
            problems.append(f"no input for {need}")
    boxes = [r for r in ("box_coords", "box_labels", "box_padding") if r in roles]
    if boxes and len(boxes) != 3:
        problems.append(f"exemplar inputs incomplete (found {boxes})")
    if problems:
        found = ", ".join(
            f"{t.name} {t.dtype}{list(t.shape)}"
            + "".join(f" -> {r}" for r, u in roles.items() if u.name == t.name)
            for t in sig.inputs
        )
        raise LayoutMismatchError(layout, sig.path.name, f"{'; '.join(problems)}. Found: {found}")
    return roles


def batch_first(t: TensorInfo) -> bool:
    """Whether a ``[.., .., X]`` slot/text input is batch-first (``[1, K, X]``/``[1, K]``)."""
    first = t.shape[0]
    second = t.shape[1] if t.rank > 1 else None
    return first == 1 and second != 1
