"""Before a download from the dock, check the server is reachable at all (no Qt here).

With no network, the Hugging Face library retries with back-off for about 25 s before it gives
up. The dock first opens one TCP connection to the host of the first file it still needs, with
a short timeout, so an offline machine is told at once, in words that fit a notification's
first line.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from napari_sam3_onnx.models.errors import DownloadError

#: Seconds to wait for the server's answer to a connection.
TIMEOUT_S = 4.0


def first_server(spec, folder: Path) -> tuple[str, int] | None:
    """``(host, port)`` serving the first file of ``spec`` not yet in ``folder``.

    A Hugging Face file comes from the library's endpoint (``$HF_ENDPOINT``, a mirror);
    None when nothing is left to fetch.
    """
    from napari_sam3_onnx.models.hub_fetch import hub_location

    for f in spec.files:
        if f.url and not (folder / f.name).is_file():
            url = f.url
            if hub_location(url) is not None:
                from huggingface_hub import constants

                url = constants.ENDPOINT
            parts = urlparse(url)
            default = 80 if parts.scheme == "http" else 443
            return parts.hostname or "", parts.port or default
    return None


def check_reachable(spec, folder: Path, timeout: float = TIMEOUT_S) -> None:
    """Raise :class:`DownloadError` at once when the server of ``spec``'s files is unreachable.

    Nothing is checked in offline mode (``$HF_HUB_OFFLINE``: the Hugging Face cache answers)
    or when every file is already in ``folder``.
    """
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return
    server = first_server(spec, folder)
    if server is None:
        return
    host = server[0]
    try:
        with socket.create_connection(server, timeout=timeout):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise DownloadError(
            f"No connection to {host} ({reason}): the download of {spec.title} did not start "
            f"and nothing was written. Check the network and try again, or place the files "
            f"in {folder} by hand.") from exc
