"""Write an output under a temporary sibling name and move it into place only when complete.

The temporary name is new and ours alone (``.NAME.<random>.partial``, created exclusively), so a
file the user happens to have called ``labels.tif.partial`` is never touched, two runs writing
the same output cannot clobber each other's half-written files, and an interrupted run (Ctrl+C,
SIGTERM, an error) leaves the old output, if any, exactly as it was.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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


@contextmanager
def atomic_output(path: Path, directory: bool = False) -> Iterator[Path]:
    """Yield a fresh temporary sibling of ``path``; on success it replaces ``path``.

    Parameters
    ----------
    path : Path
        The final name (whether it may be replaced is checked before the work starts, by
        :func:`~napari_sam3_onnx.cli.guard.check_outputs`, or the widget).
    directory : bool
        The output is a folder (a zarr array).

    On any exception, including KeyboardInterrupt, the temporary sibling is deleted and
    ``path`` is left untouched.
    """
    tmp = new_sibling(path, directory)
    try:
        yield tmp
        replace_into(tmp, path)
    except BaseException:
        if directory:  # a zarr array: its writes may still be running after an interrupt
            from ..engine.store.files import settle_io

            settle_io()
        remove_ours(tmp)
        raise
