"""``--skip-done``: a batch command over a folder skips the images its output folder has done.

The output folder's series state file (:mod:`..api.series_state`, shared with the widget's
series mode) says which images are done, each with its labels file's digest: an image whose
saved labels were changed or removed since is done again. The command marks each image it
finishes as done, in the same file.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from ..api.io import InputError
from ..api.series_items import SeriesItem
from ..api.series_state import STATE_NAME, SeriesState


def add_skip_done(parser: argparse.ArgumentParser) -> None:
    """Register ``--skip-done`` on a command that writes one labels file per image."""
    parser.add_argument("--skip-done", action="store_true",
                        help=f"--out is a folder: skip the images its series state "
                        f"({STATE_NAME}, also written by the widget's series mode) marks done "
                        "with an unchanged labels file, and mark each image finished now")


@dataclass
class DoneMarks:
    """Marks finished images done in the state (nothing without ``--skip-done``)."""

    state: SeriesState | None = None
    keys: list[str] = field(default_factory=list)

    def mark(self, position: int, labels: Path) -> None:
        """Image ``position`` (of the images kept) has its labels in ``labels``."""
        if self.state is not None:
            self.state.mark_done(self.keys[position], labels)


def skip_done(args: argparse.Namespace, paths: list[Path],
              names: list[str]) -> tuple[list[Path], list[str], DoneMarks]:
    """The images still to do, their names, and where to mark them done.

    Raises
    ------
    InputError
        ``--out`` is a file, or its state file is not a series state.
    """
    if not getattr(args, "skip_done", False):
        return paths, names, DoneMarks()
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--skip-done: --out {out} is a file; give the output folder that "
                         f"holds (or will hold) the labels and {STATE_NAME}.")
    state = SeriesState.load(out / STATE_NAME, where="folder")
    keys = [SeriesItem(p, None, n).key for p, n in zip(paths, names, strict=True)]
    keep = [i for i, key in enumerate(keys) if not state.is_done(key)]
    skipped = len(paths) - len(keep)
    if skipped:
        print(f"--skip-done: {skipped} of {len(paths)} image(s) already done ({state.path}); "
              "skipped")
    return ([paths[i] for i in keep], [names[i] for i in keep],
            DoneMarks(state, [keys[i] for i in keep]))
