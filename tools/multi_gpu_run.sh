#!/usr/bin/env bash
# The two-GPU run of issue 23, for a machine with two GPUs: ResNet-50 (torchvision's architecture,
# random weights, exported and imported as bench/bench_resnet50.py does: f16 NHWC, dynamic batch N)
# at batch 128, compiled by an engine on gpu:0 and one on gpu:1 (one disk cache), run from one
# thread per device; bench_multi_gpu prints the throughput of gpu:0 alone and of both together,
# their ratio (the target is >= 1.9) and whether both devices' outputs are byte-identical (exit 1
# when not). Plain launches, then CUDA-graph replays. JSON lands in $OUT.
#   tools/multi_gpu_run.sh [BATCH] [SECONDS]        (B: build directory, default build/)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
OUT=${OUT:-/tmp/out}
BATCH=${1:-128}
SECONDS_EACH=${2:-10}
mkdir -p "$OUT"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-/tmp/kiln-cache}
$B/kiln devices
n=$($B/kiln devices | sed -n 's/^\([0-9]*\) CUDA device.*/\1/p')
if [[ "${n:-0}" -lt 2 ]]; then
  echo "multi_gpu_run: needs two GPUs, found ${n:-0}" >&2
  exit 1
fi
WORK=${WORK:-$(mktemp -d)}
python3 tools/export_torchvision.py --out "$WORK/onnx" --models resnet50 --batch 1
$B/kiln import "$WORK/onnx/resnet50.onnx" --out "$WORK/kiln" --dtype f16 --layout NHWC \
  --name resnet50
G=$WORK/kiln/resnet50.json
# Warm the disk cache once, so that both engines load the same cubins (and compile time is apart).
$B/kiln cache warm "$G" --shape N=$BATCH
$B/bench_multi_gpu "$G" --shape N=$BATCH --devices 0,1 --seconds "$SECONDS_EACH" \
  --json "$OUT/multi_gpu_resnet50_n$BATCH.json"
$B/bench_multi_gpu "$G" --shape N=$BATCH --devices 0,1 --seconds "$SECONDS_EACH" --cuda-graph \
  --json "$OUT/multi_gpu_resnet50_n${BATCH}_cuda_graph.json"
