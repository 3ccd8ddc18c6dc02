"""The Python package kiln (pip install .): import without a GPU, the builder and graph files,
the CPU reference through numpy, errors as Python exceptions with kiln's located messages, the
engine's counters and explain(). tools/test.sh installs the package and runs these."""
import os
import subprocess
import sys

import numpy as np
import pytest

import kiln

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


WEIGHTS = {}


def mlp(n="N"):
    rng = np.random.default_rng(0)
    g = kiln.Graph("mlp")
    x = g.input("x", "f32", [n, 16])
    WEIGHTS["w"] = rng.standard_normal((16, 8)).astype(np.float32)
    WEIGHTS["b"] = rng.standard_normal(8).astype(np.float32)
    w = g.constant("w", WEIGHTS["w"])
    b = g.constant("b", WEIGHTS["b"])
    y = g.gelu(g.matmul(x, w, b))
    g.output(g.softmax(y))
    return g, rng


def test_import_without_gpu_and_without_torch():
    code = "import sys, kiln; assert 'torch' not in sys.modules; print(kiln.__version__)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == kiln.__version__


def test_extension_does_not_link_the_driver():
    so = kiln._kiln.__file__
    r = subprocess.run(["readelf", "-d", so], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("readelf not available")
    assert "libcuda.so" not in r.stdout, r.stdout


def test_builder_shapes_and_reference_against_numpy():
    g, rng = mlp()
    out = g.outputs[0]
    assert out.shape == ["N", 8] and out.dtype == "f32"
    x = rng.standard_normal((5, 16)).astype(np.float32)
    y = g.run_reference(x=x)[out.name]
    from math import erf
    ref = x.astype(np.float64) @ WEIGHTS["w"] + WEIGHTS["b"]
    ref = ref * 0.5 * (1 + np.vectorize(erf)(ref / np.sqrt(2)))
    ref = np.exp(ref - ref.max(-1, keepdims=True))
    ref /= ref.sum(-1, keepdims=True)
    assert y.shape == (5, 8) and not np.isnan(y).any()
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_every_op_of_the_table_is_listed_and_add_op_takes_it():
    names = kiln.op_names()
    assert {"conv2d", "matmul", "layernorm", "gather", "where", "softmax"} <= set(names)
    g = kiln.Graph("t")
    a = g.input("a", "f32", [2, 3])
    b = g.input("b", "f32", [2, 3])
    lt = g.add_op("lt", [a, b])
    assert lt.dtype == "bool"
    parts = g.add_op("split", [a], {"axis": 1, "split": [1, 2]})
    assert [p.shape for p in parts] == [[2, 1], [2, 2]]


def test_graph_file_round_trip_and_load(tmp_path):
    g, rng = mlp()
    p = tmp_path / "mlp.json"
    g.save(p)
    h = kiln.load_graph(p)
    assert [t.name for t in h.inputs] == ["x"] and h.outputs[0].shape == ["N", 8]
    x = rng.standard_normal((3, 16)).astype(np.float32)
    np.testing.assert_array_equal(g.run_reference(x=x)[g.outputs[0].name],
                                  h.run_reference(x=x)[h.outputs[0].name])
    ex = kiln.load_graph(os.path.join(ROOT, "examples", "graphs", "transformer_mlp.json"))
    assert ex.inputs[0].shape == ["seq", 768]


def test_user_errors_carry_kilns_located_message():
    g = kiln.Graph("bad")
    x = g.input("x", "f32", ["N", 16])
    w = g.input("w", "f32", [8, 4])
    with pytest.raises(kiln.UserError) as e:
        g.add_op("matmul", [x, w], name="mm")
    assert "graph 'bad'" in str(e.value) and "mm" in str(e.value)
    assert isinstance(e.value, kiln.Error) and isinstance(e.value, ValueError)
    with pytest.raises(kiln.UserError, match="unknown attribute 'nope'"):
        g.add_op("relu", [x], {"nope": 1})
    with pytest.raises(kiln.UserError, match="unknown dtype 'f64'"):
        g.input("y", "f64", [1])
    with pytest.raises(kiln.UserError, match="nodes"):
        kiln.load_graph_string('{"kiln": 1, "outputs": ["q"], "nodes": [{"op": "relu"}]}',
                               "bad.json")


def test_reference_refuses_wrong_dtype_shape_and_names():
    g, rng = mlp(n=4)
    with pytest.raises(kiln.UserError, match=r"input 'x': expected f32 \(float32\), found numpy "
                                             r"float64"):
        g.run_reference(x=np.zeros((4, 16)))
    with pytest.raises(kiln.UserError, match=r"input 'x': dim 0: expected 4"):
        g.run_reference(x=np.zeros((3, 16), np.float32))
    with pytest.raises(kiln.UserError, match="missing input"):
        g.run_reference()
    with pytest.raises(kiln.UserError, match="no input named 'y'"):
        g.run_reference(x=np.zeros((4, 16), np.float32), y=1)


def test_engine_compiles_without_a_gpu_and_calls_on_the_reference(tmp_path):
    g, rng = mlp()
    e = kiln.Engine(arch="sm_80", cache_dir=str(tmp_path), load_kernels=False)
    cg = e.compile(g)
    s = e.stats()
    assert s["plans"] == 1 and s["nvrtc_compiles"] >= 1
    assert [k["name"] for k in cg.kernels()]
    e.compile(g)
    assert e.stats()["graph_cache_hits"] == 1
    x = rng.standard_normal((6, 16)).astype(np.float32)
    np.testing.assert_array_equal(cg(x), g.run_reference(x=x)[g.outputs[0].name])
    with pytest.raises(kiln.UserError, match="unknown option 'speed'"):
        kiln.Engine(speed=1)


def test_per_call_plans_bind_each_shape_once(tmp_path):
    """The GPU call path's plans (kiln/engine.py _Plan): one per distinct input shape, with the
    bound output shapes and a prepared native run that checks how many addresses it gets."""
    import torch
    g, _ = mlp()
    cg = kiln.Engine(arch="sm_80", cache_dir=str(tmp_path), load_kernels=False).compile(g)
    p6 = cg._plan((torch.Size([6, 16]),), ())
    assert p6.outs[0][0] == [6, 8] and p6.outs[0][1] == torch.float32
    assert p6.in_shapes == [[6, 16]] and p6.workspace_bytes >= 0
    assert cg._plan((torch.Size([6, 16]),), ()) is p6
    assert cg._plan((torch.Size([9, 16]),), ()).outs[0][0] == [9, 8]
    with pytest.raises(kiln.UserError, match="takes 1 input and 1 output addresses, found 2 and 1"):
        p6.run.run([1, 2], [3])
    with pytest.raises(kiln.UserError, match=r"input 'x'.*dim 1"):
        cg._plan((torch.Size([6, 15]),), ())


class RecordedRun:
    """Stands in for a plan's prepared native run: records the addresses each call passes."""

    def __init__(self):
        self.calls = []

    def run(self, inputs, outputs, stream, workspace):
        self.calls.append((inputs, outputs, stream, workspace))


def test_launch_allocates_outputs_from_templates(tmp_path, monkeypatch):
    """The per-call path (CompiledGraph._launch) on host tensors: each output comes from its
    plan's template with the graph's shape, dtype and memory format (an NHWC output
    channels-last), and the prepared run gets the inputs'
    and outputs' addresses on torch's current stream."""
    import torch
    monkeypatch.setattr(kiln.engine, "_current_stream_fn", lambda: (lambda index: 7000 + index))
    g = kiln.Graph("layouts")
    x = g.input("x", "f16", ["N", 4, 3, 5], layout="NHWC")
    g.output(g.relu(x), g.cast(g.sigmoid(x), dtype="f32"))
    cg = kiln.Engine(arch="sm_80", cache_dir=str(tmp_path), load_kernels=False).compile(g)
    dev = torch.device("cpu", 0)
    for n in (2, 3, 2):
        xs = [torch.randn(n, 4, 3, 5).half().contiguous(memory_format=torch.channels_last)]
        plan = cg._plan((xs[0].shape,), (), dev)
        if not isinstance(plan.run, RecordedRun):
            plan.run = RecordedRun()
        a, b = cg._launch(xs, dev)
        for o, dt in ((a, torch.float16), (b, torch.float32)):
            want = torch.empty(n, 4, 3, 5, dtype=dt, memory_format=torch.channels_last)
            assert (o.shape, o.dtype, o.stride()) == (want.shape, dt, want.stride())
        ins, outs, stream, _ = plan.run.calls[-1]
        assert ins == [xs[0].data_ptr()] and outs == [a.data_ptr(), b.data_ptr()]
        assert stream == 7000
    assert len(cg._plans) == 2 and len(cg._plan((torch.Size([2, 4, 3, 5]),), ()).run.calls) == 2


def test_fixed_shape_launch_binds_once(tmp_path, monkeypatch):
    """The backend's per-call path for a part whose kiln inputs have no symbol
    (kiln/dynamo/part.py fixed_shape_launch): the plan is bound once, each call allocates fresh
    outputs and hands the addresses of the arguments at the kiln inputs' positions to the
    prepared run. A symbolic graph, a dynamic dim or an input in another layout keeps the
    checked path."""
    import types
    import torch
    from kiln.dynamo.part import fixed_shape_launch
    monkeypatch.setattr(kiln.engine, "_current_stream_fn", lambda: (lambda index: 9000 + index))
    g = kiln.Graph("fixed")
    x = g.input("x", "f32", [6, 16])
    g.output(g.relu(x))
    cg = kiln.Engine(arch="sm_80", cache_dir=str(tmp_path), load_kernels=False).compile(g)
    dev = torch.device("cpu", 0)
    part = types.SimpleNamespace(sym_pos=[], host_in=[], plain=True, compiled=cg, graph=g,
                                 in_formats=[torch.contiguous_format], device=dev)
    w, a = torch.randn(3, 3), torch.randn(6, 16)
    plan = cg._plan((a.shape,), ())
    plan.run = RecordedRun()
    launch = fixed_shape_launch(part, [1], (w, a))
    o1, o2 = launch((w, a))[0], launch((w, a.clone()))[0]
    assert o1.shape == (6, 16) and o1.dtype == torch.float32 and o1.is_contiguous()
    assert o1.data_ptr() != o2.data_ptr() and len(cg._plans) == 1
    assert plan.run.calls[0][:3] == ([a.data_ptr()], [o1.data_ptr()], 9000)
    assert fixed_shape_launch(part, [1], (w, a.t().contiguous().t())) is None
    assert fixed_shape_launch(types.SimpleNamespace(**dict(vars(part), sym_pos=[("N", 0)])),
                              [1], (w, a)) is None
    gs = kiln.Graph("sym")
    gs.output(gs.relu(gs.input("x", "f32", ["N", 16])))
    cs = kiln.Engine(arch="sm_80", cache_dir=str(tmp_path), load_kernels=False).compile(gs)
    sym = types.SimpleNamespace(**dict(vars(part), graph=gs, compiled=cs))
    assert fixed_shape_launch(sym, [1], (w, a)) is None


def test_fixed_shape_launch_replays_on_kiln_owned_buffers(tmp_path, monkeypatch):
    """With EngineOptions.cuda_graphs the fixed-shape launch runs kiln on buffers of its own at
    fixed addresses (one set per stream), so that the captured graph replays: each call copies
    its inputs in and hands back copies of the outputs."""
    import types
    import torch
    from kiln.dynamo.part import fixed_shape_launch
    streams = [9001]
    monkeypatch.setattr(kiln.engine, "_current_stream_fn", lambda: (lambda index: streams[0]))
    g = kiln.Graph("replay")
    x = g.input("x", "f32", [2, 4, 3, 3], layout="NHWC")
    g.output(g.relu(x))
    cg = kiln.Engine(arch="sm_80", cache_dir=str(tmp_path), load_kernels=False,
                     cuda_graphs=True).compile(g)
    assert cg._own_workspace
    dev = torch.device("cpu", 0)
    cl = torch.channels_last
    part = types.SimpleNamespace(sym_pos=[], host_in=[], plain=True, compiled=cg, graph=g,
                                 in_formats=[cl], device=dev)
    a = torch.randn(2, 4, 3, 3).contiguous(memory_format=cl)
    plan = cg._plan((a.shape,), ())
    plan.run = RecordedRun()
    launch = fixed_shape_launch(part, [0], (a,))
    b = torch.randn(2, 4, 3, 3).contiguous(memory_format=cl)
    o1, o2 = launch((a,))[0], launch((b,))[0]
    (i1, u1, s1, w1), (i2, u2, s2, _) = plan.run.calls
    assert (i1, u1, s1, w1) == (i2, u2, 9001, 0)  # the same addresses: the capture replays
    assert i1[0] not in (a.data_ptr(), b.data_ptr())
    assert len({o1.data_ptr(), o2.data_ptr(), u1[0]}) == 3
    assert o1.is_contiguous(memory_format=cl) and o1.shape == (2, 4, 3, 3)
    streams[0] = 9002
    launch((a,))
    assert plan.run.calls[-1][2] == 9002 and plan.run.calls[-1][0] != i1  # its own buffers


def test_explain_returns_the_plan():
    g, _ = mlp()
    plan = g.explain(arch="sm_90")
    assert "contraction" in [gr["kind"] for gr in plan["groups"]]
    assert plan["text"] and plan["kernels"]
    mm = [gr for gr in plan["groups"] if gr["kind"] == "contraction"][0]
    assert any("matmul" in n for n in mm["nodes"])


def test_bf16_and_f16_through_numpy():
    g = kiln.Graph("h")
    x = g.input("x", "bf16", [4])
    y = g.input("y", "f16", [4])
    g.output(g.cast(x, dtype="f32"), g.cast(y, dtype="f32"))
    v = np.array([1.0, 2.5, -3.0, 0.1], np.float32)
    out = g.run_reference(x=v, y=v.astype(np.float16))
    a, b = (out[t.name] for t in g.outputs)
    np.testing.assert_allclose(a, v, rtol=1e-2)
    np.testing.assert_allclose(b, v, rtol=1e-3)


def test_environment_registry_has_partition():
    env = kiln.check_environment()
    assert "dump_partition" in env
    r = subprocess.run([sys.executable, "-c", "import kiln; print(kiln.check_environment()"
                        "['dump_partition'])"], capture_output=True, text=True,
                       env=dict(os.environ, KILN_DUMP="partition"))
    assert r.stdout.strip() == "True", r.stderr
    r = subprocess.run([sys.executable, "-c", "import kiln; kiln.check_environment()"],
                       capture_output=True, text=True, env=dict(os.environ, KILN_DUMP="parts"))
    assert r.returncode != 0 and "kiln.UserError" in r.stderr and "partition" in r.stderr


def test_import_onnx_through_the_shipped_importer(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    w = rng.standard_normal((6, 4)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [numpy_helper.from_array(w, "w")])
    path = tmp_path / "tiny.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    g = kiln.import_onnx(path)
    assert g.inputs[0].shape == ["N", 6]
    x = rng.standard_normal((3, 6)).astype(np.float32)
    y = g.run_reference(x=x)[g.outputs[0].name]
    np.testing.assert_allclose(y, np.maximum(x.astype(np.float64) @ w, 0), rtol=1e-5, atol=1e-6)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(kiln.UserError, match="bad.onnx"):
        kiln.import_onnx(bad)


def test_deferred_errors_is_an_engine_option_the_backend_turns_on():
    assert kiln.Engine().options.deferred_errors is False
    assert kiln.Engine(deferred_errors=True).options.deferred_errors is True
    pytest.importorskip("torch")
    from kiln.dynamo import state
    state.reset()
    try:
        assert state.engine({}).options.deferred_errors is True
        state.reset()
        assert state.engine({"deferred_errors": False}).options.deferred_errors is False
        state.check_errors()  # no compiled graph alive: nothing to wait for
    finally:
        state.reset()
