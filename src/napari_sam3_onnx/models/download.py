"""Download a registered bundle with resume and verification, and check a folder against it.

Each file streams into ``<name>.part``; an interrupted transfer resumes with an HTTP ``Range``
request. The SHA-256 (and size) is checked *before* the file is renamed into place, so a file
under its final name is always a verified one. Where the publisher states no hash, the hash of
the first download is recorded in :data:`RECORD_NAME` beside the files and every later copy is
checked against it (trust on first use): that catches corruption and silent changes upstream,
but not a file that was already wrong the first time. Only ``urllib`` is used, so proxies come
from the usual environment variables; ``opener`` lets callers and tests supply their own.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .errors import (
    ChecksumMismatchError,
    DownloadError,
    GatedModelError,
    RecordedChecksumMismatchError,
    SizeMismatchError,
)
from .local_bundles import build_local_bundle
from .registry import BundleSpec, FileSpec, bundle_dir

#: ``progress(file_name, done_bytes, total_bytes)``; total is None when the server does not say.
#: Raise from it to cancel: the ``.part`` file stays and the next call resumes it.
Progress = Callable[[str, int, int | None], None]

#: Hashes recorded at the first download of files that have no published hash.
RECORD_NAME = ".sha256-first-download.json"
CHUNK = 1 << 20
USER_AGENT = "napari-sam3-onnx (urllib)"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a bundle folder.

    Attributes
    ----------
    file : str
        File name inside the folder.
    kind : str
        ``"missing"``, ``"size"`` or ``"sha256"``.
    detail : str
        What was expected and found, for people.
    """

    file: str
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.file}: {self.detail}"


class _Retry(Exception):
    """A transient failure worth another attempt (connection lost, timeout, 5xx)."""


