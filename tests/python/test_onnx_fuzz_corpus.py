"""The ONNX-importer regression corpus (tests/fuzz/corpus/onnx, written by
tests/fuzz/make_onnx_corpus.py) replayed through the fuzz target's oracle: every case is refused
with one `onnx2kiln: error:` line holding the strings EXPECTED.json lists, or converts into a graph
kiln accepts; no traceback, no numpy warning, no file read outside the model's directory. Then a
short, derandomized run of the fuzz target itself (the 10-minute runs are tools/fuzz.sh's).

In-process (the importer's main(), no subprocess per case); kiln checks the converted graphs when
the build has a kiln CLI.
"""
import json
import os
import shutil
import sys

import pytest

from conftest import KILN, ROOT

FUZZ = os.path.join(ROOT, "tests", "fuzz")
CORPUS = os.path.join(FUZZ, "corpus", "onnx")
sys.path.insert(0, FUZZ)

import onnx_oracle  # noqa: E402

with open(os.path.join(CORPUS, "EXPECTED.json")) as f:
    EXPECTED = json.load(f)

KILN_OR_NONE = KILN if os.path.isfile(KILN) and os.access(KILN, os.X_OK) else None


@pytest.fixture(autouse=True)
def no_kiln_cli_variable(monkeypatch):
    """kiln warns about KILN_* variables it does not know: its checks run without KILN_CLI."""
    monkeypatch.delenv("KILN_CLI", raising=False)


def lay_out(tmp_path):
    """The corpus as a model directory, with a file beside it that no case may read."""
    work = str(tmp_path)
    model_dir, _, outside = onnx_oracle.case_dirs(work)
    shutil.copytree(CORPUS, model_dir, symlinks=True)
    os.makedirs(outside)
    with open(os.path.join(outside, "weights.bin"), "wb") as f:
        f.write(b"\x01" * 4096)
    return work, model_dir


def test_every_case_is_listed():
    files = sorted(f for f in os.listdir(CORPUS) if f.endswith(".onnx"))
    assert files == sorted(EXPECTED), "run tests/fuzz/make_onnx_corpus.py"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_case(tmp_path, name):
    work, model_dir = lay_out(tmp_path)
    path = os.path.join(model_dir, name)
    o = onnx_oracle.check_file(path, work, KILN_OR_NONE)
    want = EXPECTED[name]
    if want == "converts":
        assert o.rc == 0, o.stderr
        return
    assert o.rc == 2, f"{name} converted, expected a refusal with {want}:\n{o.stdout}"
    for needle in want:
        assert needle in o.error_line, f"{needle!r} not in {o.error_line!r}"


def test_outside_file_is_never_opened(tmp_path):
    """The oracle itself: a read of ../outside is caught (so that the external-data cases above
    can fail)."""
    work, model_dir = lay_out(tmp_path)
    _, _, outside = onnx_oracle.case_dirs(work)
    with onnx_oracle._watch().watching([outside]) as opened:
        open(os.path.join(model_dir, "external_link.bin"), "rb").close()
    assert opened and opened[0].endswith("external_link.bin")


def test_short_fuzz_run():
    """150 generated cases (the same ones every run) through the oracle."""
    pytest.importorskip("hypothesis", reason="pip install -r tools/requirements.txt")
    import fuzz_onnx_importer as fuzz
    r = fuzz.Runner(KILN_OR_NONE, None, deadline=float("inf"))
    try:
        r.batch(seed=0, examples=150, derandomize=True)
    finally:
        shutil.rmtree(r.base, ignore_errors=True)
    assert r.executions >= 150
    assert r.outcomes["ok"] > 10 and r.outcomes["refused"] > 10, r.outcomes


def test_clip_min_above_max_matches_onnxruntime(tmp_path):
    """The fix of clip_min_above_max is max everywhere, as onnxruntime computes (kiln run)."""
    import numpy as np
    import onnx
    from test_onnx_import import check
    if KILN_OR_NONE is None:
        pytest.skip(f"needs the kiln CLI ({KILN})")
    m = onnx.load(os.path.join(CORPUS, "clip_min_above_max.onnx"))
    x = np.random.default_rng(7).uniform(-3, 3, size=(2, 3, 4, 5)).astype(np.float32)
    check(tmp_path, m, {"x": x}, name="clip_min_above_max")


def test_layernorm_scale_with_leading_ones_matches_onnxruntime(tmp_path):
    """A scale [1, C] of a layernorm over the last dim is reshaped to [C] (kiln's form)."""
    import numpy as np
    from onnx import helper, numpy_helper
    from test_onnx_import import check, model, vi
    if KILN_OR_NONE is None:
        pytest.skip(f"needs the kiln CLI ({KILN})")
    rng = np.random.default_rng(11)
    s = numpy_helper.from_array(rng.uniform(0.5, 1.5, (1, 5)).astype(np.float32), "s")
    b = numpy_helper.from_array(rng.uniform(-1, 1, (1, 1, 5)).astype(np.float32), "b")
    m = model([helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], name="ln")],
              [vi("x", [2, 3, 5])], [vi("y", None)], [s, b])
    check(tmp_path, m, {"x": rng.uniform(-2, 2, (2, 3, 5)).astype(np.float32)}, name="ln1")
