"""Typed errors with messages a microscopist can act on.

Every error says what was expected, what was found, and what to do next. The widget shows
``str(error)`` in a notification; the CLI prints it and exits non-zero.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


class Sam3OnnxError(Exception):
    """Base class of this package's errors."""


class ModelFileMissingError(Sam3OnnxError, FileNotFoundError):
    """A file a bundle needs is not on disk."""

    def __init__(self, path: Path | str, hint: str = "") -> None:
        self.path = Path(path)
        msg = f"Model file not found: {self.path}."
        if hint:
            msg += f" {hint}"
        super().__init__(msg)


class CorruptModelError(Sam3OnnxError):
    """A model file exists but cannot be read (truncated download, wrong file, bad data file)."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(
            f"Model file {self.path} is damaged or not an ONNX model ({reason}). "
            "Delete it and download it again, or point the plugin at an intact copy."
        )


class ChecksumMismatchError(Sam3OnnxError):
    """A file's SHA-256 differs from the published one; the file is not used."""

    def __init__(self, path: Path | str, expected: str, actual: str) -> None:
        self.path = Path(path)
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"Checksum mismatch for {self.path}: expected SHA-256 {expected}, got {actual}. "
            "The download was deleted and nothing was recorded; fetch it again (an interrupted "
            "or altered download is the usual cause)."
        )


class UnknownLayoutError(Sam3OnnxError):
    """A folder's graphs match no known SAM 3 ONNX layout."""

    def __init__(self, folder: Path | str, found: Iterable[str], note: str = "") -> None:
        self.folder = Path(folder)
        found = list(found)
        if note:
            super().__init__(f"Cannot open {self.folder} as one bundle: {note}.")
            return
        listing = "; ".join(found) if found else "no .onnx files"
        super().__init__(
            f"The ONNX graphs in {self.folder} match no known SAM 3 export layout. Found: "
            f"{listing}. See the Models page of the docs for the supported exports."
        )


class LayoutMismatchError(Sam3OnnxError):
    """A graph was recognised as part of a layout but its inputs/outputs differ from its card."""

    def __init__(self, layout: str, graph: str, detail: str) -> None:
        super().__init__(
            f"Graph {graph!r} does not match the {layout} layout: {detail}. "
            "The file may come from a different export version."
        )


class CapabilityError(Sam3OnnxError):
    """The loaded bundle cannot do what was asked (e.g. text search with a click-only bundle)."""

    def __init__(self, layout: str, capability: str) -> None:
        self.layout = layout
        self.capability = capability
        super().__init__(
            f"The {layout} bundle cannot do {capability!r}: its graphs do not provide it. "
            "Choose a bundle that lists this capability on the Models page."
        )


class MissingCapabilityError(CapabilityError):
    """A role the caller asked for (prompt decoder, detector, memory) is not in the bundle.

    Raised by the adapter's role accessors and :meth:`SamAdapter.require`; it is a
    :class:`CapabilityError`, with the same message.
    """


class DownloadError(Sam3OnnxError):
    """A download failed (no network, server error); says where to put the files by hand."""


class GatedModelError(DownloadError):
    """The hub answers only to users who accepted the model's licence and send an access token."""

    def __init__(self, repo: str, page_url: str, folder: Path | str, files: Iterable[str]) -> None:
        self.repo = repo
        self.folder = Path(folder)
        names = ", ".join(files)
        super().__init__(
            f"{repo} is gated on Hugging Face: nothing was downloaded. Open {page_url}, accept "
            "the SAM License there, create an access token (https://huggingface.co/settings/"
            "tokens) and give it to the download (token=..., --token, $HF_TOKEN or 'hf auth "
            f"login'). Or download the files by hand and place them in {self.folder}: {names}."
        )


class TokenAccessError(DownloadError):
    """The hub refused the access token that was sent: 403, no access to the repo; 401, invalid."""

    def __init__(self, repo: str, page_url: str, folder: Path | str, files: Iterable[str],
                 status: int = 403) -> None:
        self.repo = repo
        self.folder = Path(folder)
        why = ("the token has no access to that repository" if status == 403
               else "the token is not valid (mistyped, revoked or expired)")
        super().__init__(
            f"Hugging Face refused the access token for {repo} (HTTP {status}): {why}. "
            f"Open {page_url} while logged in as the token's owner "
            "and accept the licence there, or use a token with read access to it (--token, "
            "$HF_TOKEN or 'hf auth login'). Nothing was downloaded into "
            f"{self.folder}; the files it needs are: {', '.join(files)}."
        )


class ContentMismatchError(Sam3OnnxError):
    """A downloaded file's bytes are not what its name says (an HTML page saved as ``.onnx``)."""

    def __init__(self, name: str, source: str, reason: str, folder: Path | str) -> None:
        self.name = name
        self.reason = reason
        self.folder = Path(folder)
        super().__init__(
            f"The download of {name} from {source} is not a valid {name.rsplit('.', 1)[-1]} "
            f"file ({reason}). It was deleted and nothing was recorded. The server may have sent "
            "a login or error page: check the token and the endpoint, or download the file by "
            f"hand and place it in {self.folder}."
        )


class SizeMismatchError(Sam3OnnxError):
    """A downloaded file's byte size differs from the published one; the file is not used."""

    def __init__(self, path: Path | str, expected: int, actual: int) -> None:
        self.path = Path(path)
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"Size mismatch for {self.path}: expected {expected} bytes, got {actual}. The "
            "download was deleted and nothing was recorded; fetch it again. If this repeats, "
            "the publisher changed the file."
        )


class RecordedChecksumMismatchError(ChecksumMismatchError):
    """A file differs from the hash recorded when it was first downloaded (no published hash)."""

    def __init__(self, path: Path | str, expected: str, actual: str, record: Path | str) -> None:
        super().__init__(path, expected, actual)
        self.record = Path(record)
        self.args = (
            f"{self.args[0]} The expected hash was recorded at the first download in "
            f"{self.record}; if the publisher has since changed the file, delete that record "
            "to accept the new version.",
        )


class PromptError(Sam3OnnxError, ValueError):
    """A prompt cannot be used (outside the image, a degenerate box, empty text, ...)."""


class ModelFileUnreadableError(Sam3OnnxError, PermissionError):
    """A bundle file or folder exists but this user may not read it (its content may be fine)."""

    def __init__(self, path: Path | str, what: str = "file") -> None:
        self.path = Path(path)
        super().__init__(
            f"Cannot read the {what} {self.path}: permission denied. Its content may well be "
            "intact: give your user read access (e.g. chmod a+r, and a+x for a folder) rather "
            "than downloading it again."
        )


class BundleFileError(Sam3OnnxError):
    """A bundle's side file (manifest, constants, tokenizer) exists but cannot be parsed."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = Path(path)
        super().__init__(
            f"The bundle file {self.path} cannot be read ({reason}): it is damaged or not the "
            "file the bundle expects. Restore it from the bundle's download or export (for a "
            "registered bundle: delete it and run 'napari-sam3-onnx fetch ID' again)."
        )


class OutputTakenError(Sam3OnnxError, FileExistsError):
    """An output's name was taken by someone else during the run; the result has another.

    Attributes
    ----------
    path : Path
        The name asked for (left as the other program made it).
    kept : Path
        Where the finished result is.
    """

    def __init__(self, path: Path | str, kept: Path | str) -> None:
        self.path, self.kept = Path(path), Path(kept)
        super().__init__(f"{self.path} appeared while this run worked (another program made "
                         f"it); it was not replaced. The result is in {self.kept} instead.")
