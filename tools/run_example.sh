#!/usr/bin/env bash
# Builds kiln and runs the ResNet-50 bottleneck example at batch 1 (on the GPU when there is
# one, else on the CPU reference). Extra arguments go to `kiln run` (--output y.safetensors ...).
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/build.sh kiln_cli
build/kiln run examples/graphs/resnet50_bottleneck.json --shape N=1 --device auto "$@"
