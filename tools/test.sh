#!/usr/bin/env bash
# What CI runs: build, the CPU test suite, then a short fuzzing pass when tools/fuzz.sh exists
# (15 s for each libFuzzer target, 30 s for the ONNX-importer target).
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/build.sh
jobs=$(nproc 2>/dev/null || echo 2)
ctest --test-dir build -L cpu --output-on-failure --no-tests=error -j "$jobs"

if [[ -f tools/fuzz.sh ]]; then
  bash tools/fuzz.sh 30 fuzz_graph_loader fuzz_safetensors
  bash tools/fuzz.sh 30 fuzz_onnx_importer
fi
