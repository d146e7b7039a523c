"""File-level steps that keep an embedding store whole under crashes and concurrent writers.

Three rules make a store safe for many processes at once (cluster workers, two terminals):

* a group node (the store's root, an image group) is created by hard-linking a finished
  ``zarr.json`` into place, which fails if one is already there: of two racing creators one wins,
  the other uses the winner's node, and nobody ever reads half a metadata file;
* a slice entry is written whole under a temporary name (``.nso-tmp-*``) in its image's folder and
  renamed into place; an old entry is first renamed aside (``.nso-trash-*``) and then removed. The
  entry's path therefore holds a finished entry or nothing, never a half one;
* every array's checksum is recorded in the entry's metadata, because zarr reads a missing chunk
  as zeros: :func:`checksum` of the decoded values is compared on every read.

Names starting with ``.`` are never entries (:func:`~.store_keys.safe_name` strips leading
dots), so leftovers of a killed writer are easy to recognise and remove.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import uuid
import zlib
from pathlib import Path

import numpy as np

TMP_PREFIX = ".nso-tmp-"
TRASH_PREFIX = ".nso-trash-"
#: Checksum recorded per array: CRC-32 of the little-endian bytes of the stored values.
CHECKSUM = "crc32"


def settle_io(timeout: float = 60.0) -> None:
    """Wait until zarr's background I/O (its event-loop thread) has nothing left to do.

    zarr runs every read and write as a task on a loop in its own thread; the calling thread
    only waits for it. A Ctrl+C or SIGTERM in the calling thread stops the wait, not the task,
    which goes on writing (into a temporary entry being removed) or fails later, at shutdown,
    with a stray traceback. Called after such an interruption, before anything is cleaned up.
    A no-op when zarr has started no loop.
    """
    import sys
    import time

    sync = sys.modules.get("zarr.core.sync")
    loop = getattr(sync, "loop", [None])[0] if sync is not None else None
    if loop is None or loop.is_closed() or not loop.is_running():
        return

    async def _others() -> int:
        import asyncio

        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        await asyncio.gather(*tasks, return_exceptions=True)
        return len(tasks)

    import asyncio

    deadline = time.monotonic() + timeout
    with contextlib.suppress(Exception):
        while time.monotonic() < deadline:  # until a pass finds no other task
            future = asyncio.run_coroutine_threadsafe(_others(), loop)
            if not future.result(timeout=max(0.1, deadline - time.monotonic())):
                return


def temp_name(final: str) -> str:
    """A unique temporary sibling name for ``final`` (process id and a random part)."""
    return f"{TMP_PREFIX}{final}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


def is_leftover(name: str) -> bool:
    """Whether ``name`` is a temporary or trashed node a writer left behind."""
    return name.startswith((TMP_PREFIX, TRASH_PREFIX))


def checksum(values: np.ndarray) -> str:
    """CRC-32 (hex) of an array's values as little-endian bytes in C order.

    The dtype and shape are not part of it; the store records them beside it.
    """
    arr = np.ascontiguousarray(values, dtype=np.asarray(values).dtype.newbyteorder("<"))
    return f"{zlib.crc32(arr.data.cast('B')) & 0xFFFFFFFF:08x}"


def create_node(folder: Path, attributes: dict | None = None) -> bool:
    """Make ``folder`` a zarr v3 group with ``attributes`` unless it is one already.

    Returns
    -------
    bool
        True if this call created the node, False if another writer had (its attributes are
        then the winner's, not ``attributes``).
    """
    import zarr

    folder.mkdir(parents=True, exist_ok=True)
    final = folder / "zarr.json"
    if final.is_file():
        return False
    tmp = folder / temp_name("root")
    try:
        zarr.open_group(str(tmp), mode="w", zarr_format=3, attributes=attributes or {})
        try:
            os.link(tmp / "zarr.json", final)
        except FileExistsError:
            return False
        except OSError:  # no hard links on this file system: exclusive create instead
            try:
                with open(final, "xb") as fh:
                    fh.write((tmp / "zarr.json").read_bytes())
            except FileExistsError:
                return False
        return True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def replace_node_metadata(folder: Path, attributes: dict) -> None:
    """Atomically replace the group metadata (``zarr.json``) of ``folder``."""
    import zarr

    tmp = folder / temp_name("root")
    try:
        zarr.open_group(str(tmp), mode="w", zarr_format=3, attributes=attributes)
        os.replace(tmp / "zarr.json", folder / "zarr.json")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def place(tmp: Path, final: Path) -> bool:
    """Rename the finished entry ``tmp`` to ``final``, replacing an entry there.

    Returns
    -------
    bool
        True if ``tmp`` is now at ``final``; False if another writer placed its own entry there
        at the same moment (``tmp`` is then removed, the other entry kept: it is whole too).
    """
    try:
        os.rename(tmp, final)
        return True
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST) and not final.exists():
            raise
    remove(final)
    try:
        os.rename(tmp, final)
        return True
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST) and not final.exists():
            raise
        shutil.rmtree(tmp, ignore_errors=True)
        return False


def remove(node: Path) -> bool:
    """Remove a node folder: renamed aside first (atomic), then deleted. False if absent."""
    trash = node.parent / f"{TRASH_PREFIX}{node.name}-{uuid.uuid4().hex[:12]}"
    try:
        os.rename(node, trash)
    except FileNotFoundError:
        return False
    shutil.rmtree(trash, ignore_errors=True)
    return True


def child_nodes(folder: Path) -> list[str]:
    """Names of the zarr nodes directly in ``folder`` (no leftovers, no loose files), sorted."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        return sorted(e.name for e in os.scandir(folder)
                      if e.is_dir() and not e.name.startswith(".")
                      and (Path(e.path) / "zarr.json").is_file())
    return []


def leftovers(folder: Path) -> list[Path]:
    """Temporary or trashed entries left in ``folder`` by a writer that was killed."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        return sorted(Path(e.path) for e in os.scandir(folder) if is_leftover(e.name))
    return []
