"""Find the roles of a concept graph's inputs from their rank, dtype and shape.

For exports whose input names are not published (SAM 3.1 ComicApp,
docs/layouts.md#comicapp-sam31) the adapter reads what each input must be from its declaration:

* rank-4 float: an image feature level, placed by ``(channels, rows, cols)`` among the encoder's
  levels (in declaration order when the sizes are dynamic); with ``pos`` in its name, that
  level's position encoding (``position_i``), which has the same shape;
* names with ``text``/``lang`` are text inputs, names with ``box``/``label``/``pad``/``valid``
  exemplar inputs; without such a hint the shape decides:
* rank-3 float: exemplar boxes ``cx, cy, w, h`` if the last dim is 4, else text features
  (batch-first ``[1,T,C]`` or sequence-first ``[T,1,C]``); a second text input whose name says
  ``embed`` is ``text_embeds`` (PIXL's third text output); names with ``prompt_feat`` or
  ``geometry`` are a geometry encoder's features (``geometry_features``, with
  ``geometry_mask``);
* rank-2 of the context length (the language encoder's, or the text input's own token count,
  which may be longer: a 16-token student feeding a 32-token decoder): the text mask (bool /
  integer, polarity decided by the caller); other rank-2: exemplar labels (integer) or slot
  padding (bool);
* int scalars named like ``*height*``/``*width*``: the original image size.

Anything else, or two inputs for one role, raises :class:`LayoutMismatchError` listing every input
with the role it got, so a user can report what their file looks like.
"""

from __future__ import annotations

from collections.abc import Sequence, Set

from ..errors import LayoutMismatchError
from ..graph_info import GraphSignature, TensorInfo

ROLES = ("feature_0", "feature_1", "feature_2", "position_0", "position_1", "position_2",
         "text_features", "text_embeds", "text_mask", "box_coords", "box_labels", "box_padding",
         "geometry_features", "geometry_mask", "height", "width")
GEOMETRY_WORDS = ("prompt_feat", "prompt_mask", "geometry")
BOX_WORDS = ("box", "geo", "exemplar", "prompt_label", "label", "pad", "valid")


def _float(t: TensorInfo) -> bool:
    return t.dtype in ("float32", "float16", "float64")


def _chw(t: TensorInfo) -> tuple:
    return tuple(t.shape[1:])


def classify_inputs(
    sig: GraphSignature, levels: Sequence[TensorInfo], context: int, layout: str,
    position_names: Set[str] = frozenset(),
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
    position_names : set of str
        Encoder outputs known to be position encodings (an input of that name is one).
    """
    roles: dict[str, TensorInfo] = {}
    problems: list[str] = []

    def put(role: str, t: TensorInfo) -> None:
        if role in roles:
            problems.append(f"both {roles[role].name} and {t.name} look like {role}")
        roles[role] = t

    maps = [t for t in sig.inputs if t.rank == 4 and _float(t)]
    pos = [t for t in maps if "pos" in t.name.lower() or t.name in position_names]
    for kind, group in (("feature", [t for t in maps if t not in pos]), ("position", pos)):
        free = list(range(len(levels)))
        for t in group:
            hit = next((i for i in free if _chw(levels[i]) == _chw(t)), None)
            dynamic = not all(isinstance(d, int) for d in _chw(t))
            hit = free[0] if hit is None and dynamic and free else hit
            if hit is None or hit > 2:
                problems.append(f"{t.name}{list(t.shape)} matches none of the encoder's levels")
                continue
            free.remove(hit)
            put(f"{kind}_{hit}", t)
    lengths = {context} | _text_lengths(sig)
    for t in sig.inputs:
        if t.rank == 4 and _float(t):
            continue
        role = _role_of(sig, t, lengths)
        if role is None:
            problems.append(f"{t.name} {t.dtype}{list(t.shape)} has no known role")
        else:
            put(role, t)
    for need in ("feature_0", "text_features", "text_mask"):
        if need not in roles:
            problems.append(f"no input for {need}")
    boxes = [r for r in ("box_coords", "box_labels", "box_padding") if r in roles]
    if boxes and not {"box_coords", "box_labels"} <= set(boxes):  # padding may be a label
        problems.append(f"exemplar inputs incomplete (found {boxes})")
    if ("geometry_features" in roles) != ("geometry_mask" in roles):
        problems.append("geometry features and their mask must come together")
    if problems:
        found = ", ".join(
            f"{t.name} {t.dtype}{list(t.shape)}"
            + "".join(f" -> {r}" for r, u in roles.items() if u.name == t.name)
            for t in sig.inputs
        )
        raise LayoutMismatchError(layout, sig.path.name, f"{'; '.join(problems)}. Found: {found}")
    return roles


def _role_of(sig: GraphSignature, t: TensorInfo, lengths: set) -> str | None:
    """The role of a non-map input from its name hints, rank, dtype and shape."""
    name = t.name.lower()
    texty = "text" in name or "lang" in name
    geometry = any(w in name for w in GEOMETRY_WORDS)
    boxy = not texty and not geometry and any(w in name for w in BOX_WORDS)
    if t.rank == 3 and _float(t):
        if geometry:
            return "geometry_features"
        if boxy or (not texty and t.shape[-1] == 4):
            return "box_coords"
        return "text_embeds" if "embed" in name and _has_other_text(sig, t) else "text_features"
    if t.rank == 2 and geometry:
        return "geometry_mask"
    if t.rank == 2 and (boxy or (not texty and not lengths & set(t.shape))):
        return "box_padding" if t.dtype == "bool" else "box_labels"
    if t.rank == 2:
        return "text_mask"
    if t.rank <= 1 and not _float(t) and ("height" in name or "width" in name):
        return "height" if "height" in name else "width"
    return None


def _is_text_sequence(t: TensorInfo) -> bool:
    name = t.name.lower()
    return (t.rank == 3 and _float(t) and not any(w in name for w in GEOMETRY_WORDS)
            and ("text" in name or "lang" in name or t.shape[-1] != 4))


def _text_lengths(sig: GraphSignature) -> set:
    """Token counts of the graph's text-feature inputs (a text mask has the same length)."""
    out = set()
    for t in sig.inputs:
        if _is_text_sequence(t):
            out |= {d for d in t.shape[:2] if isinstance(d, int) and d > 1}
    return out


def _has_other_text(sig: GraphSignature, t: TensorInfo) -> bool:
    """Whether another text-feature input exists besides ``t`` (then ``t`` is the embeds)."""
    return any(u is not t and _is_text_sequence(u) and "embed" not in u.name.lower()
               for u in sig.inputs)


def batch_first(t: TensorInfo) -> bool:
    """Whether a ``[.., .., X]`` slot/text input is batch-first (``[1, K, X]``/``[1, K]``)."""
    first = t.shape[0]
    second = t.shape[1] if t.rank > 1 else None
    return first == 1 and second != 1
