# bench/bench_zoo.py without torch: the command line, --list, and the table rendered from a
# JSON-lines file (what a device run writes), including a refused import, a killed model and a
# model that timed out.
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "bench", "bench_zoo.py")
sys.path.insert(0, os.path.join(ROOT, "bench"))

import bench_zoo  # noqa: E402  (imports neither torch nor numpy at module level)

REFUSAL = ("onnx2kiln: error: hf_bert_base.onnx: graph input 'input_ids' has element type INT64; "
           "kiln graphs compute in f32, f16 or bf16 only")


def zoo(*argv):
    return subprocess.run([sys.executable, SCRIPT, *argv], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))


def sample_lines():
    ok_stage = {"ok": True, "s": 1.0}
    resnet = {"type": "result", "model": "resnet50", "family": "resnet", "classify": True,
              "stages": {"build": ok_stage, "export": dict(ok_stage, exporter="legacy"),
                         "import_f32": ok_stage, "import_f16": ok_stage,
                         "f32": {"ok": True, "max_rel_err": 3.1e-5, "top1_agree": 64, "images": 64},
                         "f16": {"ok": True, "max_rel_err": 2.5e-3, "top1_agree": 63, "images": 64,
                                 "reference": "torch f32 (TF32 off)", "torch_f16_vs_f32": 2.1e-3,
                                 "kiln_vs_torch_f16": 1.7e-3}},
              "timing": {"32": {"kiln": {"ms": 2.0}, "eager": {"ms": 4.0}, "eager_graph": {"ms": 3.5},
                                "compile": {"ms": 3.0}},
                         "1": {"kiln": {"ms": 0.5}, "eager": {"ms": 1.0}, "eager_graph": {"ms": 0.8},
                               "compile": {"skipped": "--skip-compile"}}}}
    bert = {"type": "result", "model": "hf_bert_base", "family": "hf_bert", "classify": False,
            "stages": {"build": ok_stage, "export": dict(ok_stage, exporter="legacy"),
                       "import_f32": {"ok": False, "error": REFUSAL}},
            "timing": {"32": {"kiln": {"error": "no f16 graph"}, "eager": {"ms": 1.5},
                              "eager_graph": {"ms": 1.2}, "compile": {"error": "BackendCompilerFailed: x|y"}}}}
    unet = {"type": "result", "model": "unet_small", "family": "unet", "classify": False,
            "stages": {"build": ok_stage, "export": ok_stage, "import_f32": ok_stage, "import_f16": ok_stage,
                       "f32": {"ok": False, "max_rel_err": 3e-3}},
            "timing": {}, "timed_out": "limit reached after 300 s"}
    return [
        {"type": "env", "gpu": "NVIDIA H200", "torch": "2.11.0", "git": "abc1234"},
        {"type": "begin", "model": "resnet50", "stage": "build"}, resnet,
        {"type": "begin", "model": "vgg16", "stage": "export"},
        {"type": "begin", "model": "vgg16", "stage": "f32"},  # the run ended here
        bert, unet,
    ]


@pytest.fixture
def jsonl(tmp_path):
    p = tmp_path / "zoo.jsonl"
    with open(p, "w") as f:
        for o in sample_lines():
            f.write(json.dumps(o) + "\n")
        f.write('{"type": "result", "model": "trunc')  # a line cut by a kill mid-write
    return p


def test_help_and_list_need_no_torch():
    r = zoo("--help")
    assert r.returncode == 0 and "--model-timeout" in r.stdout and "--resume" in r.stdout
    r = zoo("--list")
    assert r.returncode == 0, r.stderr
    names = [line.split()[0] for line in r.stdout.splitlines()[1:]]
    assert names == [e.name for e in bench_zoo.ZOO]
    assert "inception_v3" in r.stdout and "299,299" in r.stdout
    # every family the issue names is in the zoo
    fams = {e.family for e in bench_zoo.ZOO}
    for f in ("alexnet", "convnext", "densenet", "efficientnet", "efficientnet_v2", "googlenet", "inception_v3",
              "maxvit", "mnasnet", "mobilenet_v2", "mobilenet_v3", "regnet", "resnet", "resnext", "shufflenet_v2",
              "squeezenet", "swin", "swin_v2", "vgg", "vit", "wide_resnet", "fcn", "deeplabv3", "lraspp",
              "hf_bert", "hf_gpt2", "hf_vit", "hf_clip_vision", "hf_whisper_encoder", "unet"):
        assert f in fams, f


def test_selection_and_bad_arguments():
    r = zoo("--list", "--families", "resnet,hf_gpt2", "--seg-size", "256")
    assert r.returncode == 0
    assert [line.split()[0] for line in r.stdout.splitlines()[1:]] == ["resnet50", "hf_gpt2"]
    r = zoo("--list", "--families", "fcn", "--seg-size", "256")
    assert "256,256" in r.stdout
    for argv, msg in ((["--list", "--models", "resnet50,nope"], "unknown model nope"),
                      (["--list", "--families", "nofam"], "unknown family nofam"),
                      (["--list", "--stages", "export,bogus"], "--stages: unknown bogus"),
                      (["--list", "--batches", "32,x"], "--batches"),
                      (["--list", "--batches", "0"], "--batches")):
        r = zoo(*argv)
        assert r.returncode == 2, (argv, r.stdout, r.stderr)
        assert msg in r.stderr, (argv, r.stderr)


