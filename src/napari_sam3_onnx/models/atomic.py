"""Write an output under a temporary sibling name and move it into place only when complete.

The temporary name is new and ours alone (``.NAME.<random>.partial``, created exclusively), so a
file the user happens to have called ``labels.tif.partial`` is never touched, two runs writing
the same output cannot clobber each other's half-written files, and an interrupted run (Ctrl+C,
SIGTERM, an error) leaves the old output, if any, exactly as it was.

Where replacing was not granted (no ``--overwrite``), the finished file takes its name only if
that name is still free at that very moment (:func:`place_new`: ``renameat2`` with
``RENAME_NOREPLACE`` where the system has it, else a hard link or an exclusively created
placeholder): an output someone else created after the up-front check is never replaced; the
result is kept under a new name instead (:class:`OutputTakenError` says which).

The one temp-and-rename writer of the package: the workflows' outputs (``api``, ``cli``, the
widget), the store's digest cache, the download records and the exporter's manifests all go
through it (it lives here, at the bottom layer, so that every layer may use it).
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import OutputTakenError

__all__ = ["OutputTakenError", "atomic_output", "keep_new", "new_sibling", "place_new",
           "remove_ours", "replace_into", "write_atomically"]

#: ``renameat2`` flag: fail with EEXIST instead of replacing the target (Linux >= 3.15).
_RENAME_NOREPLACE = 1
_AT_FDCWD = -100
#: errno values meaning "this file system or kernel cannot do that": try the next way.
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.EXDEV, errno.ENOTSUP,
                errno.EOPNOTSUPP, errno.EMLINK}


def _sibling(path: Path, tag: str) -> Path:
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}.{tag}")


def new_sibling(path: Path, directory: bool = False, tag: str = "partial") -> Path:
    """Create (exclusively) an empty file or folder beside ``path`` and return its name."""
    for _ in range(100):
        tmp = _sibling(path, tag)
        try:
            if directory:
                tmp.mkdir()
            else:
                os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary name beside {path}")


def remove_ours(path: Path) -> None:
    """Delete a temporary file or folder this module created (never called on user paths)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink(missing_ok=True)


def replace_into(tmp: Path, path: Path) -> None:
    """Move the finished ``tmp`` to ``path``, replacing what is there (a file or a folder).

    A folder cannot be replaced in one step: the old one is first renamed aside, the new one
    renamed into place, then the old one deleted, so at every moment one complete version
    exists under one of the two names.
    """
    if path.is_dir() and not path.is_symlink() and tmp.is_dir():
        old = _sibling(path, "old")
        os.replace(path, old)
        try:
            os.replace(tmp, path)
        except BaseException:
            os.replace(old, path)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)


def _renameat2(src: Path, dst: Path) -> bool | None:
    """``renameat2(src, dst, RENAME_NOREPLACE)``: True done, False taken, None unavailable."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.renameat2
    except (OSError, AttributeError):  # musl or an old glibc without the wrapper
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                     ctypes.c_uint]
    if call(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.EEXIST:
        return False
    if err in _UNSUPPORTED:
        return None
    raise OSError(err, os.strerror(err), str(dst))


def _claim_and_replace(tmp: Path, path: Path) -> bool:
    """Create ``path`` exclusively (so it is ours), then rename ``tmp`` over our placeholder."""
    try:
        if tmp.is_dir():
            path.mkdir()
        else:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    try:
        os.replace(tmp, path)
    except OSError:  # someone filled our empty placeholder folder meanwhile: leave it to them
        if path.is_dir() and not any(path.iterdir()):
            path.rmdir()
        return False
    return True


def place_new(tmp: Path, path: Path) -> bool:
    """Rename the finished ``tmp`` (file or folder) to ``path`` only if ``path`` does not exist.

    Returns
    -------
    bool
        True when ``tmp`` is now ``path``; False when ``path`` exists (nothing was changed:
        ``tmp`` is still there).
    """
    if os.name == "nt":  # Windows' rename never replaces
        try:
            os.rename(tmp, path)
            return True
        except FileExistsError:
            return False
    done = _renameat2(tmp, path)
    if done is not None:
        return done
    if not tmp.is_dir():
        try:
            os.link(tmp, path)  # fails if the name is taken, atomically
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in _UNSUPPORTED:
                raise
        else:
            os.unlink(tmp)
            return True
    return _claim_and_replace(tmp, path)


def _free_names(path: Path) -> Iterator[Path]:
    """``NAME-1.tif``, ``NAME-2.tif``, ... beside ``path`` (``.ome.zarr`` kept whole)."""
    name = path.name
    lower = name.lower()
    suffix = next((s for s in (".ome.zarr", ".ome.tiff", ".ome.tif") if lower.endswith(s)),
                  path.suffix)
    base = name[: len(name) - len(suffix)] if suffix else name
    for n in range(1, 1000):
        yield path.with_name(f"{base}-{n}{suffix}")


def keep_new(tmp: Path, path: Path) -> Path:
    """Place ``tmp`` at ``path`` if free, else at the first free ``NAME-n`` beside it.

    Returns the name the result took (``path`` or another one).
    """
    if place_new(tmp, path):
        return path
    for other in _free_names(path):
        if place_new(tmp, other):
            return other
    raise FileExistsError(f"no free name beside {path} for the result")


@contextmanager
def atomic_output(path: Path, directory: bool = False, replace: bool = True,
                  settle: Callable[[], None] | None = None) -> Iterator[Path]:
    """Yield a fresh temporary sibling of ``path``; on success it replaces ``path``.

    Parameters
    ----------
    path : Path
        The final name (whether it may be replaced is checked before the work starts, by
        :func:`~napari_sam3_onnx.cli.guard.check_outputs`, or the widget).
    directory : bool
        The output is a folder (a zarr array).
    replace : bool
        ``path`` may be replaced (the user consented, e.g. ``--overwrite``). If False, the
        result takes the name only if nobody created it meanwhile; otherwise it is kept as
        ``NAME-1.tif`` (or the next free name) and :class:`OutputTakenError` is raised.
    settle : callable, optional
        Called after a failure before the temporary is removed (e.g. to let a writer's
        background threads finish, so they do not recreate what is being removed).

    On any exception, including KeyboardInterrupt, the temporary sibling is deleted and
    ``path`` is left untouched.
    """
    tmp = new_sibling(path, directory)
    try:
        yield tmp
        if replace:
            replace_into(tmp, path)
            return
        kept = keep_new(tmp, path)
    except BaseException:
        if settle is not None:
            settle()
        remove_ours(tmp)
        raise
    if kept != path:
        raise OutputTakenError(path, kept)


def write_atomically(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a new temporary file beside it, renamed into place.

    An interrupted run leaves what was at ``path`` before (or nothing), never half a file; the
    temporary name is created exclusively, so no file of the user's is touched.
    """
    path = Path(path)
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)
