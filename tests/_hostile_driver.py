"""Run many command lines in one child process and report what each did to the files.

Usage: ``python _hostile_driver.py CASES.json`` where the file holds ``{"root": DIR, "cases":
[{"id": ..., "argv": [...], "no_distributed": bool}]}``. Prints one JSON object: per case the
exit code, stderr, and the files under ``root`` that existed before the case and were changed
or removed by it. An exception escaping ``main`` is reported with its traceback (which the
tests then find), exactly what a user would have seen.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import sys
import traceback


def snapshot(root: str) -> dict[str, str]:
    """Every path under ``root``: a file's SHA-256, a link's target, ``dir`` for a folder,
    ``special`` for a FIFO or socket."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                out[path] = "link:" + os.readlink(path)
            elif os.path.isdir(path):
                out[path] = "dir"
            elif not os.path.isfile(path):  # a FIFO or socket: reading it would block
                out[path] = "special"
            else:
                with open(path, "rb") as fh:
                    out[path] = hashlib.sha256(fh.read()).hexdigest()
    return out


def run_case(case: dict) -> dict:
    from napari_sam3_onnx.cli import main

    saved = sys.modules.get("distributed", ...)
    if case.get("no_distributed"):
        sys.modules["distributed"] = None  # import fails as if not installed
    err, out = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = main(case["argv"])
    except BaseException:  # what escapes main is what a user would see as a traceback
        err.write(traceback.format_exc())
        code = -1
    finally:
        if case.get("no_distributed"):
            if saved is ...:
                sys.modules.pop("distributed", None)
            else:
                sys.modules["distributed"] = saved
    return {"code": code, "stderr": err.getvalue(), "stdout": out.getvalue()}


def main() -> None:
    spec = json.load(open(sys.argv[1], encoding="utf-8"))
    results = {}
    for case in spec["cases"]:
        before = snapshot(spec["root"])
        result = run_case(case)
        after = snapshot(spec["root"])
        result["changed"] = sorted(p for p, h in before.items() if after.get(p) != h)
        results[case["id"]] = result
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
