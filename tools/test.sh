#!/usr/bin/env bash
# What CI runs: build, the CPU test suite, then a short fuzzing pass when tools/fuzz.sh exists
# (15 s for each libFuzzer target, 30 s for the ONNX-importer target).
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache (when installed) keys objects by paths relative to this tree, so the Python package's
# build (build-python/) reuses the objects of build/ instead of compiling libkiln twice.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1

bash tools/build.sh
jobs=$(nproc 2>/dev/null || echo 2)
ctest --test-dir build -L cpu --output-on-failure --no-tests=error -j "$jobs"

# The Python package (pyproject.toml, docs/PYTHON.md): installed into this Python from this tree,
# then its CPU tests (tests/python/test_package*.py; the GPU ones skip, saying why). The
# extension's objects are those of build/ (same compiler, so ccache hits them).
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:FILEPATH=//p' build/CMakeCache.txt)
# A package build directory configured with another compiler (a plain `pip install .`): CMake
# would drop its cache on the change and with it scikit-build's options (KILN_PYTHON), and the
# build would find no _kiln target. Configured afresh instead.
pycache=build-python/CMakeCache.txt
if [[ -f $pycache ]] &&
  [[ "$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$pycache")" != "$cxx" ]]; then
  rm -f "$pycache"
fi
CMAKE_ARGS="-DCMAKE_CXX_COMPILER=$cxx" CMAKE_BUILD_PARALLEL_LEVEL="$jobs" \
  python3 -m pip install -q --no-build-isolation --no-deps .
PYTHONDONTWRITEBYTECODE=1 python3 -m pytest -q -p no:cacheprovider -rs tests/python/test_package*.py

if [[ -f tools/fuzz.sh ]]; then
  bash tools/fuzz.sh 30 fuzz_graph_loader fuzz_safetensors
  bash tools/fuzz.sh 30 fuzz_onnx_importer
fi
