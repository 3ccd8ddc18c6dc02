#!/usr/bin/env bash
# Installs missing dependencies, configures (Release, Ninja) and builds kiln into build/.
# Extra arguments go to ninja (targets, -j N).
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install_deps.sh

args=(-S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release)
if ! command -v nvcc >/dev/null 2>&1 && [[ -d /usr/local/cuda ]]; then
  args+=(-DCUDAToolkit_ROOT=/usr/local/cuda)
fi
cmake "${args[@]}"
ninja -C build "$@"
