# Makes tools/onnx2kiln.py importable and finds the kiln CLI (env KILN_CLI, else build/kiln).
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))

sys.dont_write_bytecode = True  # keep the source tree clean
