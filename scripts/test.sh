#!/usr/bin/env bash
# Install the plugin with its test extras into .venv and run every check CI runs:
# ruff, the import-layer contracts, mypy, the npe2 manifest, and the test suite (GUI tests
# under Xvfb).
# Usage: bash scripts/test.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# The export stage (scripts/test_export.sh) may install this checkout at the same time.
mkdir -p build
if command -v flock >/dev/null 2>&1; then
  flock build/.editable-install.lock .venv/bin/python -m pip install -q -e ".[testing]"
else
  .venv/bin/python -m pip install -q -e ".[testing]"
fi

# napari's canvas needs OpenGL, which Qt's offscreen platform lacks: use a virtual X server.
need_xvfb=0
if [ -z "${DISPLAY:-}" ]; then need_xvfb=1; fi
if [ "$need_xvfb" = 1 ] && ! command -v xvfb-run >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "Installing Xvfb and the X libraries Qt needs (apt-get)…"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq xvfb libxkbcommon-x11-0 \
      libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0 libxcb-render-util0 \
      libxcb-xinerama0 libxcb-xfixes0 libxcb-shape0 libxcb-cursor0 libdbus-1-3 libgl1 \
      libegl1 >/dev/null
  else
    echo "No display and no xvfb-run: install Xvfb (e.g. apt-get install xvfb) to run GUI tests." >&2
    exit 1
  fi
fi

echo "== ruff"
.venv/bin/ruff check src tests benchmarks 2>/dev/null || .venv/bin/ruff check src tests
echo "== import layers (engine/models never import napari, Qt or magicgui)"
.venv/bin/lint-imports
echo "== types (mypy, configured in pyproject.toml)"
.venv/bin/mypy
echo "== npe2 manifest"
.venv/bin/npe2 validate napari-sam3-onnx
# Two runs, every test once: the tests without a viewer spread over NSO_TEST_WORKERS processes
# (pytest-xdist, default 2; 0 runs them in this process), then the GUI tests in one process
# (NSO_GUI_WORKERS, default 0: they time real Qt events). Exit status 5 ("nothing collected",
# e.g. a test file named on the command line that holds no test of that kind) is not a failure.
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
echo "== tests without a viewer"
# shellcheck disable=SC2046
run_pytest -m "not gui" $(workers "${NSO_TEST_WORKERS:-2}") "$@" || status=$?
echo "== GUI tests"
# shellcheck disable=SC2046
run_pytest -m gui $(workers "${NSO_GUI_WORKERS:-0}") "$@" || status=$?
exit "$status"
