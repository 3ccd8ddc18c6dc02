"""`python3 -m onnx2kiln ...` with tools/ (or share/kiln/) on sys.path, or
`python3 .../onnx2kiln/__main__.py ...` (what `kiln import` runs)."""
import os
import sys

if not __package__:
    # Run as a script: sys.path[0] is this directory, whose module names (safetensors, ...) must
    # not shadow top-level ones; the directory above it holds the package.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from onnx2kiln.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
