"""A small fake Hugging Face Hub on 127.0.0.1 for download tests.

It serves the resolve endpoint ``/{repo}/resolve/{revision}/{filename}`` for ``HEAD`` and
``GET`` with the headers ``huggingface_hub`` reads (``X-Repo-Commit``, ``ETag``,
``X-Linked-Etag`` / ``X-Linked-Size`` for LFS files, ``Content-Length``) and byte ``Range``
requests, and it can misbehave on request: drop the connection mid-file, answer 401 or 403, or
serve other bytes than a file's name promises.
"""

from __future__ import annotations

import hashlib
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: The commit every pinned revision of the fake hub resolves to when it is not one itself.
COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    """A threaded HTTP server serving ``files`` (URL path -> bytes).

    Attributes
    ----------
    files : dict of str to bytes
        ``/{repo}/resolve/{revision}/{filename}`` -> content.
    requests : list of (method, path, headers)
        Every request received, in order (header names in lower case).
    cut_after : dict of str to list of int
        Path -> bytes to send on successive GETs before closing the connection.
    status : dict of str to int
        Path (or ``"*"`` for every path) -> HTTP error status to answer instead.
    trickle : dict of str to float
        Path -> seconds to wait before each byte of a GET's body (a server that trickles).
    redirect : dict of str to str
        Path (or ``"*"``) -> the path to send the client to instead (302; itself: a loop).
    lfs : bool
        Serve files as LFS objects (``X-Linked-Etag`` = SHA-256, ``X-Linked-Size``).
    """

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.cut_after: dict[str, list[int]] = {}
        self.status: dict[str, int] = {}
        self.lfs = True
        self.redirect: dict[str, str] = {}
        self.trickle: dict[str, float] = {}
        handler = type("Handler", (_Handler,), {"hub": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        """The base URL to pass as ``endpoint`` / ``HF_ENDPOINT``."""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def url(self, path: str) -> str:
        return self.endpoint + path

    def gets(self, path: str | None = None) -> list[tuple[str, dict[str, str]]]:
        """The GET requests (path, headers), optionally for one path only."""
        return [(p, h) for m, p, h in self.requests if m == "GET" and path in (None, p)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Handler(BaseHTTPRequestHandler):
    """Answers for the :class:`FakeHub` set as ``hub`` on a subclass."""

    hub: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self._answer(body=False)

    def do_GET(self):
        self._answer(body=True)

    def _answer(self, body: bool) -> None:
        self.hub.requests.append((self.command, self.path,
                              {k.lower(): v for k, v in self.headers.items()}))
        target = self.hub.redirect.get(self.path, self.hub.redirect.get("*"))
        if target is not None:
            self.send_response(302)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        code = self.hub.status.get(self.path, self.hub.status.get("*"))
        if code is not None:
            self._error(code)
            return
        data = self.hub.files.get(self.path)
        if data is None:
            self._error(404, "EntryNotFound")
            return
        start, status = 0, 200
        rng = self.headers.get("Range")
        if rng and body:
            start = int(re.fullmatch(r"bytes=(\d+)-\d*", rng).group(1))
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        self.send_response(status)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self._hub_headers(data)
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        if not body:
            return
        payload = data[start:]
        delay = self.hub.trickle.get(self.path)
        if delay is not None:
            import time

            try:
                for i in range(len(payload)):
                    time.sleep(delay)
                    self.wfile.write(payload[i:i + 1])
                    self.wfile.flush()
            except OSError:  # the client gave up
                pass
            self.close_connection = True
            return
        cuts = self.hub.cut_after.get(self.path)
        if cuts:
            self.wfile.write(payload[: cuts.pop(0)])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(payload)

    def _hub_headers(self, data: bytes) -> None:
        if "/resolve/" not in self.path:  # a plain file server (e.g. GitHub raw)
            return
        revision = self.path.split("/resolve/", 1)[1].split("/", 1)[0]
        commit = revision if re.fullmatch(r"[0-9a-f]{40}", revision) else COMMIT
        self.send_header("X-Repo-Commit", commit)
        git = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        self.send_header("ETag", f'"{git}"')
        if self.hub.lfs:
            self.send_header("X-Linked-Etag", f'"{hashlib.sha256(data).hexdigest()}"')
            self.send_header("X-Linked-Size", str(len(data)))
        self.send_header("Accept-Ranges", "bytes")

    def _error(self, code: int, error_code: str | None = None) -> None:
        body = f"error {code}".encode()
        self.send_response(code)
        if error_code is None and code in (401, 403):
            error_code = "GatedRepo"
        if error_code:
            self.send_header("X-Error-Code", error_code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
