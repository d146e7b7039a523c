"""Reading image files lazily, plane by plane: TIFF, ``.npy``, zarr and OME-Zarr.

Nothing here loads a whole stack: TIFF is read through tifffile's zarr view, ``.npy`` through a
memory map and zarr arrays chunk by chunk; :class:`AxisView` moves the slice axis to the front
without copying. Problems with the input (unreadable file, wrong dimensionality, a slice range
outside the stack) raise :class:`InputError`, which the command line turns into exit code 2.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..models.errors import Sam3OnnxError

#: File name endings read as images (a ``.zarr`` folder counts as one file).
SUFFIXES = (".tif", ".tiff", ".npy", ".zarr")


class InputError(Sam3OnnxError, ValueError):
    """An input image cannot be used: unreadable, wrong dimensionality, bad slice range.

    Examples
    --------
    >>> try:
    ...     api.read_image("notes.txt")
    ... except api.InputError as exc:                           # says what to give instead
    ...     print(exc)
    """


def is_image_path(path: Path) -> bool:
    """Whether ``path`` is a file (or zarr folder) this module reads."""
    name = path.name.lower()
    if path.is_dir():
        return name.endswith(".zarr") or any((path / m).is_file()
                                             for m in ("zarr.json", ".zarray", ".zgroup"))
    return name.endswith(SUFFIXES[:3])


def expand_inputs(paths: Iterable[Path | str],
                  skip: Iterable[Path | str | None] = ()) -> list[Path]:
    """Files named directly, plus every readable image inside each named folder (sorted).

    ``skip``: paths that are never found as images inside a named folder (the embedding store
    a first run created there is not an input of the second).

    Raises
    ------
    InputError
        A path does not exist, is not an image, or a folder holds no image.
    """
    out: list[Path] = []
    skipped = {os.path.realpath(p) for p in skip if p is not None}
    for raw in paths:
        path = Path(raw)
        _check_reachable(path)
        if is_image_path(path):
            out.append(path)
        elif path.is_dir():
            try:
                entries = sorted(path.iterdir())
            except PermissionError as exc:
                raise InputError(f"Cannot list folder {path}: permission denied.") from exc
            found = []
            for p in entries:
                if p.is_symlink() and _loops(p):
                    raise InputError(f"{p} is a symbolic link that loops (it never reaches a "
                                     "file); remove or fix it.")
                if is_image_path(p) and os.path.realpath(p) not in skipped:
                    found.append(p)
            if not found:
                raise InputError(f"Folder {path} holds no {', '.join(SUFFIXES)} image.")
            out.extend(found)
        else:
            raise InputError(f"{path} is not a TIFF, .npy or zarr image ({', '.join(SUFFIXES)}).")
    return out


def _loops(path: Path) -> bool:
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def _check_reachable(path: Path) -> None:
    """Raise InputError for a missing path or a symbolic link loop, saying which."""
    if path.is_symlink() and _loops(path):
        raise InputError(f"Input {path} is a symbolic link that loops (it never reaches a file).")
    if not path.exists():
        if path.is_symlink():
            raise InputError(f"Input {path} is a symbolic link to {os.readlink(path)}, which "
                             "does not exist.")
        raise InputError(f"Input {path} does not exist.")
    if not (path.is_dir() or path.is_file()):  # reading a FIFO or a device never ends
        raise InputError(f"Input {path} is not a regular file (a pipe, socket or device); save "
                         "the image to a file and give that.")


def image_names(paths: Sequence[Path]) -> list[str]:
    """Distinct store names for input files: paths relative to their common folder, no suffix."""
    paths = [Path(p).resolve() for p in paths]
    if not paths:
        return []
    base = paths[0].parent
    for p in paths[1:]:
        while base not in p.parents:
            base = base.parent
    full = [p.relative_to(base).as_posix().replace("/", "__") for p in paths]
    short = [re.sub(r"(\.ome)?\.(tiff?|npy|zarr)$", "", n, flags=re.IGNORECASE) for n in full]
    return [s if short.count(s) == 1 else f for s, f in zip(short, full, strict=True)]


def _open_zarr(path: Path):
    import zarr

    node = zarr.open(str(path), mode="r")
    if isinstance(node, zarr.Array):
        return ImageFile(node, path)
    attrs = node.attrs.asdict()
    multiscales = attrs.get("multiscales") or attrs.get("ome", {}).get("multiscales")
    if multiscales:
        ms = multiscales[0]
        array = node[ms["datasets"][0]["path"]]
        axes = [a["name"] if isinstance(a, dict) else str(a) for a in ms.get("axes", [])]
        if "c" in axes and array.shape[axes.index("c")] > 1:
            raise InputError(f"{path} has {array.shape[axes.index('c')]} channels (axes "
                             f"{''.join(axes)}); save the channel to segment as its own image.")
        drop = [i for i, a in enumerate(axes) if a in ("c", "t") and array.shape[i] == 1]
        array = ImageFile(array, path)
        return AxisView(array, drop=drop) if drop else array
    arrays = sorted(node.array_keys())
    if len(arrays) == 1:
        return ImageFile(node[arrays[0]], path)
    raise InputError(f"{path} is a zarr group with {len(arrays)} arrays ({', '.join(arrays)}); "
                     f"name one, e.g. {path / (arrays[0] if arrays else 'ARRAY')}.")


def read_image(path: Path | str, series: int | None = None):
    """Open an image file lazily.

    Parameters
    ----------
    path : Path or str
        A ``.tif``/``.tiff`` (its full-resolution series and level, see
        :mod:`.tiff_series`; a warning says which of several), ``.npy``, or a zarr array / group
        folder (an OME-Zarr image gives its full-resolution level, with singleton ``c`` and
        ``t`` axes dropped; a group with one array gives that array).
    series : int, optional
        The series of a multi-series TIFF to read (default: the full-resolution one).

    Returns
    -------
    array-like
        Has ``shape``, ``dtype``, ``ndim`` and numpy-style integer indexing; reading a plane
        reads only that plane's chunks.

    Raises
    ------
    InputError
        The file is missing, not readable as an image, or of an unsupported kind.

    Examples
    --------
    >>> stack = api.read_image("nuclei.ome.zarr")               # lazy: nothing read yet
    >>> stack.shape, stack.dtype                                # e.g. ((z, rows, cols), uint16)
    >>> plane = np.asarray(stack[3])                            # one plane read
    """
    path = Path(path)
    if series is not None and not path.name.lower().endswith((".tif", ".tiff")):
        raise InputError(f"--series {series}: {path} is not a TIFF; only TIFF files hold "
                         "series.")
    _check_reachable(path)
    name = path.name.lower()
    try:
        if name.endswith(".npy"):
            return check_array(np.load(path, mmap_mode="r", allow_pickle=False), path)
        if name.endswith((".tif", ".tiff")):
            import tifffile
            import zarr

            from .tiff_series import choose_series

            with tifffile.TiffFile(path) as tf:
                index = choose_series(tf, path, series=series)
            node = zarr.open(tifffile.imread(path, aszarr=True, series=index), mode="r")
            array = node if isinstance(node, zarr.Array) else node["0"]
            return ImageFile(check_array(array, path), path)
        if path.is_dir():
            return check_array(_open_zarr(path), path)
    except InputError:
        raise
    except ValueError as exc:  # tiff_series.SeriesError (imported only for TIFF files)
        if type(exc).__name__ == "SeriesError":
            raise InputError(str(exc)) from exc
        raise InputError(f"Cannot read {path} as an image ({type(exc).__name__}: {exc}).") from exc
    except PermissionError as exc:
        raise InputError(f"Cannot read {path}: permission denied.") from exc
    except Exception as exc:
        raise InputError(f"Cannot read {path} as an image ({type(exc).__name__}: {exc}).") from exc
    raise InputError(f"{path} is not a TIFF, .npy or zarr image ({', '.join(SUFFIXES)}).")


def check_array(data, name: Path | str = "the image"):
    """``data`` if it holds numbers and has no empty axis; InputError naming ``name`` otherwise.

    A string or object array would fail deep inside the model with an obscure message, and a
    0-pixel plane has nothing to segment.
    """
    dtype = np.dtype(data.dtype)
    if not (np.issubdtype(dtype, np.number) or dtype == np.bool_):
        raise InputError(f"{name} holds {dtype} values, not numbers; save the image as integers "
                         "or floats.")
    if np.issubdtype(dtype, np.complexfloating):
        raise InputError(f"{name} holds complex numbers; save the magnitude (or one part) as a "
                         "real image.")
    if 0 in tuple(int(s) for s in data.shape):
        raise InputError(f"{name} has shape {tuple(data.shape)}: an axis of length 0 holds no "
                         "pixels.")
    return data


class ImageFile:
    """A lazily read image file whose read errors name the file and the plane.

    A truncated TIFF opens fine (its header is intact) and fails only when a damaged plane is
    read, in the middle of a run: this wrapper turns that failure into an :class:`InputError`
    that says which file and which slice, instead of a decoder's traceback.

    Parameters
    ----------
    data : array-like
        The opened array (tifffile's zarr view).
    path : Path
        The file, for messages.
    """

    def __init__(self, data, path: Path) -> None:
        self.data = data
        self.path = Path(path)
        self.shape = tuple(int(s) for s in data.shape)
        self.dtype = np.dtype(data.dtype)
        self.ndim = len(self.shape)

    def __getitem__(self, key):
        try:
            return self.data[key]
        except (IndexError, TypeError):
            raise
        except Exception as exc:
            where = key if isinstance(key, tuple) else (key,)
            lead = [int(k) for k in where if isinstance(k, (int, np.integer))]
            plane = (f" at slice {lead[0]}" if len(lead) == 1
                     else f" at index {tuple(lead)}" if lead else "")
            raise InputError(f"Cannot read {self.path}{plane} (the file may be truncated or "
                             f"damaged: {type(exc).__name__}: {exc}).") from exc

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = np.asarray(self[...])
        return out if dtype is None else out.astype(dtype)


class AxisView:
    """A lazy view of an array with its axes reordered and singleton axes dropped.

    Parameters
    ----------
    data : array-like
        numpy, dask, zarr or tifffile-zarr array.
    order : sequence of int, optional
        Axes of ``data`` (without ``drop``) in view order; default their original order.
    drop : sequence of int
        Singleton axes of ``data`` left out of the view (read at index 0).
    """

    def __init__(self, data, order: Sequence[int] | None = None, drop: Sequence[int] = ()):
        self.data = data
        self.drop = tuple(int(a) for a in drop)
        kept = [a for a in range(data.ndim) if a not in self.drop]
        self.order = tuple(kept if order is None else (int(a) for a in order))
        if sorted(self.order) != kept:
            raise ValueError(f"order {self.order} must permute axes {kept}")
        self.shape = tuple(int(data.shape[a]) for a in self.order)
        self.dtype = np.dtype(data.dtype)
        self.ndim = len(self.shape)

    def __getitem__(self, key) -> np.ndarray:
        key = key if isinstance(key, tuple) else (key,)
        if key == (Ellipsis,) or key == ():
            key = ()
        if not all(isinstance(k, (int, np.integer)) for k in key) or len(key) > self.ndim:
            raise TypeError("AxisView takes integer indices for its leading axes only")
        full: list = [slice(None)] * self.data.ndim
        for a in self.drop:
            full[a] = 0
        for a, k in zip(self.order, key, strict=False):
            full[a] = int(k)
        out = np.asarray(self.data[tuple(full)])
        rest = self.order[len(key):]
        return np.transpose(out, np.argsort(np.argsort(rest))) if rest else out

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self[()]
        return out if dtype is None else out.astype(dtype)


def planes_view(data, axis: int = 0, rgb: bool = False):
    """``data`` with the slice axis ``axis`` first: ``(n, [m,] rows, cols[, channels])``.

    Raises
    ------
    InputError
        The data is not 2-D to 4-D (3-D to 5-D with ``rgb``), holds no numbers or no pixels,
        or ``axis`` is not one of its axes (the channel axis of RGB data cannot be the slice
        axis).
    """
    check_array(data)
    plane_ndim = 3 if rgb else 2
    ndim = int(data.ndim)
    kind = "RGB " if rgb else ""
    if not plane_ndim <= ndim <= plane_ndim + 2:
        raise InputError(f"Expected a 2-D {kind}image or a stack of them with up to two leading "
                         f"axes ({plane_ndim}-D to {plane_ndim + 2}-D); got shape "
                         f"{tuple(data.shape)}.")
    if rgb and data.shape[-1] not in (3, 4):
        raise InputError(f"RGB data needs 3 or 4 channels on its last axis; got {data.shape}.")
    if ndim == plane_ndim:
        return data
    last = ndim - 1 if rgb else ndim
    if not -last <= axis < last:
        raise InputError(f"--axis {axis} is not an axis of data with shape {tuple(data.shape)}.")
    axis %= ndim
    order = [axis] + [a for a in range(ndim) if a != axis]
    if not rgb and int(data.shape[order[-1]]) in (3, 4):
        raise InputError(f"Data of shape {tuple(data.shape)} would give planes only "
                         f"{data.shape[order[-1]]} pixels wide: for colour images pass --rgb "
                         "(rgb=True); for a stack stored slice-last pass --axis.")
    return data if axis == 0 else AxisView(data, order=order)


def plane_indices(view, rgb: bool = False, slices: slice | None = None) -> list[tuple[int, ...]]:
    """Indices of the planes of ``view`` (C order), ``slices`` cut along the first axis.

    Raises
    ------
    InputError
        ``slices`` selects nothing.
    """
    lead = tuple(int(s) for s in view.shape[: view.ndim - (3 if rgb else 2)])
    if not lead:
        return [()]
    first = range(lead[0])[slices] if slices is not None else range(lead[0])
    if len(first) == 0:
        raise InputError(f"The slice range {format_slice(slices)} selects no plane: the slice "
                         f"axis has {lead[0]} positions (0 to {lead[0] - 1}).")
    rest = list(np.ndindex(*lead[1:]))
    return [(int(z), *map(int, r)) for z in first for r in rest]


def parse_slices(text: str | None) -> slice | None:
    """``"a:b"``, ``"a:"``, ``":b"``, ``"a:b:step"`` or ``"k"`` (one slice) -> a ``slice``.

    Raises
    ------
    InputError
        The text is not of that form.
    """
    if text is None or text.strip() in ("", ":"):
        return None
    parts = text.strip().split(":")
    try:
        nums = [int(p) if p.strip() else None for p in parts]
    except ValueError:
        nums = []
    if not 1 <= len(parts) <= 3 or not nums:
        raise InputError(f"--slices {text!r}: expected START:STOP (e.g. 0:10) or one index.")
    if len(nums) == 3 and nums[2] is not None and nums[2] <= 0:
        raise InputError(f"--slices {text!r}: the step must be a positive whole number.")
    if len(nums) == 1 and (k := nums[0]) is not None:  # one part: never blank here
        return slice(k, None if k == -1 else k + 1)
    return slice(*nums)


def format_slice(s: slice | None) -> str:
    """A slice the way a user types it: ``slice(7, 9)`` -> ``"7:9"``."""
    if s is None:
        return ":"
    text = ("" if s.start is None else str(s.start)) + ":" + ("" if s.stop is None else str(s.stop))
    return text + (f":{s.step}" if s.step not in (None, 1) else "")

