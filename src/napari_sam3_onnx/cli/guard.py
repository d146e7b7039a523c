"""Where the outputs go, checked before any work starts.

A microscopist's raw data and annotations are never touched without consent: an output that
already exists is replaced only with ``--overwrite``; the input image, a seed labels file and
the embedding store are refused as outputs even then, and so is anything in the model
bundle's folder (:func:`bundle_paths`); a folder is replaced only when it is a
zarr array (what ``--out x.zarr`` writes) or an OME-Zarr labels image (``--out x.ome.zarr``),
never any other folder. Labels go into an OME-Zarr input image only as ``IMAGE/labels/NAME``,
beside its arrays, which stay refused. Paths are compared after
resolving symlinks and ``..``, so ``./a/../in.tif`` or a link to the input is still the input.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from ..api.io import InputError
from ..api.ngff import image_of_labels, is_ngff_image, is_ngff_labels, is_ngff_output

#: (flag, path or None) of an output, or of a path that must not be written: ("input", p).
Named = tuple[str, "Path | None"]


def _resolved(path: Path) -> Path:
    try:
        return Path(os.path.realpath(path))  # resolves symlinks (loops raise below)
    except (OSError, RuntimeError) as exc:
        raise InputError(f"{path}: cannot resolve the path ({exc}).") from exc


def _overlaps(out: Path, other: Path) -> str | None:
    """How the resolved output ``out`` collides with the resolved ``other`` (None: it does not)."""
    if out == other:
        return "is"
    try:
        if out.exists() and other.exists() and os.path.samefile(out, other):
            return "is"  # a hard link
    except OSError:
        pass
    if other in out.parents:
        return "is inside"
    if out in other.parents:
        return "contains"
    return None


def is_zarr_array(path: Path) -> bool:
    """Whether ``path`` is a folder holding exactly one zarr array (v2 or v3) at its top."""
    if (path / ".zarray").is_file():
        return True
    meta = path / "zarr.json"
    if not meta.is_file():
        return False
    try:
        return json.loads(meta.read_text(encoding="utf-8")).get("node_type") == "array"
    except (OSError, ValueError, AttributeError):
        return False


def _check_name_length(flag: str, path: Path, real: Path) -> None:
    """Refuse a name too long for the temporary sibling the output is written under."""
    from ..models.atomic import _sibling

    try:
        limit = os.pathconf(real.parent if real.parent.exists() else "/", "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    longest = len(os.fsencode(_sibling(real, "partial").name))
    if longest > limit:
        extra = longest - len(os.fsencode(real.name))
        raise InputError(f"{flag} {path}: the name is {len(os.fsencode(real.name))} bytes "
                         f"long; outputs are written under a temporary name {extra} bytes "
                         f"longer and this file system allows {limit}: give a name of at most "
                         f"{limit - extra} bytes.")


def _check_folder(flag: str, path: Path, real: Path) -> None:
    folder = real.parent
    if not folder.exists() and image_of_labels(real) is not None:
        folder = folder.parent  # IMAGE/labels is created inside the OME-Zarr image
    if not folder.is_dir():
        raise InputError(f"{flag} {path}: the folder {path.parent} does not exist.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {path}: cannot write into {path.parent} (permission denied).")


def _check_existing(flag: str, path: Path, directory: bool, overwrite: bool) -> None:
    if not (path.exists() or path.is_symlink()):
        return
    if not overwrite:
        raise InputError(f"{flag} {path} already exists; pass --overwrite to replace it, or "
                         "choose another name.")
    if directory and path.is_symlink():
        raise InputError(f"{flag} {path} is a symbolic link (to {os.readlink(path)}); a zarr "
                         "output is a folder and is not written through a link: name the "
                         "folder itself, or remove the link.")
    if directory and not (path.is_dir() and (is_zarr_array(path) or is_ngff_labels(path))):
        raise InputError(f"{flag} {path} exists and is not a zarr array folder (nor "
                         "OME-Zarr labels); not replacing it even with --overwrite (remove it "
                         "yourself if it can go).")
    if not directory and path.is_dir():
        raise InputError(f"{flag} {path} is a folder; --overwrite replaces files, not folders.")


def bundle_paths(bundle: str | Path) -> list[Named]:
    """The bundle's folder and each file in it, to protect like an input.

    ``bundle`` is a folder or a registry id (its folder under the data folder, if it is there;
    nothing is built or downloaded here). The files are listed one by one as well because a
    downloaded bundle's files are links into the Hugging Face cache: an output naming one
    resolves to the cached file, outside the folder.
    """
    from ..models.registry import UnknownBundleError, bundle_dir

    folder = Path(bundle)
    if not folder.is_dir():
        try:
            folder = bundle_dir(str(bundle))
        except (ValueError, UnknownBundleError):
            return []
        if not folder.is_dir():
            return []
    named: list[Named] = [("model bundle", folder)]
    try:
        named += [("model bundle", p) for p in folder.iterdir()
                  if p.is_file() and not p.name.startswith(".")]
    except OSError:
        pass
    return named


def _refuse_protected(flag: str, path: Path, real: Path,
                      guarded: Sequence[tuple[str, Path, Path]]) -> None:
    for what, other, other_real in guarded:
        how = _overlaps(real, other_real)
        into = what == "input image" and image_of_labels(real) == other_real
        if how == "is inside" and into:
            continue  # IMAGE/labels/NAME: new labels beside the image's arrays, not in them
        if how is not None:
            hint = ""
            if what == "input image" and is_ngff_image(other_real):
                hint = (" To add the labels to the OME-Zarr image, name "
                        f"{other / 'labels' / 'NAME'}.")
            raise InputError(f"{flag} {path} {how} the {what} {other}: an output never "
                             "replaces the data it is computed from (not even with "
                             f"--overwrite); choose another name.{hint}")


def check_not_protected(flag: str, path: Path, protected: Sequence[Named]) -> None:
    """Refuse ``path`` (an output folder about to be created) if it overlaps a protected path."""
    guarded = [(what, Path(p), _resolved(Path(p))) for what, p in protected if p is not None]
    _refuse_protected(flag, Path(path), _resolved(Path(path)), guarded)


def check_outputs(outputs: Sequence[Named], protected: Sequence[Named],
                  overwrite: bool = False) -> None:
    """Refuse outputs that would replace data without consent, or that cannot be written.

    Parameters
    ----------
    outputs : sequence of (flag, Path or None)
        The files this run will write, by the option naming them (``("--out", p)``); None
        entries are skipped. A name ending in ``.zarr`` is a folder.
    protected : sequence of (what, Path or None)
        Paths that are never outputs: ``("input image", p)``, ``("seed labels", p)``,
        ``("embedding store", p)``.
    overwrite : bool
        ``--overwrite``: an existing output file (or zarr array folder) may be replaced.

    Raises
    ------
    InputError
        A missing or read-only folder, an output that is (inside, or holds) a protected path,
        two outputs with the same name, or an existing output without ``overwrite``. Nothing
        has been written when it is raised.
    """
    seen: dict[Path, str] = {}
    guarded = [(what, Path(p), _resolved(Path(p))) for what, p in protected if p is not None]
    for flag, path in outputs:
        if path is None:
            continue
        path = Path(path)
        real = _resolved(path)
        _refuse_protected(flag, path, real, guarded)
        if real in seen:
            raise InputError(f"{flag} {path} and {seen[real]} name the same file; give each "
                             "output its own name.")
        seen[real] = f"{flag} {path}"
        _check_folder(flag, path, real)
        _check_name_length(flag, path, real)
        _check_existing(flag, path, path.name.lower().endswith(".zarr") or is_ngff_output(path),
                        overwrite)


def check_store(path: Path | None, protected: Sequence[Named]) -> None:
    """A store to create or add to: not an input, in a writable folder, a folder if it exists.

    Raises
    ------
    InputError
        As :func:`check_outputs`, or ``path`` is an existing file or a folder of other files
        (a store never moves into a folder of the user's).
    """
    if path is None:
        return
    path = Path(path)
    real = _resolved(path)
    for what, other in protected:
        if other is None:
            continue
        how = _overlaps(real, _resolved(Path(other)))
        if how is not None:
            raise InputError(f"--store {path} {how} the {what} {other}: the embedding store "
                             "must be a folder of its own.")
    if path.exists() and not path.is_dir():
        raise InputError(f"--store {path} is a file, not a zarr store folder.")
    if path.is_dir() and not any((path / m).is_file() for m in ("zarr.json", ".zgroup")):
        try:
            holds = next(iter(path.iterdir()), None)
        except OSError as exc:
            raise InputError(f"--store {path}: cannot read the folder ({exc}).") from exc
        if holds is not None:
            raise InputError(f"--store {path} is a folder of other files (such as {holds.name}), "
                             "not a zarr store: give a new name such as emb.zarr.")
    if not path.exists():
        _check_folder("--store", path, real)
