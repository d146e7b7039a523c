#!/usr/bin/env bash
# Install the plugin with its test extras into .venv and run every check CI runs:
# ruff, the import-layer contracts, mypy, the npe2 manifest, and the test suite (GUI tests
# under Xvfb).
# Usage: bash scripts/test.sh [extra pytest args]
#   NSO_STEPS         the steps to run, in this order (default: all of them):
#                     install  the venv, the plugin with its test extras, Xvfb where needed
#                     checks   ruff, import contracts, mypy, npe2 manifest
#                     nogui    the tests without a viewer (NSO_TEST_WORKERS processes, default 2)
#                     gui      the GUI tests but the "quiet" ones (NSO_GUI_WORKERS, default 0)
#                     quiet    the GUI tests that time the viewer's reactions against the clock
#                              (marker "quiet"): .ci/run runs them with nothing else beside them
#   UV                a uv executable: installs through `uv pip` (several times faster than pip;
#                     .ci/run provides one); unset, pip installs (and `uv` on PATH is not used).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=" ${NSO_STEPS:-install checks nogui gui quiet} "
has_step() { [[ "$STEPS" == *" $1 "* ]]; }

need_xvfb=0
if [ -z "${DISPLAY:-}" ]; then need_xvfb=1; fi

if has_step install; then
  PY=${PYTHON:-python3}
  if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
  fi
  if [ -n "${UV:-}" ]; then
    INSTALL=("$UV" pip install -q --python .venv/bin/python)
  else
    .venv/bin/python -m pip install -q --upgrade pip
    INSTALL=(.venv/bin/python -m pip install -q)
  fi
  # The export stage (scripts/test_export.sh) may install this checkout at the same time.
  mkdir -p build
  LOCK=()
  if command -v flock >/dev/null 2>&1; then LOCK=(flock build/.editable-install.lock); fi
  "${LOCK[@]}" "${INSTALL[@]}" -e ".[testing]"

  # napari's canvas needs OpenGL, which Qt's offscreen platform lacks: use a virtual X server.
  if [ "$need_xvfb" = 1 ] && ! command -v xvfb-run >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "Installing Xvfb and the X libraries Qt needs (apt-get)…"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq xvfb libxkbcommon-x11-0 \
        libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0 libxcb-render-util0 \
        libxcb-xinerama0 libxcb-xfixes0 libxcb-shape0 libxcb-cursor0 libdbus-1-3 libgl1 \
        libegl1 >/dev/null
    fi
  fi
fi
if [ "$need_xvfb" = 1 ] && ! command -v xvfb-run >/dev/null 2>&1 \
    && { has_step gui || has_step quiet || has_step nogui; }; then
  echo "No display and no xvfb-run: install Xvfb (e.g. apt-get install xvfb) to run GUI tests." >&2
  exit 1
fi

if has_step checks; then
  echo "== ruff"
  .venv/bin/ruff check src tests benchmarks
  echo "== import layers (engine/models never import napari, Qt or magicgui)"
  .venv/bin/lint-imports
  echo "== types (mypy, configured in pyproject.toml)"
  .venv/bin/mypy
  echo "== npe2 manifest"
  .venv/bin/npe2 validate napari-sam3-onnx
fi
# The tests run in up to three pytest runs, every test once: the tests without a viewer spread
# over NSO_TEST_WORKERS processes (pytest-xdist, default 2; 0 runs them in this process), then
# the GUI tests in one process (NSO_GUI_WORKERS, default 0), the "quiet" ones last. Exit status
# 5 ("nothing collected", e.g. a test file named on the command line that holds no test of that
# kind) is not a failure.
run_pytest() {
  local code=0
  if [ "$need_xvfb" = 1 ]; then
    xvfb-run -a -s "-screen 0 1600x1000x24" .venv/bin/python -m pytest "$@" || code=$?
  else
    .venv/bin/python -m pytest "$@" || code=$?
  fi
  [ "$code" = 5 ] && code=0
  return "$code"
}
workers() { [ "${1:-0}" -gt 0 ] && echo "-n $1" || true; }
status=0
if has_step nogui; then
  echo "== tests without a viewer"
  # shellcheck disable=SC2046
  run_pytest -m "not gui" $(workers "${NSO_TEST_WORKERS:-2}") "$@" || status=$?
fi
if has_step gui; then
  echo "== GUI tests"
  # shellcheck disable=SC2046
  run_pytest -m "gui and not quiet" $(workers "${NSO_GUI_WORKERS:-0}") "$@" || status=$?
fi
if has_step quiet; then
  echo "== GUI tests that time the viewer's reactions (nothing CPU-heavy beside them)"
  run_pytest -m "gui and quiet" "$@" || status=$?
fi
exit "$status"
