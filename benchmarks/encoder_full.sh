#!/usr/bin/env bash
# Full-depth encoder comparison in one command: export SAM 3 at FULL depth with seeded random
# weights (real sizes and cost), make its variants, time their raw image encoders interleaved.
#
#   OUT/fullbundle-plain  image encoder only, attention op by op (the old export), baseline
#   OUT/fullbundle        fp32, fused attention (the exporter's default)
#   OUT/fullbundle-int8   int8 (dynamic, per channel) encoders, gated against fullbundle
#   OUT/fullbundle-fp16   fp16-storage encoders, gated against fullbundle
#
# Needs the export environment (docs/export.md). Peak ~11.6 GB while exporting; run nothing
# else heavy meanwhile. The gate runs the engine on both bundles (~20 full encodes).
# Usage: bash benchmarks/encoder_full.sh OUT BPE [encoder.py options, e.g. --reps 5]
# Env:   PY (the export venv's python), SKIP_GATE=1 (write the variants ungated; gate later with export.gate)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?output folder}; BPE=${2:?bpe_simple_vocab_16e6.txt.gz}; shift 2
PY=${PY:-python}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
T=(/usr/bin/time -f "   [%e s wall, %M KB peak RSS]")
mkdir -p "$OUT"
if [ ! -f "$OUT/fullbundle-plain/manifest.json" ]; then
  "${T[@]}" "$PY" -W ignore -m napari_sam3_onnx.export --out "$OUT/fullbundle-plain" \
    --bpe "$BPE" --random-full --attention plain --roles image_encoder
fi
if [ ! -f "$OUT/fullbundle/manifest.json" ]; then
  "${T[@]}" "$PY" -W ignore -m napari_sam3_onnx.export --out "$OUT/fullbundle" --bpe "$BPE" \
    --random-full
fi
KEEP=(); [ "${SKIP_GATE:-0}" = 1 ] && KEEP=(--skip-gate)
for v in int8 fp16; do
  if [ ! -f "$OUT/fullbundle-$v/manifest.json" ]; then
    "${T[@]}" "$PY" -m napari_sam3_onnx.export.precision "$OUT/fullbundle" \
      "$OUT/fullbundle-$v" --precision "$v" "${KEEP[@]}" > "$OUT/gate-$v.json" || true
  fi
done
B=()
for b in fullbundle-plain fullbundle fullbundle-int8 fullbundle-fp16; do
  [ -f "$OUT/$b/manifest.json" ] && B+=("$OUT/$b")
done
"$PY" benchmarks/encoder.py "${B[@]}" --threads 2 --json "$OUT/encoder.json" "$@"
