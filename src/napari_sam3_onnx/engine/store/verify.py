"""Check every entry of an embedding store, and optionally remove the broken ones.

No bundle is needed: entries are checked against the bundle and precision recorded in the
store's root, and every array is read back and compared with its recorded checksum.
"""

from __future__ import annotations

import enum
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from napari_sam3_onnx.engine.store import files as sf
from napari_sam3_onnx.engine.store.embedding_store import (
    ENTRY_KEY,
    FORMAT,
    ROOT_KEY,
    StoreError,
    describe,
)
from napari_sam3_onnx.engine.store.entries import SPEC_KEY, meta_problem, read_arrays, spec_problem

#: Names of slice entries (:attr:`~.keys.EntryKey.path`): ``plane`` or ``00003-00001``, with
#: ``_r<r0>-<c0>-<r1>-<c1>`` for a tile.
ENTRY_NAME = re.compile(r"(plane|\d+(-\d+)*)(_r\d+-\d+-\d+-\d+)?")


def is_entry_folder(path: Path) -> bool:
    """Whether ``path`` (a folder in an image group) was written as a slice entry.

    Its name has the entries' form and it holds zarr metadata or feature arrays (``f0``...);
    anything else (a folder of the user's) is not the store's and is never removed.
    """
    if not ENTRY_NAME.fullmatch(path.name):
        return False
    return (path / "zarr.json").is_file() or (path / "f0").is_dir()


class EntryState(enum.StrEnum):
    """What :func:`verify_store` found for one entry."""

    OK = "ok"
    INCOMPLETE = "incomplete"
    """Never finished: no ``complete`` marker, or a temporary folder of a killed writer."""
    CORRUPT = "corrupt"
    """Marked complete, but metadata or an array is missing, unreadable or fails its checksum."""
    FOREIGN = "foreign bundle"
    """Intact, but made with another bundle or precision than the store's."""


@dataclass(frozen=True)
class EntryCheck:
    """One entry's state; ``path`` is ``"<image>/<slice>"`` inside the store."""

    path: str
    state: EntryState
    detail: str = ""


@dataclass
class StoreCheck:
    """Result of :func:`verify_store`.

    Attributes
    ----------
    path : Path
        The store folder.
    identity : str
        The store's bundle and precision, for messages.
    entries : list of EntryCheck
        Every entry in path order, each image's leftovers of killed writers after its entries.
    removed : int
        Entries and leftovers removed (``repair=True``).
    """

    path: Path
    identity: str
    entries: list[EntryCheck] = field(default_factory=list)
    removed: int = 0

    def count(self, state: EntryState | str) -> int:
        """How many entries are in ``state`` (an :class:`EntryState` or its value)."""
        state = EntryState(state)
        return sum(e.state is state for e in self.entries)

    @property
    def broken(self) -> int:
        """Entries that are not ``ok``."""
        return len(self.entries) - self.count(EntryState.OK)


def _root_meta(path: Path) -> Mapping:
    import zarr

    if not (path / "zarr.json").is_file():
        raise StoreError(f"No embedding store at {path} (no zarr.json).")
    try:
        meta = zarr.open_group(str(path), mode="r", zarr_format=3).attrs.get(ROOT_KEY)
    except Exception as exc:
        raise StoreError(f"Cannot open {path} as a zarr v3 store ({exc}).") from exc
    if not isinstance(meta, Mapping) or meta.get("format") != FORMAT:
        raise StoreError(f"{path} is a zarr store but not a napari-sam3-onnx embedding store.")
    return meta


def check_entry(folder: Path, root: Mapping) -> tuple[EntryState, str]:
    """The state of the entry in ``folder`` of a store whose root attributes are ``root``."""
    import zarr

    if not (folder / "zarr.json").is_file():
        return EntryState.CORRUPT, "no zarr.json"
    try:
        group = zarr.open_group(str(folder), mode="r", zarr_format=3)
        meta = group.attrs.get(ENTRY_KEY)
    except Exception as exc:
        return EntryState.CORRUPT, f"unreadable metadata ({type(exc).__name__})"
    if not isinstance(meta, Mapping) or not meta.get("complete"):
        return EntryState.INCOMPLETE, "never marked complete"
    sig = meta.get("signature") or {}
    bundle = root.get("bundle") or {}
    for name, want in (("layout", bundle.get("layout")), ("weights", bundle.get("weights")),
                       ("precision", root.get("precision"))):
        if sig.get(name) != want:
            return EntryState.FOREIGN, f"{name} {sig.get(name)!r}, the store's is {want!r}"
    problem = meta_problem(meta) or spec_problem(meta, root.get(SPEC_KEY)) or _place_problem(
        folder.name, sig)
    if problem:
        return EntryState.CORRUPT, problem
    if read_arrays(group, meta) is None:
        return EntryState.CORRUPT, "an array is missing or fails its checksum"
    return EntryState.OK, ""


def _place_problem(name: str, sig: Mapping) -> str | None:
    """Whether the entry's signature names the slice (and tile) its folder name says."""
    index, _, region = name.partition("_r")
    want = [] if index == "plane" else [int(i) for i in index.split("-")]
    tile = [int(v) for v in region.split("-")] if region else None
    if sig.get("index") != want or sig.get("region") != tile:
        return (f"made for slice {sig.get('index')} (tile {sig.get('region')}), but kept as "
                f"{name}")
    return None


def verify_store(path: Path | str, repair: bool = False) -> StoreCheck:
    """Check every entry of the store at ``path``; with ``repair``, remove the broken ones.

    Removed entries are missing afterwards, so the next precompute (or any run with the store)
    encodes them again. Do not repair while other processes write into the store: their
    unfinished temporary entries would be removed too.

    Raises
    ------
    StoreError
        ``path`` is not an embedding store.

    Examples
    --------
    >>> check = api.verify_store("nuclei.zarr")                  # read only
    >>> check = api.verify_store("nuclei.zarr", repair=True)    # broken entries removed
    >>> check.removed
    """
    path = Path(path)
    root = _root_meta(path)
    report = StoreCheck(path, describe(root))
    images = sf.child_nodes(path)
    found: list[tuple[Path, EntryCheck]] = [
        (p, EntryCheck(p.name, EntryState.INCOMPLETE, "left by an interrupted writer"))
        for p in sf.leftovers(path)]
    for image in images:
        folder = path / image
        for p in sorted(folder.iterdir(), key=lambda p: (sf.is_leftover(p.name), p.name)):
            if not p.is_dir():
                continue
            name = f"{image}/{p.name}"
            if sf.is_leftover(p.name):
                found.append((p, EntryCheck(name, EntryState.INCOMPLETE,
                                            "left by an interrupted writer")))
            elif is_entry_folder(p):
                found.append((p, EntryCheck(name, *check_entry(p, root))))
    report.entries = [check for _, check in found]
    if repair:
        for p, check in found:
            if check.state is not EntryState.OK:
                removed = sf.remove(p) if not sf.is_leftover(p.name) else _rmtree(p)
                report.removed += bool(removed)
    return report


def _rmtree(path: Path) -> bool:
    shutil.rmtree(path, ignore_errors=True)
    return not path.exists()
