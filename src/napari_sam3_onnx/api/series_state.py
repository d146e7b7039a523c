"""The series state file: which images of a series are done and where their labels are.

A small JSON file (:data:`STATE_NAME`) in the output folder, rewritten atomically after every
save, shared by the widget's series mode and the command line's ``--skip-done``::

    {"format": "napari-sam3-onnx series", "version": 1, "labels_format": "tif",
     "where": "beside" | "folder",
     "done": {"<item key>": {"labels": "a_labels.tif", "sha256": "...", "size": 1234,
                             "format": "tif", "saved": "2026-01-01T00:00:00+00:00"}}}

An item counts as done only while its labels file is there with the recorded size and SHA-256:
a file changed, replaced or removed since is not reported as done. Labels paths inside the
state's folder are recorded relative to it (the folder can be moved as a whole).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..models.atomic import write_atomically
from ..models.hashing import file_digest
from .io import InputError
from .labels_files import format_of

#: The state file's name in the output folder.
STATE_NAME = "sam3_series.json"
#: ``"format"`` of every state file.
FORMAT = "napari-sam3-onnx series"
VERSION = 1


@dataclass(frozen=True)
class DoneEntry:
    """One saved item: its labels file (as recorded), digest, size, format and time."""

    labels: str
    sha256: str
    size: int
    format: str
    saved: str


@dataclass
class SeriesState:
    """The state of one output folder (see the module notes).

    Attributes
    ----------
    path : Path
        The state file.
    labels_format : str
        The format chosen for new labels files (:data:`.labels_files.FORMATS`).
    where : str
        ``"beside"`` (labels beside each image) or ``"folder"`` (in the state's folder).
    done : dict[str, DoneEntry]
        Item key -> its saved labels.
    """

    path: Path
    labels_format: str = "tif"
    where: str = "folder"
    done: dict[str, DoneEntry] = field(default_factory=dict)
    #: key -> (the file's stat signature and recorded digest, the answer): a file is hashed
    #: again only when its size, times or inode changed.
    _checked: dict[str, tuple[tuple, bool]] = field(default_factory=dict, repr=False,
                                                     compare=False)

    @classmethod
    def load(cls, path: Path | str, labels_format: str = "tif",
             where: str = "folder") -> SeriesState:
        """Read the state file at ``path``; a new, empty state where there is none.

        Raises
        ------
        InputError
            The file exists but is not a series state (it is never overwritten then).
        """
        path = Path(path)
        if not path.exists():
            return cls(path, labels_format, where)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT:
                raise ValueError("not a series state file")
            if int(data.get("version", 0)) > VERSION:
                raise ValueError(f"version {data.get('version')} is newer than this plugin "
                                 "reads; update napari-sam3-onnx")
            done = {str(k): DoneEntry(**v) for k, v in dict(data.get("done", {})).items()}
            return cls(path, str(data.get("labels_format", labels_format)),
                       str(data.get("where", where)), done)
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise InputError(f"{path} is not a readable series state ({exc}); move it away "
                             "or choose another output folder.") from exc

    def save(self) -> None:
        """Write the state atomically (a new file renamed over the old one)."""
        data = {"format": FORMAT, "version": VERSION, "labels_format": self.labels_format,
                "where": self.where,
                "done": {k: asdict(v) for k, v in sorted(self.done.items())}}
        write_atomically(self.path, (json.dumps(data, indent=1) + "\n").encode("utf-8"))

    def labels_path(self, key: str) -> Path | None:
        """The recorded labels file of item ``key`` (None: not recorded)."""
        entry = self.done.get(key)
        if entry is None:
            return None
        path = Path(entry.labels)
        return path if path.is_absolute() else self.path.parent / path

    def is_done(self, key: str) -> bool:
        """Whether item ``key`` is done: its labels file is there, unchanged since it was saved."""
        path = self.labels_path(key)
        if path is None or not path.exists():
            return False
        entry = self.done[key]
        try:
            if not path.is_file():  # a folder (OME-Zarr): its files may change in place
                return file_digest(path) == (entry.sha256, entry.size)
            st = path.stat()
            if st.st_size != entry.size:
                return False
            sig = (str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
                   entry.sha256)
            memo = self._checked.get(key)
            if memo is not None and memo[0] == sig:
                return memo[1]
            answer = file_digest(path) == (entry.sha256, entry.size)
            self._checked[key] = (sig, answer)
            return answer
        except OSError:
            return False

    def mark_done(self, key: str, labels: Path, save: bool = True) -> DoneEntry:
        """Record ``labels`` (just written) as item ``key``'s labels, then save the state."""
        labels = Path(labels)
        digest, size = file_digest(labels)
        folder = self.path.parent.resolve()
        real = labels.resolve()
        shown = (os.path.relpath(real, folder) if folder in real.parents else str(real))
        now = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        entry = DoneEntry(Path(shown).as_posix(), digest, size, format_of(labels), now)
        self.done[key] = entry
        if save:
            self.save()
        return entry

    def forget(self, key: str, save: bool = True) -> None:
        """Mark item ``key`` as not done (its file is left where it is)."""
        if self.done.pop(key, None) is not None and save:
            self.save()
