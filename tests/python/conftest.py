# Makes the tools/onnx2kiln package importable and says how the tests run it and the kiln CLI
# (env KILN_CLI, else build/kiln).
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOOLS = os.path.join(ROOT, "tools")
sys.path.insert(0, TOOLS)

sys.dont_write_bytecode = True  # keep the source tree clean

KILN = os.environ.get("KILN_CLI") or os.path.join(ROOT, "build", "kiln")
# kiln refuses unknown KILN_* variables: the CLI's own processes run without KILN_CLI.
KILN_ENV = {k: v for k, v in os.environ.items() if k != "KILN_CLI"}
# The importer as `kiln import` runs it, but by module name: python3 -m onnx2kiln.
IMPORTER = [sys.executable, "-m", "onnx2kiln"]
IMPORTER_ENV = dict(KILN_ENV, PYTHONDONTWRITEBYTECODE="1",
                    PYTHONPATH=os.pathsep.join([TOOLS] + [p for p in [os.environ.get("PYTHONPATH")]
                                                          if p]))
