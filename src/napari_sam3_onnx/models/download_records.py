"""First-download hash records and the check of a bundle folder against its registry entry.

Split out of :mod:`.download` (which fetches and certifies): :data:`RECORD_NAME` holds the
SHA-256 of the first download of a file that has no published hash (trust on first use);
:func:`verify_folder` checks content, sizes and hashes against the entry and those records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .atomic import write_atomically
from .content_check import content_problem
from .hashing import sha256_file
from .registry import BundleSpec, FileSpec

#: Hashes recorded at the first download of files that have no published hash.
RECORD_NAME = ".sha256-first-download.json"
#: Records written after a content check carry ``"checked": CHECKED``.
CHECKED = 1


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a bundle folder.

    Attributes
    ----------
    file : str
        File name inside the folder.
    kind : str
        ``"missing"``, ``"content"``, ``"size"`` or ``"sha256"``.
    detail : str
        What was expected and found, for people.
    """

    file: str
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.file}: {self.detail}"


def _load_records(folder: Path) -> dict[str, dict]:
    try:
        data = json.loads((folder / RECORD_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_records(folder: Path, records: dict[str, dict]) -> None:
    text = json.dumps(records, indent=1, sort_keys=True)
    write_atomically(folder / RECORD_NAME, text.encode("utf-8"))


def _expected(f: FileSpec, records: dict[str, dict]) -> tuple[str | None, bool]:
    """The hash ``f`` must have and whether it comes from a first-download record.

    Only records written after a content check count; older ones certify nothing.
    """
    if f.sha256:
        return f.sha256.lower(), False
    rec = records.get(f.name)
    if (isinstance(rec, dict) and rec.get("url") == f.url and rec.get("sha256")
            and rec.get("checked") == CHECKED):
        return str(rec["sha256"]), True
    return None, False


def _problem(f: FileSpec, path: Path, records: dict[str, dict], hashes: bool) -> Problem | None:
    """What is wrong with ``path`` as the copy of ``f`` (None: it may be used)."""
    if not path.is_file():
        how = f"download {f.url}" if f.url else "not published; see the bundle's notes"
        return Problem(f.name, "missing", f"missing ({how})")
    reason = content_problem(path, f.name, path.parent)
    if reason:
        return Problem(f.name, "content", f"not what its name says: {reason}")
    size = path.stat().st_size
    if f.size is not None and size != f.size:
        return Problem(f.name, "size", f"{size} bytes, expected {f.size}")
    expected, recorded = _expected(f, records)
    if hashes and expected:
        actual = sha256_file(path)
        if actual != expected:
            source = "recorded at the first download" if recorded else "published"
            return Problem(f.name, "sha256", f"SHA-256 {actual}, expected {expected} ({source})")
    return None


def verify_folder(spec: BundleSpec, folder: Path | str, check_hashes: bool = True) -> list[Problem]:
    """Check that ``folder`` holds every file of ``spec`` with the right content, size and hash.

    Parameters
    ----------
    spec : BundleSpec
        The bundle the folder should hold.
    folder : Path or str
        The folder to check.
    check_hashes : bool
        Also hash every file (slow for GB-sized encoders); content and sizes are always checked.

    Returns
    -------
    list of Problem
        Empty when the folder is complete and intact. Files without a published hash are
        checked against the hash recorded at their first download, if any.
    """
    folder = Path(folder)
    records = _load_records(folder)
    found = (_problem(f, folder / f.name, records, check_hashes) for f in spec.files)
    return [p for p in found if p is not None]