def test_stages_bring_what_they_need():
    assert bench_zoo.parse_args(["--stages", "f32"]).stage_list == ["export", "import", "f32"]
    assert bench_zoo.parse_args(["--stages", "time"]).stage_list == ["export", "import", "time"]
    assert bench_zoo.parse_args(["--stages", "export"]).stage_list == ["export"]
    assert bench_zoo.parse_args([]).stage_list == list(bench_zoo.STAGES)
    assert bench_zoo.parse_args(["--batches", "1,32,128"]).batch_list == [1, 32, 128]


def test_dynamic_axes_and_shapes():
    args = bench_zoo.parse_args(["--seq", "64"])
    bert = bench_zoo.BY_NAME["hf_bert_base"]
    assert bench_zoo.dynamic_axes(bert) == {"input_ids": {0: "N", 1: "S"}, "attention_mask": {0: "N", 1: "S"},
                                            "y": {0: "N"}}
    assert bert.shapes(args, 8) == {"input_ids": (8, 64), "attention_mask": (8, 64)}
    assert bench_zoo.BY_NAME["resnet50"].shapes(args, 2) == {"x": (2, 3, 224, 224)}
    assert bench_zoo.BY_NAME["deeplabv3_resnet50"].shapes(args, 2) == {"x": (2, 3, 384, 384)}


def test_table_from_jsonl(jsonl, tmp_path):
    md = tmp_path / "zoo.md"
    r = zoo("--table", str(jsonl), "--markdown-out", str(md))
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert md.read_text().strip() == text.strip()
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith(("| model", "| ---"))]
    by_model = {}
    for line in rows:
        by_model.setdefault(line.split("|")[1].strip(), []).append(line)
    # zoo order: resnet50 before vgg16 before the HF models
    assert list(by_model) == ["resnet50", "vgg16", "hf_bert_base", "unet_small"]
    r50 = by_model["resnet50"]
    assert len(r50) == 2 and "| 1 |" in r50[0] and "| 32 |" in r50[1]  # batches in numeric order
    assert "3.1e-05 ✓" in r50[0] and "f32 64/64, f16 63/64" in r50[0] and "0.0025 ✓" in r50[0]
    assert "(torch f16 0.0021; kiln vs torch f16 0.0017)" in r50[0]  # f16 judged against f32
    assert "**1.50×**" in r50[1] and "skipped" in r50[0]
    assert "killed during stage f32" in by_model["vgg16"][0]
    bert = by_model["hf_bert_base"][0]
    # kiln's one line, less its 'onnx2kiln: error: FILE.onnx: ' prefix, whole: the coverage list
    assert "| ✗ graph input 'input_ids' has element type INT64; kiln graphs compute in f32, f16 or bf16 only |" in bert
    assert "BackendCompilerFailed: x/y" in bert  # a pipe in an error does not break the table
    assert bert.count("|") == 13  # 12 columns
    assert "timed out" in by_model["unet_small"][0] and "0.003 ✗" in by_model["unet_small"][0]
    assert "1 of 4 models meet issue 20's acceptance" in text
    assert "NVIDIA H200" in text and "abc1234" in text


def test_model_states_resume(jsonl):
    objs = bench_zoo.read_jsonl([str(jsonl)])
    st = bench_zoo.model_states(objs)
    assert st["resnet50"][0] == "done" and st["hf_bert_base"][0] == "done"
    assert st["vgg16"] == ("killed", "f32")
    # a retried model's newer result wins over the killed attempt
    objs.append({"type": "result", "model": "vgg16", "stages": {}, "timing": {}})
    assert bench_zoo.model_states(objs)["vgg16"][0] == "done"


def test_one_line_error():
    rec = {"error": "exit status 2", "stderr_tail": "some warning\n" + REFUSAL + "\n"}
    assert bench_zoo.one_line(rec) == REFUSAL
    assert bench_zoo.one_line({"error": "timed out after 240 s"}) == "timed out after 240 s"


def test_shards_cover_the_selection_once():
    names = []
    for i in range(1, 6):
        r = zoo("--list", "--shard", f"{i}/5")
        assert r.returncode == 0, r.stderr
        part = [line.split()[0] for line in r.stdout.splitlines()[1:]]
        assert part, i
        names += part
    assert names == [e.name for e in bench_zoo.ZOO]
    r = zoo("--list", "--shard", "6/5")
    assert r.returncode == 2 and "--shard" in r.stderr


def test_short_error():
    assert bench_zoo.short_error("onnx2kiln: error: m.onnx: node 'a' (Einsum): unsupported op") == \
        "node 'a' (Einsum): unsupported op"
    assert bench_zoo.short_error("kiln: error: g.json: nodes[3] (x).axis: bad") == "g.json: nodes[3] (x).axis: bad"
    assert bench_zoo.short_error("timed out after 240 s") == "timed out after 240 s"


def test_rename_dims_of_a_dynamo_export(tmp_path):
    # the dynamo exporter's own dim names (s0, s1) become the entry's N and S everywhere
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    ids = helper.make_tensor_value_info("input_ids", TensorProto.FLOAT, ["s0", "s1"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["s0", "s1"])
    mid = helper.make_tensor_value_info("t", TensorProto.FLOAT, ["s0", "s1"])
    g = helper.make_graph([helper.make_node("Relu", ["input_ids"], ["t"]), helper.make_node("Relu", ["t"], ["y"])],
                          "g", [ids], [y], value_info=[mid])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(g), path)
    bench_zoo.rename_dims(path, bench_zoo.BY_NAME["hf_gpt2"])
    m = onnx.load(path)
    for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        assert [d.dim_param for d in vi.type.tensor_type.shape.dim] == ["N", "S"], vi.name
