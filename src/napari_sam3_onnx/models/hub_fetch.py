"""One file from the Hugging Face Hub (or a plain URL) through ``huggingface_hub``.

This is the only module that calls ``huggingface_hub``. The library does the transfer (it
resumes within one call after a dropped connection; a failed call keeps no partial file),
redirects, tokens (``token=``, ``$HF_TOKEN``, ``hf auth login``), mirrors (``$HF_ENDPOINT`` or
``endpoint=``), offline mode (``$HF_HUB_OFFLINE``) and the shared cache (``$HF_HOME``). What is
ours is the progress hook (a tqdm stand-in that reports to a plain callback, which may raise to
cancel) and turning the library's errors into messages that name the repository, the folder
and the files to place by hand.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from .bundle_spec import HF
from .errors import DownloadError, GatedModelError, TokenAccessError

#: ``progress(file_name, done_bytes, total_bytes)``; total is None when the server does not say.
Progress = Callable[[str, int, int | None], None]

_RESOLVE = re.compile(r"/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)")


def hub_location(url: str) -> tuple[str, str, str] | None:
    """``(repo_id, revision, path_in_repo)`` of a ``https://huggingface.co/.../resolve/...`` URL.

    None for any other URL (those are fetched as plain files by :func:`fetch_url`).
    """
    if not url.startswith(HF + "/"):
        return None
    match = _RESOLVE.fullmatch(url[len(HF):])
    return (match["repo"], match["rev"], match["path"]) if match else None


def check_endpoint(endpoint: str | None) -> str | None:
    """``endpoint`` without a trailing slash; a :class:`DownloadError` if it is not a URL."""
    if endpoint is None:
        return None
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise DownloadError(f"The endpoint {endpoint!r} is not a URL: give the mirror as "
                            "http(s)://host[:port], e.g. https://hf-mirror.com.")
    return endpoint.rstrip("/")


def effective_token(token: str | None) -> str | None:
    """``token``, else the one ``huggingface_hub`` would send ($HF_TOKEN, then the login)."""
    if token:
        return token
    from huggingface_hub import get_token

    return get_token()


def progress_class(name: str, report: Progress) -> tuple[type, list[bool]]:
    """A tqdm stand-in for ``tqdm_class=`` and a flag set once a transfer started.

    ``huggingface_hub`` calls a class that is not its own tqdm with the keyword arguments
    ``total``, ``initial``, ``desc``, ``unit``, ``unit_scale``; ``update(n)`` adds bytes.
    """
    started: list[bool] = []

    class _Report:
        def __init__(self, *args, total=None, initial=0, **kwargs) -> None:
            self.n, self.total = int(initial or 0), total
            started.append(True)
            report(name, self.n, self.total)

        def update(self, n: int = 1) -> None:
            self.n += int(n)
            report(name, self.n, self.total)

        def close(self) -> None:
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            self.close()

    return _Report, started


def hub_download(
    repo: str, path: str, revision: str, *, name: str, report: Progress,
    token: str | None, endpoint: str | None, cache_dir: Path | None, local_dir: Path | None,
    force: bool = False,
) -> tuple[Path, bool]:
    """Fetch ``path`` of ``repo`` at ``revision``; return ``(local path, transferred)``.

    The file lands in the Hugging Face cache (``cache_dir``, default ``$HF_HOME/hub``), or
    under ``local_dir`` at its path in the repository. ``transferred`` is False when it was
    already there (nothing was sent). Errors are the library's (see :func:`hub_error`).
    """
    from huggingface_hub import hf_hub_download

    guard_stalls()
    bar, started = progress_class(name, report)
    local = hf_hub_download(
        repo, path, revision=revision, cache_dir=cache_dir, local_dir=local_dir,
        token=token or None, endpoint=endpoint, tqdm_class=bar, force_download=force,
        library_name="napari-sam3-onnx", library_version=_version(),
    )
    return Path(local), bool(started)


def fetch_url(url: str, part: Path, *, name: str, report: Progress,
              size: int | None) -> None:
    """Fetch a file that is not on a hub into ``part`` (resuming what it holds, if anything)."""
    from huggingface_hub.file_download import http_get

    guard_stalls()
    bar, _ = progress_class(name, report)
    offset = part.stat().st_size if part.is_file() else 0
    if size is not None and offset > size:
        part.unlink()
        offset = 0
    with open(part, "ab") as fh:
        http_get(url, fh, resume_size=offset, expected_size=size, displayed_filename=name,
                 tqdm_class=bar)


#: A transfer that receives fewer than this many bytes per second, averaged over a window of
#: STALL_WINDOWS x ``HF_HUB_DOWNLOAD_TIMEOUT`` seconds, has stalled.
STALL_FLOOR = 1024
STALL_WINDOWS = 3


def guard_stalls() -> None:
    """Make the library's HTTP session end a transfer that trickles bytes.

    ``huggingface_hub`` gives every read ``HF_HUB_DOWNLOAD_TIMEOUT`` seconds (its own setting,
    default 10): a server that sends nothing fails, but one that sends a byte every few seconds
    passes every read and the download never ends. A response hook on the library's session
    (:func:`huggingface_hub.get_session`) wraps each response body: when a window of
    ``STALL_WINDOWS`` x that timeout brings fewer than ``STALL_FLOOR`` bytes a second, the
    read fails with the client's ``ReadTimeout``, which the library retries (resuming) and then
    reports like any other timeout. Raising ``HF_HUB_DOWNLOAD_TIMEOUT`` widens the window.
    Installed once per session; other requests are left as they are.
    """
    from huggingface_hub import constants, get_session

    session = get_session()
    hooks = session.event_hooks
    if any(getattr(h, "_nso_stall_guard", False) for h in hooks.get("response", [])):
        return
    client = _client()
    guard = type("StallGuard", (_StallGuard, client.SyncByteStream), {})

    def hook(response) -> None:
        window = STALL_WINDOWS * float(constants.HF_HUB_DOWNLOAD_TIMEOUT)
        response.stream = guard(response.stream, window, client.ReadTimeout)

    hook._nso_stall_guard = True  # type: ignore[attr-defined]
    session.event_hooks = {**hooks, "response": [*hooks.get("response", []), hook]}


class _StallGuard:
    """A response body stream that fails when it brings too few bytes per window.

    Mixed with the client's ``SyncByteStream`` by :func:`guard_stalls` (the client checks it).
    """

    def __init__(self, stream, window: float, error: type[Exception]) -> None:
        self.stream, self.window, self.error = stream, window, error

    def __iter__(self):
        import time

        start, got = time.monotonic(), 0
        for chunk in self.stream:
            got += len(chunk)
            elapsed = time.monotonic() - start
            if elapsed >= self.window:
                if got < STALL_FLOOR * elapsed:
                    raise self.error(f"the transfer stalled: {got} bytes in {elapsed:.0f} s "
                                     f"(raise HF_HUB_DOWNLOAD_TIMEOUT to wait longer)")
                start, got = time.monotonic(), 0
            yield chunk

    def close(self) -> None:
        self.stream.close()


def is_transient(exc: BaseException) -> bool:
    """Worth another attempt: a lost connection, a timeout, a 408/429 or a 5xx answer."""
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    if isinstance(exc, OfflineModeIsEnabled) or _offline():
        return False
    if isinstance(exc, HfHubHTTPError):
        code = _status(exc)
        return code is not None and (code in (408, 429) or code >= 500)
    if isinstance(exc, LocalEntryNotFoundError):  # could not reach the hub and not cached
        return True
    return isinstance(exc, _transport_errors()) and type(exc).__name__ != "TooManyRedirects"


def hub_error(exc: BaseException, *, repo: str, page_url: str, url: str, token: str | None,
              by_hand: str, folder: Path, left: list[str]) -> DownloadError | None:
    """The :class:`DownloadError` for a library error, or None if ``exc`` is not one.

    ``by_hand`` is the sentence naming the folder and the files to place there.
    """
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    if isinstance(exc, HfHubHTTPError):
        code = _status(exc)
        if code in (401, 403):
            if not token:
                return GatedModelError(repo or url, page_url or url, folder, left)
            return TokenAccessError(repo or url, page_url or url, folder, left, code)
        what = "not found at the pinned revision" if code == 404 else "refused"
        return DownloadError(f"{url}: HTTP {code}, {what}. {by_hand}")
    if isinstance(exc, OfflineModeIsEnabled | LocalEntryNotFoundError) and _offline():
        return DownloadError(f"Offline ($HF_HUB_OFFLINE is set) and {url} is not in the Hugging "
                             f"Face cache. {by_hand}")
    if isinstance(exc, (LocalEntryNotFoundError, *_transport_errors())):
        cause = exc.__cause__ or exc
        reason = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
        return DownloadError(f"Could not download {url} ({reason}); nothing of it was kept. "
                             f"Check the network and try again, or: {by_hand}")
    return None


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The HTTP client's request-level errors (the library's own fork of httpx, or httpx).

    ``RequestError`` covers a lost connection, a timeout, a redirect loop (``TooManyRedirects``)
    and a body that cannot be decoded: each is a failed download, not a bug.
    """
    return (_client().RequestError,)


def _client():
    """The library's HTTP client module: its own fork of httpx, or httpx in older releases."""
    try:
        return importlib.import_module("httpx2")
    except ImportError:  # huggingface_hub releases built on httpx itself
        return importlib.import_module("httpx")


def _version() -> str:
    from .. import __version__

    return __version__


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.is_offline_mode())
