#!/usr/bin/env bash
# Benchmarks on a GPU machine (a few minutes): a fresh venv with the plugin and onnxruntime-gpu,
# then benchmarks/run.py --providers --no-gui on SAM 3's FULL geometry (1008-px input, 288-px
# masks) test graphs: the CPU and every installed device provider (CUDA, TensorRT, ...) in turn,
# each timing a ratio to the raw ONNX calls of the same run. Prints the table, writes the JSON to
# benchmarks/results/<host>-<date>.json.
#
# Usage: bash benchmarks/gpu.sh [run.py options, e.g. --bundle /data/sam3-tracker-onnx]
#        (issue 17 item 8: --bundle FP32_BUNDLE --bundle FP16_BUNDLE --only-bundles)
# Env:   PYTHON (default python3), VENV (default .venv-gpu), ORT_GPU (pip spec of onnxruntime-gpu),
#        DRY=1: no venv, no installs - PYTHON's own onnxruntime, run.py --quick (checks the
#        script end to end on a machine without a GPU; its figures mean nothing)
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=${VENV:-.venv-gpu}
ORT_GPU=${ORT_GPU:-onnxruntime-gpu}

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
  --format=csv,noheader || echo "warning: nvidia-smi not found; the sweep may find only the CPU" >&2

if [ "${DRY:-0}" = 1 ]; then
  "$PY" -c "import onnxruntime as o; print('dry run: onnxruntime', o.__version__, o.get_available_providers())"
  exec "$PY" benchmarks/run.py --providers --no-gui --quick "$@"
fi

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
# The plugin and onnx (the test graphs are built with onnx.helper).
"$VENV/bin/python" -m pip install -q -e ".[toy]"
# onnxruntime and onnxruntime-gpu install the same module: keep only the GPU build. The
# [cuda,cudnn] extras bring CUDA 12 / cuDNN 9 as pip packages (onnxruntime.preload_dlls loads
# them); without them the system's CUDA and cuDNN are used.
"$VENV/bin/python" -m pip uninstall -q -y onnxruntime onnxruntime-gpu || true
"$VENV/bin/python" -m pip install -q "${ORT_GPU}[cuda,cudnn]" \
  || "$VENV/bin/python" -m pip install -q "${ORT_GPU}"

"$VENV/bin/python" - <<'PY'
import onnxruntime as ort
if hasattr(ort, "preload_dlls"):
    ort.preload_dlls()
print("onnxruntime", ort.__version__, "providers:", ", ".join(ort.get_available_providers()))
PY

exec "$VENV/bin/python" benchmarks/run.py --providers --no-gui --reps 10 --stack-reps 3 "$@"
