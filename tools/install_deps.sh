#!/usr/bin/env bash
# Installs the Debian packages kiln needs to build and test, only those that are missing
# (apt-get update runs only when something is to be installed). The CUDA toolkit (nvcc, NVRTC,
# headers) is not installed here: kiln expects it at /usr/local/cuda or on PATH.
set -euo pipefail

packages=(cmake ninja-build g++ libfmt-dev nlohmann-json3-dev libgtest-dev clang
          libclang-rt-14-dev ccache graphviz)

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "install_deps: not a Debian/Ubuntu system; install these yourself: ${packages[*]}" >&2
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "install_deps: missing packages (${missing[*]}) and not root, no sudo" >&2
      exit 1
    fi
  fi
  echo "install_deps: installing ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
fi

if ! command -v nvcc >/dev/null 2>&1 && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "install_deps: warning: no CUDA toolkit found (nvcc not on PATH, no /usr/local/cuda);" \
    "kiln needs its NVRTC and headers to build" >&2
fi

# Python packages for the ONNX importer and its tests (tools/requirements.txt), only when missing.
if command -v python3 >/dev/null 2>&1; then
  if ! python3 -c "import onnx, onnxruntime, numpy, pytest, hypothesis" >/dev/null 2>&1; then
    echo "install_deps: installing Python packages from tools/requirements.txt"
    python3 -m pip install -q -r "$(dirname "$0")/requirements.txt" ||
      echo "install_deps: warning: pip install failed; the ONNX import tests will skip" >&2
  fi
fi

# The Python package's build and tests (pyproject.toml): scikit-build-core, nanobind, and torch's
# CPU wheel (with torchvision) from download.pytorch.org, transformers, only when missing.
if command -v python3 >/dev/null 2>&1; then
  if ! python3 -c "import scikit_build_core, nanobind" >/dev/null 2>&1; then
    echo "install_deps: installing scikit-build-core and nanobind"
    python3 -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.0" ||
      echo "install_deps: warning: scikit-build-core / nanobind did not install" >&2
  fi
  if ! python3 -c "import torch, torchvision" >/dev/null 2>&1; then
    echo "install_deps: installing torch and torchvision (CPU wheels)"
    # download.pytorch.org's CPU wheels are small; where that host is unreachable, PyPI's wheels
    # (CUDA builds, which run on the CPU too); where neither installs, the torch tests skip.
    python3 -m pip install -q torch torchvision --index-url https://download.pytorch.org/whl/cpu ||
      python3 -m pip install -q torch torchvision ||
      echo "install_deps: warning: torch did not install; the torch.compile tests will skip" >&2
  fi
  if ! python3 -c "import onnxscript" >/dev/null 2>&1; then
    echo "install_deps: installing onnxscript (torch's dynamo ONNX exporter: the zoo exports that the legacy one refuses)"
    python3 -m pip install -q onnxscript ||
      echo "install_deps: warning: onnxscript did not install; dynamo exports will fail" >&2
  fi
  if ! python3 -c "import transformers" >/dev/null 2>&1; then
    echo "install_deps: installing transformers (the zoo's Hugging Face models, built from configs)"
    python3 -m pip install -q transformers ||
      echo "install_deps: warning: transformers did not install; its zoo tests will skip" >&2
  fi
fi
