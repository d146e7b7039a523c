"""Like ``_hostile_driver.py``, but another program creates an output while the run works.

Each case may carry ``"appears": {PATH: TEXT}``: when the command starts writing PATH (its
temporary sibling is created, long after the up-front checks), PATH is created with TEXT (an
empty folder for ``"<dir>"``), as a second program would. Prints one JSON object as
``_hostile_driver`` does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from _hostile_driver import run_case, snapshot

#: ``appears`` value creating an empty folder instead of a file.
DIR = "<dir>"


def _appearing(created: dict[str, str]):
    from napari_sam3_onnx.models import atomic

    real = atomic.new_sibling

    def new_sibling(path, *args, **kwargs):
        tmp = real(path, *args, **kwargs)
        text = created.get(str(Path(path)))
        if text == DIR:
            Path(path).mkdir()
        elif text is not None:
            Path(path).write_text(text, encoding="utf-8")
        return tmp

    atomic.new_sibling = new_sibling
    return lambda: setattr(atomic, "new_sibling", real)


def main() -> None:
    spec = json.load(open(sys.argv[1], encoding="utf-8"))
    results = {}
    for case in spec["cases"]:
        undo = _appearing(case.get("appears", {}))
        try:
            before = snapshot(spec["root"])
            result = run_case(case)
            after = snapshot(spec["root"])
        finally:
            undo()
        result["changed"] = sorted(p for p, h in before.items() if after.get(p) != h)
        result["after"] = after
        results[case["id"]] = result
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
