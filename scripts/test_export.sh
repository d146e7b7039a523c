#!/usr/bin/env bash
# Export check: build Meta's SAM 3 (PyPI sam3==0.1.4) at reduced depth with seeded random weights,
# export it to the nso-sam3 bundle and run the parity tests (tests/export) against PyTorch;
# tests/export also exports small random-weight transformers SAM 3 models under the published
# Hugging Face names and Meta's tracker heads in the jax-video layout (docs/export.md).
#
# It needs its own environment (PyTorch + sam3; the plugin's environment must stay torch-free):
#   NSO_EXPORT_VENV  the export venv (created if missing;
#                    default ${XDG_CACHE_HOME:-~/.cache}/napari-sam3-onnx/venv-export)
#   NSO_EXPORT_WORK  where the vocabulary and the bundle go (default: a fresh temp folder)
#   NSO_EXPORT_STEPS "env" (the environment and the vocabulary), "run" (the reduced export and
#                    the parity tests; needs NSO_EXPORT_WORK from the "env" step) or both (default)
#   UV               a uv executable: installs through `uv pip` (.ci/run provides one); unset, pip
# Usage: bash scripts/test_export.sh [extra pytest args]
# .ci/run builds this environment while the plugin's stage installs and checks, and runs the
# export and parity tests beside the plugin's GUI tests (docs/contributing.md: what each costs).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
PY=${PYTHON:-python3}
VENV=${NSO_EXPORT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/napari-sam3-onnx/venv-export}
WORK=${NSO_EXPORT_WORK:-$(mktemp -d)}
mkdir -p "$WORK"
TIME=()
if [ -x /usr/bin/time ]; then TIME=(/usr/bin/time -f "   [%e s wall, %M KB peak RSS]"); fi
t_start=$(date +%s)

STEPS=" ${NSO_EXPORT_STEPS:-env run} "
if [[ "$STEPS" == *" env "* ]]; then
echo "== export environment: $VENV"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
if [ -n "${UV:-}" ]; then
  INSTALL=("$UV" pip install -q --python "$VENV/bin/python")
else
  "$VENV/bin/python" -m pip install -q --upgrade pip
  INSTALL=("$VENV/bin/python" -m pip install -q)
fi
# torch first (its pinned wheel), then the export extra and what the plugin's engine imports
# (no napari/Qt: the parity tests use the headless engine only).
"${INSTALL[@]}" "torch==2.14.1" "torchvision==0.29.1"
mkdir -p "$REPO/build"  # .ci/run installs the plugin's own environment at the same time
LOCK=()
if command -v flock >/dev/null 2>&1; then LOCK=(flock "$REPO/build/.editable-install.lock"); fi
"${LOCK[@]}" "${INSTALL[@]}" -e "$REPO[export]" --no-deps
"${INSTALL[@]}" "sam3==0.1.4" timm "numpy<2.4" onnx "onnxruntime>=1.17" "onnx_ir>=0.1" \
  psutil "tokenizers>=0.15" "scikit-image>=0.21" "scipy>=1.10" "platformdirs>=3" "zarr>=3.1" \
  "tifffile>=2025.5.21" "pytest>=8" "pytest-timeout>=2" "transformers==5.24.0"

echo "== CLIP BPE vocabulary (the sam3 wheel lacks it; the osam wheel ships the same file)"
BPE="$WORK/bpe_simple_vocab_16e6.txt.gz"
if [ ! -f "$BPE" ]; then
  # the wheel's files, unpacked into a scratch folder (not into the venv: osam is not needed)
  "${INSTALL[@]}" --no-deps --target "$WORK/osam-files" "osam==0.8.1"
  "$VENV/bin/python" - "$WORK/osam-files" "$BPE" <<'EOF'
import shutil, sys
from pathlib import Path
found = sorted(Path(sys.argv[1]).rglob("bpe_simple_vocab_16e6.txt.gz"))
shutil.copyfile(found[0], sys.argv[2])
EOF
fi
# The same bytes as the registry's pinned copy of CLIP's vocabulary (models/known_bundles.py).
"$VENV/bin/python" - "$BPE" <<'EOF'
import hashlib, sys
from napari_sam3_onnx.models.known_bundles import CLIP_BPE
digest = hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest()
sys.exit(0 if digest == CLIP_BPE.sha256 else f"unexpected vocabulary SHA-256 {digest}")
EOF
# Fail here, not with silently skipped parity tests, if the export environment is broken.
"$VENV/bin/python" -c "import torch, sam3, onnxruntime, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"

fi
BPE="$WORK/bpe_simple_vocab_16e6.txt.gz"
if [[ "$STEPS" != *" run "* ]]; then
  echo "== environment ready in $(( $(date +%s) - t_start )) s"
  exit 0
fi
echo "== export (reduced depth, random weights, seed 0)"
BUNDLE="$WORK/bundle"
rm -rf "$BUNDLE"
"${TIME[@]}" "$VENV/bin/python" -W ignore -m napari_sam3_onnx.export --out "$BUNDLE" \
  --bpe "$BPE" --reduced

echo "== parity tests (tests/export)"
NSO_BPE="$BPE" NSO_BUNDLE="$BUNDLE" "${TIME[@]}" "$VENV/bin/python" -m pytest \
  -p no:cacheprovider -m export tests/export -q "$@"
echo "== total $(( $(date +%s) - t_start )) s"
