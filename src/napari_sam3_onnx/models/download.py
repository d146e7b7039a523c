"""Download a registered bundle through ``huggingface_hub`` and certify it before use.

The transfer is the library's (:mod:`.hub_fetch`): files land in the user's Hugging Face cache,
shared with every other tool (``$HF_HOME``), and the bundle folder holds links to them; with
``dest`` they are fetched into that folder instead (the library's ``local_dir``). Tokens, mirrors
(``$HF_ENDPOINT``) and offline mode (``$HF_HUB_OFFLINE``) work as the Hub's users know them.

What this module adds is certification. A file appears under its name in the bundle folder only
after it passed, in order: the content check (:mod:`.content_check`: an HTML page saved as
``.onnx`` is refused), the published size, and the published SHA-256. Where the publisher
states no hash, the hash of the first download that passed the content check is recorded in
:data:`RECORD_NAME` beside the files and every later copy is checked against it (trust on first
use): that catches corruption and silent changes upstream, but not a file that was already wrong
the first time. A record that certified a file failing the content check (or one written before
content checks existed) is replaced by the next good download. The graphs are fetched first, so
that external data is checked against the offsets and lengths their headers reference.

In a folder given as ``dest`` (the user's), a file that was there before is never replaced or
deleted unless this module's record says it made it: one that cannot be certified (no published
hash, no record) is compared with a fresh download and kept only if it is the same file; any
other is refused with a message, and left as it is.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .content_check import content_problem
from .download_records import (
    CHECKED,
    RECORD_NAME,
    Problem,
    _expected,
    _load_records,
    _problem,
    _save_records,
    verify_folder,
)
from .errors import (
    ChecksumMismatchError,
    ContentMismatchError,
    DownloadError,
    GatedModelError,
    RecordedChecksumMismatchError,
    SizeMismatchError,
)
from .hashing import sha256_file
from .hub_fetch import (
    Progress,
    check_endpoint,
    effective_token,
    fetch_url,
    hub_download,
    hub_error,
    hub_location,
    is_transient,
)
from .registry import BundleSpec, FileSpec, bundle_dir

__all__ = ["RECORD_NAME", "Problem", "Progress", "download_bundle", "sha256_file",
           "verify_folder"]

#: Folder inside ``dest`` where the library stages files before they are certified.
STAGING = ".hf-download"


def _by_hand(spec: BundleSpec, folder: Path, files: list[FileSpec]) -> str:
    names = ", ".join(f.name for f in files) or "(see the source)"
    source = f" from {spec.page_url}" if spec.page_url else ""
    return f"Download the files by hand{source} and place them in {folder}: {names}."


def download_bundle(
    spec: BundleSpec,
    dest: Path | str | None = None,
    progress: Progress | None = None,
    token: str | None = None,
    *,
    endpoint: str | None = None,
    cache_dir: Path | str | None = None,
    retries: int = 0,
    retry_wait: float = 2.0,
) -> Path:
    """Download every published file of ``spec``, certify it and return the bundle folder.

    Parameters
    ----------
    spec : BundleSpec
        The bundle to fetch.
    dest : Path or str, optional
        Fetch the files into this folder. Default: into the Hugging Face cache, linked from
        :func:`~.registry.bundle_dir` of ``spec.id``.
    progress : callable, optional
        ``progress(file_name, done_bytes, total_bytes)`` as bytes arrive (and once for files
        already in place). Raising from it cancels: the file being fetched is not kept
        (neither ``huggingface_hub`` nor this module keeps partial files); certified ones stay.
    token : str, optional
        Hugging Face access token; default the one ``huggingface_hub`` finds (``$HF_TOKEN``,
        ``hf auth login``).
    endpoint : str, optional
        A Hugging Face mirror; default ``$HF_ENDPOINT`` or the Hub.
    cache_dir : Path or str, optional
        The Hugging Face cache; default ``$HF_HOME/hub``.
    retries : int
        Extra attempts per file after a transient failure (no connection, a 5xx answer, a
        connection lost mid-file), on top of the library's own retries with back-off (about
        25 s before it gives up on an unreachable host).
    retry_wait : float
        Seconds to wait before the first retry (doubled each time).

    Raises
    ------
    GatedModelError
        The repository is gated and no token was found, or the hub refused to answer without
        one; :class:`~.errors.TokenAccessError` when the token sent lacks access.
    DownloadError
        A bundle built on this machine (``spec.builder``), not a URL as ``endpoint``, no
        network, offline mode, a server error, a file not found at the pinned revision, or
        files that are not published; the message names the folder and the files to place
        there by hand.
    ContentMismatchError, ChecksumMismatchError, SizeMismatchError
        A downloaded file is not the published one; it is deleted and nothing is recorded.
    """
    if spec.builder:  # built on this machine (the toy): api.bundle_fetch builds it
        raise DownloadError(f"The {spec.title} is built on this machine, not downloaded: "
                            "fetch it with napari_sam3_onnx.api.bundle_fetch.fetch_bundle.")
    endpoint = check_endpoint(endpoint)
    check_endpoint(os.environ.get("HF_ENDPOINT"))
    folder = Path(dest) if dest is not None else bundle_dir(spec.id)
    if not spec.files:
        raise DownloadError(f"The {spec.title} bundle has no pinned file list. {spec.notes} "
                            f"{_by_hand(spec, folder, [])}")
    missing = [f for f in spec.files if not (folder / f.name).is_file()]
    known = effective_token(token)  # what the library would send, for the gated check
    if spec.gated and not known:
        raise GatedModelError(spec.source_repo, spec.page_url, folder, [f.name for f in missing])
    folder.mkdir(parents=True, exist_ok=True)
    staged_before = (folder / STAGING).exists()
    job = _Job(spec, folder, dest is not None, progress or (lambda *_: None),
               token or (known if spec.gated else None), known, endpoint,
               Path(cache_dir) if cache_dir is not None else None, retries, retry_wait)
    try:  # graphs first: external data is checked against what their headers reference
        for f in sorted(spec.files, key=lambda f: not f.name.lower().endswith(".onnx")):
            if f.url:
                job.fetch(f)
    finally:
        if dest is not None and not staged_before:
            shutil.rmtree(folder / STAGING, ignore_errors=True)
    unpublished = [f for f in spec.files if not (folder / f.name).is_file()]
    if unpublished:
        raise DownloadError(f"Downloaded what is published, but some files of {spec.title} are "
                            f"not: {spec.notes} Place them in {folder}: "
                            f"{', '.join(f.name for f in unpublished)}.")
    return folder


@dataclass
class _Job:
    """One bundle download: where files go and how they are fetched."""

    spec: BundleSpec
    folder: Path
    local: bool  # True: files fetched into the folder; False: the HF cache, linked from it
    report: Progress
    token: str | None  # sent explicitly (else the library sends its own, if any)
    known_token: str | None  # the token the hub saw, for the messages
    endpoint: str | None
    cache_dir: Path | None
    retries: int
    retry_wait: float

    def fetch(self, f: FileSpec) -> None:
        """Put a certified copy of ``f`` in the folder (keep one that is already there)."""
        target = self.folder / f.name
        records = _load_records(self.folder)
        if target.is_file() or target.is_symlink():
            problem = _problem(f, target, records, True)
            if problem is None and _expected(f, records)[0]:
                self.report(f.name, target.stat().st_size, target.stat().st_size)
                return
            if problem is not None and self.local and not self._made_by_us(f, records):
                raise DownloadError(f"{target} was already there and is not {self.spec.title}'s "
                                    f"file ({problem.detail}); it was left as it is. Remove it "
                                    "and fetch again, or fetch into another folder.")
            if problem is not None and problem.kind == "content":
                self._forget_if_certified(f, target, records)
            if problem is None:  # nothing to check it against: compare with a fresh copy
                self._attempts(f, target, records, keep=target)
                return
        self._attempts(f, target, records)

    def _made_by_us(self, f: FileSpec, records: dict[str, dict]) -> bool:
        rec = records.get(f.name)
        return isinstance(rec, dict) and rec.get("url") == f.url and bool(rec.get("sha256"))

    def _attempts(self, f: FileSpec, target: Path, records: dict[str, dict],
                  keep: Path | None = None) -> None:
        for attempt in range(self.retries + 1):
            try:
                self._fetch_once(f, target, records, keep)
                return
            except Exception as exc:  # the library's errors, classified below
                last = attempt == self.retries
                if not is_transient(exc) or last:
                    error = self._error(exc, f)
                    if error is None:
                        raise
                    raise error from None
            time.sleep(self.retry_wait * 2**attempt)

    def _fetch_once(self, f: FileSpec, target: Path, records: dict[str, dict],
                    keep: Path | None = None) -> None:
        """Download, certify and place ``f``; with ``keep``, only if it equals that file."""
        where = hub_location(f.url)
        if where is None:
            part = target.with_name(f".{target.name}.part")
            try:  # the client resumes within the call; a failed call keeps nothing, as the hub's
                fetch_url(f.url, part, name=f.name, report=self.report, size=f.size)
            except BaseException:
                part.unlink(missing_ok=True)
                raise
            self._certify(f, part, records, discard=part.unlink)
            if keep is not None:
                self._keep_if_same(f, keep, part, records, discard=part.unlink)
                return
            os.replace(part, target)
            return
        repo, revision, path = where
        for force in (False, True):
            local, sent = hub_download(
                repo, path, revision, name=f.name, report=self.report, token=self.token,
                endpoint=self.endpoint, cache_dir=self.cache_dir,
                local_dir=self.folder / STAGING if self.local else None, force=force)
            if not sent:
                self.report(f.name, local.stat().st_size, local.stat().st_size)
            try:
                self._certify(f, local, records, discard=lambda p=local: _discard(p))
                break
            except (ContentMismatchError, ChecksumMismatchError, SizeMismatchError):
                if sent or force:  # just downloaded: the server's file is wrong
                    raise
        if keep is not None:
            self._keep_if_same(f, keep, local, records,
                               discard=local.unlink if self.local else (lambda: None))
        elif self.local:
            os.replace(local, target)
        else:
            _link(local, target)

    def _keep_if_same(self, f: FileSpec, found: Path, fresh: Path, records: dict[str, dict],
                      discard) -> None:
        """Keep the file ``found`` in place only if it is the certified download ``fresh``.

        The first-use record was written for ``fresh``; a different ``found`` is refused, not
        replaced (in ``dest`` it is the user's) and the record is dropped again.
        """
        same = sha256_file(found) == sha256_file(fresh)
        discard()
        if same:
            return
        if records.pop(f.name, None) is not None and not f.sha256:
            _save_records(self.folder, records)
        raise DownloadError(f"{found} was already there and is not the file {f.url} serves "
                            "(another SHA-256); it was left as it is and nothing was recorded. "
                            "Remove it and fetch again, or fetch into another folder.")

    def _certify(self, f: FileSpec, path: Path, records: dict[str, dict], discard) -> None:
        """Content, size, hash of a fresh copy; record a first-use hash; delete it if bad."""
        reason = content_problem(path, f.name, self.folder)
        if reason:
            discard()
            raise ContentMismatchError(f.name, f.url, reason, self.folder)
        size = path.stat().st_size
        if f.size is not None and size != f.size:
            discard()
            raise SizeMismatchError(self.folder / f.name, f.size, size)
        expected, recorded = _expected(f, records)
        actual = sha256_file(path)
        if expected and actual != expected:
            discard()
            if recorded:
                raise RecordedChecksumMismatchError(
                    self.folder / f.name, expected, actual, self.folder / RECORD_NAME)
            raise ChecksumMismatchError(self.folder / f.name, expected, actual)
        if not f.sha256:
            records[f.name] = {"url": f.url, "sha256": actual, "size": size, "checked": CHECKED}
            _save_records(self.folder, records)

    def _forget_if_certified(self, f: FileSpec, path: Path, records: dict[str, dict]) -> None:
        """Drop a first-use record that certified ``path``, a file failing the content check."""
        rec = records.get(f.name)
        if isinstance(rec, dict) and rec.get("sha256") == sha256_file(path):
            del records[f.name]
            _save_records(self.folder, records)

    def _error(self, exc: BaseException, f: FileSpec) -> DownloadError | None:
        left = [g for g in self.spec.files if not (self.folder / g.name).is_file()]
        return hub_error(exc, repo=self.spec.source_repo, page_url=self.spec.page_url,
                         url=f.url, token=self.known_token, folder=self.folder,
                         by_hand=_by_hand(self.spec, self.folder, left),
                         left=[g.name for g in left])


def _link(cached: Path, target: Path) -> None:
    """Make ``target`` point at a file in the Hugging Face cache (a symlink, else a copy)."""
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.link")
    try:
        os.symlink(cached, tmp)
    except OSError:  # no symlinks (Windows without developer mode): a hard link, else a copy
        try:
            os.link(cached.resolve(), tmp)
        except OSError:
            shutil.copy2(cached, tmp)
    os.replace(tmp, target)


def _discard(path: Path) -> None:
    """Remove a refused download: the file and, in the cache, the blob it links to."""
    blob = path.resolve()
    path.unlink(missing_ok=True)
    if blob != path:
        blob.unlink(missing_ok=True)