def sha256_file(path: Path | str, chunk: int = CHUNK) -> str:
    """Lower-case hex SHA-256 of a file, read ``chunk`` bytes at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _load_records(folder: Path) -> dict[str, dict]:
    try:
        data = json.loads((folder / RECORD_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_records(folder: Path, records: dict[str, dict]) -> None:
    tmp = folder / (RECORD_NAME + ".tmp")
    tmp.write_text(json.dumps(records, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, folder / RECORD_NAME)


def _expected(f: FileSpec, records: dict[str, dict]) -> tuple[str | None, bool]:
    """The hash ``f`` must have and whether it comes from a first-download record."""
    if f.sha256:
        return f.sha256.lower(), False
    rec = records.get(f.name)
    if isinstance(rec, dict) and rec.get("url") == f.url and rec.get("sha256"):
        return str(rec["sha256"]), True
    return None, False


def _check_file(f: FileSpec, path: Path, records: dict[str, dict], hashes: bool) -> Problem | None:
    if not path.is_file():
        how = f"download {f.url}" if f.url else "not published; see the bundle's notes"
        return Problem(f.name, "missing", f"missing ({how})")
    size = path.stat().st_size
    if f.size is not None and size != f.size:
        return Problem(f.name, "size", f"{size} bytes, expected {f.size}")
    expected, _ = _expected(f, records)
    if hashes and expected:
        actual = sha256_file(path)
        if actual != expected:
            return Problem(f.name, "sha256", f"SHA-256 {actual}, expected {expected}")
    return None


def verify_folder(spec: BundleSpec, folder: Path | str, check_hashes: bool = True) -> list[Problem]:
    """Check that ``folder`` holds every file of ``spec`` with the right size and hash.

    Parameters
    ----------
    spec : BundleSpec
        The bundle the folder should hold.
    folder : Path or str
        The folder to check.
    check_hashes : bool
        Also hash every file (slow for GB-sized encoders); sizes are always checked.

    Returns
    -------
    list of Problem
        Empty when the folder is complete and intact. Files without a published hash are
        checked against the hash recorded at their first download, if any.
    """
    folder = Path(folder)
    records = _load_records(folder)
    found = (_check_file(f, folder / f.name, records, check_hashes) for f in spec.files)
    return [p for p in found if p is not None]


def _by_hand(spec: BundleSpec, folder: Path, files: list[FileSpec]) -> str:
    names = ", ".join(f.name for f in files) or "(see the source)"
    source = f" from {spec.page_url}" if spec.page_url else ""
    return f"Download the files by hand{source} and place them in {folder}: {names}."


def download_bundle(
    spec: BundleSpec,
    dest: Path | str | None = None,
    progress: Progress | None = None,
    token: str | None = None,
    opener: urllib.request.OpenerDirector | None = None,
    *,
    retries: int = 3,
    timeout: float = 60.0,
    retry_wait: float = 2.0,
) -> Path:
    """Download every published file of ``spec`` into ``dest`` and verify it.

    Parameters
    ----------
    spec : BundleSpec
        The bundle to fetch.
    dest : Path or str, optional
        Target folder; default :func:`~.registry.bundle_dir` of ``spec.id``.
    progress : callable, optional
        ``progress(file_name, done_bytes, total_bytes)`` after each chunk (and once for files
        already in place). Raising from it cancels; the partial file is kept for resuming.
    token : str, optional
        Hugging Face access token, sent only to the first host (never along redirects).
    opener : urllib.request.OpenerDirector, optional
        Opener to use; default ``urllib.request.build_opener()``.
    retries : int
        Extra attempts per file after a transient failure; each resumes where the last stopped.
    timeout : float
        Socket timeout in seconds.
    retry_wait : float
        Seconds to wait before the first retry (doubled each time).

    Returns
    -------
    Path
        The bundle folder.

    Raises
    ------
    GatedModelError
        The repository is gated and no token was given, or the hub refused the token.
    DownloadError
        No network, server error, a file not found at the pinned revision, not enough disk
        space, or files that are not published; the message names the folder and the files to
        place there by hand.
    ChecksumMismatchError, SizeMismatchError
        A downloaded file is not the published one; it is deleted, nothing is put in place.
    """
    if spec.builder:  # built on this machine (the toy): nothing to download
        return build_local_bundle(spec, dest)
    folder = Path(dest) if dest is not None else bundle_dir(spec.id)
    if not spec.files:
        raise DownloadError(
            f"The {spec.title} bundle has no pinned file list. {spec.notes} "
            f"{_by_hand(spec, folder, [])}"
        )
    missing = [f for f in spec.files if not (folder / f.name).is_file()]
    if spec.gated and not token:
        raise GatedModelError(spec.source_repo, spec.page_url, folder, [f.name for f in missing])
    folder.mkdir(parents=True, exist_ok=True)
    opener = opener or urllib.request.build_opener()
    report = progress or (lambda _name, _done, _total: None)
    records = _load_records(folder)
    for f in spec.files:
        target = folder / f.name
        if not f.url or (target.is_file() and _check_file(f, target, records, True) is None):
            if target.is_file():
                report(f.name, target.stat().st_size, target.stat().st_size)
                if not f.sha256 and f.url and f.name not in records:
                    records[f.name] = {
                        "url": f.url,
                        "sha256": sha256_file(target),
                        "size": target.stat().st_size,
                    }
                    _save_records(folder, records)
            continue
        expected, recorded = _expected(f, records)
        attempt = 0
        while True:
            try:
                digest, size = _fetch(f, target, expected, opener, token, report, timeout)
                break
            except _Retry as exc:
                if attempt >= retries:
                    left = [g for g in spec.files if not (folder / g.name).is_file()]
                    raise DownloadError(
                        f"Could not download {f.url} ({exc}). Check the network and try again "
                        "(the partial file is kept and the download resumes), or: "
                        f"{_by_hand(spec, folder, left)}"
                    ) from exc
                time.sleep(retry_wait * 2**attempt)
                attempt += 1
            except ChecksumMismatchError as exc:
                if recorded:
                    raise RecordedChecksumMismatchError(
                        target, exc.expected, exc.actual, folder / RECORD_NAME
                    ) from None
                raise
            except urllib.error.HTTPError as exc:
                raise _http_error(exc, spec, f, folder) from None
        if not f.sha256:
            records[f.name] = {"url": f.url, "sha256": digest, "size": size}
            _save_records(folder, records)
    unpublished = [f for f in spec.files if not (folder / f.name).is_file()]
    if unpublished:
        raise DownloadError(
            f"Downloaded what is published, but some files of {spec.title} are "
            f"not: {spec.notes} Place them in {folder}: "
            f"{', '.join(f.name for f in unpublished)}."
        )
    return folder


def _http_error(
    exc: urllib.error.HTTPError, spec: BundleSpec, f: FileSpec, folder: Path
) -> DownloadError:
    left = [g for g in spec.files if not (folder / g.name).is_file()]
    if exc.code in (401, 403):
        return GatedModelError(
            spec.source_repo or f.url, spec.page_url or f.url, folder, [g.name for g in left]
        )
    what = "not found at the pinned revision" if exc.code == 404 else f"refused ({exc.reason})"
    return DownloadError(f"{f.url}: HTTP {exc.code}, {what}. {_by_hand(spec, folder, left)}")


def _fetch(
    f: FileSpec,
    target: Path,
    expected: str | None,
    opener: urllib.request.OpenerDirector,
    token: str | None,
    report: Progress,
    timeout: float,
) -> tuple[str, int]:
    """One attempt at ``f``: resume ``<target>.part``, verify, rename; return (sha256, size)."""
    part = target.with_name(target.name + ".part")
    offset = part.stat().st_size if part.is_file() else 0
    if f.size is not None and offset > f.size:
        part.unlink()
        offset = 0
    request = urllib.request.Request(f.url, headers={"User-Agent": USER_AGENT})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    if token:
        request.add_unredirected_header("Authorization", f"Bearer {token}")
    try:
        response = opener.open(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:  # the .part may already hold the whole file
            try:
                return _finish(f, target, part, expected, sha256_file(part), offset)
            except (ChecksumMismatchError, SizeMismatchError):  # stale .part, now deleted
                raise _Retry("the partial file did not match; starting again") from exc
        if exc.code in (408, 429) or exc.code >= 500:
            raise _Retry(f"HTTP {exc.code} {exc.reason}") from exc
        raise
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        raise _Retry(getattr(exc, "reason", None) or exc) from exc
    with response:
        status = getattr(response, "status", None) or response.getcode()
        total = _total(response, offset if status == 206 else 0, f.size)
        if status != 206:
            offset = 0
        elif not response.headers.get("Content-Range", "").startswith(f"bytes {offset}-"):
            part.unlink()
            raise _Retry("the server resumed at the wrong byte; starting again")
        if total is not None and shutil.disk_usage(target.parent).free < total - offset:
            raise DownloadError(
                f"Not enough free disk space in {target.parent} for {f.name} "
                f"({total - offset} bytes needed)."
            )
        digest = hashlib.sha256()
        if offset:
            with open(part, "rb") as old:
                while block := old.read(CHUNK):
                    digest.update(block)
        done = offset
        report(f.name, done, total)
        with open(part, "ab" if offset else "wb") as out:
            while True:
                try:
                    block = response.read(CHUNK)
                except (OSError, http.client.HTTPException) as exc:
                    raise _Retry(f"connection lost after {done} bytes ({exc!r})") from exc
                if not block:
                    break
                out.write(block)
                digest.update(block)
                done += len(block)
                report(f.name, done, total)
    if total is not None and done < total:
        raise _Retry(f"connection closed after {done} of {total} bytes")
    return _finish(f, target, part, expected, digest.hexdigest(), done)


def _total(response: http.client.HTTPResponse, offset: int, published: int | None) -> int | None:
    match = re.search(r"/(\d+)\s*$", response.headers.get("Content-Range", ""))
    if match:
        return int(match.group(1))
    length = response.headers.get("Content-Length")
    return offset + int(length) if length and length.isdigit() else published


def _finish(
    f: FileSpec, target: Path, part: Path, expected: str | None, actual: str, size: int
) -> tuple[str, int]:
    if f.size is not None and size != f.size:
        part.unlink()
        raise SizeMismatchError(target, f.size, size)
    if expected and actual != expected:
        part.unlink()
        raise ChecksumMismatchError(target, expected, actual)
    os.replace(part, target)
    return actual, size
