"""torch.compile(model, backend="kiln") on the CPU: kiln's part runs on its CPU reference, so the
FX conversion is checked end to end against eager PyTorch f32 (1e-4), plus the partition report
and a dynamic batch that builds its kiln graph once."""
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import kiln
import kiln.dynamo as kd


@pytest.fixture(autouse=True)
def fresh():
    torch._dynamo.reset()
    kd.reset()
    kd.clear_reports()
    torch.manual_seed(0)
    yield


def check(model, *inputs, tol=1e-4, **compile_kw):
    model = model.eval()
    with torch.no_grad():
        want = model(*inputs)
        got = torch.compile(model, backend="kiln", **compile_kw)(*inputs)
    assert kd.stats()["reference_runs"] >= 1  # kiln computed it (on its CPU reference here)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for w, g in zip(want, got):
        assert not torch.isnan(g).any()
        torch.testing.assert_close(g, w, rtol=tol, atol=tol)
    return kd.partition_report()[-1]


def in_kiln(report):
    return [n for n in report["nodes"] if n["where"] != "eager"]


def eager(report):
    return [n for n in report["nodes"] if n["where"] == "eager"]


class TinyCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        y = F.relu(self.bn(self.c1(x)))
        y = F.max_pool2d(F.silu(self.c2(y)), 2)
        return self.fc(F.adaptive_avg_pool2d(y, 1).flatten(1))


def randomize_bn(m):
    for mod in m.modules():
        if isinstance(mod, (nn.BatchNorm2d,)):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 1.5)
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.uniform_(-0.5, 0.5)
    return m


def test_package_registers_the_backend():
    assert "kiln" in torch._dynamo.list_backends()


def test_tiny_cnn_with_batchnorm_runs_all_in_kiln():
    r = check(randomize_bn(TinyCNN()), torch.randn(2, 3, 16, 16))
    assert not eager(r), kd.format_report()
    assert r["partitions"] == 1
    assert any("convolution" in n["target"] for n in in_kiln(r))


class SliceAssignedMask(nn.Module):
    """Swin's shifted-window mask: slice assignment of Python ints (lifted tensor constants)."""

    def forward(self, x):
        m = x.new_zeros(4, 4)
        m[0:2, 0:2] = 3
        return x + torch.tensor(2.0) * m


def test_lifted_tensor_constants_are_kiln_constants_not_run_time_inputs():
    r = check(SliceAssignedMask(), torch.randn(4, 4))
    assert not eager(r), kd.format_report()
    (g,) = kd.kiln_graphs()
    assert [t.name for t in g.inputs] == ["arg0_1"], [t.name for t in g.inputs]


class NearestUpsample16(nn.Module):
    def forward(self, x):
        return F.interpolate(x, scale_factor=2.0, mode="nearest") + 1


def test_nearest_upsample_of_f16_is_one_resize_in_f16():
    """core ATen writes x.to(f32)[:, :, ih[:, None], iw].clone().to(f16), its indices from
    arange: the indices fold to constants, the casts go (a gather is exact), and the index is
    kiln's nearest resize, read channels-last in place."""
    x = torch.randn(2, 4, 8, 8).half().contiguous(memory_format=torch.channels_last)
    r = check(NearestUpsample16(), x, tol=1e-3)
    assert not eager(r), kd.format_report()
    (g,) = kd.kiln_graphs()
    assert [n["op"] for n in g.nodes] == ["resize", "add"], g.nodes


class HeadsMatmul(nn.Module):
    def forward(self, q, k):
        return torch.softmax(q @ k.transpose(-1, -2), -1) @ k


def test_batched_matmul_keeps_its_batch_dims_and_transposed_operand():
    """aten.matmul over [B, H, S, D] decomposes to expand -> view [B*H, S, D] -> bmm -> view:
    rewritten back into one matmul, the transposed key is read as such (no copy kernel)."""
    q, k = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4)
    r = check(HeadsMatmul(), q, k)
    assert not eager(r), kd.format_report()
    (g,) = kd.kiln_graphs()
    ops = [n["op"] for n in g.nodes]
    assert "expand" not in ops and ops.count("matmul") == 2, ops
    kernels = [k["name"] for k in g.explain()["kernels"]]
    assert len(kernels) == 3 and not any(k.startswith("copy_") for k in kernels), kernels


def test_mlp():
    m = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.Hardswish(),
                      nn.LayerNorm(64), nn.Linear(64, 8), nn.Softmax(-1))
    r = check(m, torch.randn(4, 32))
    assert not eager(r), kd.format_report()


class Block(nn.Module):
    def __init__(self, d=32, h=4):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * d, d))

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.h, d // self.h).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


def test_transformer_block_with_sdpa():
    r = check(Block(), torch.randn(2, 8, 32))
    assert not eager(r), kd.format_report()
    assert any("attention" in n["target"] for n in in_kiln(r)), kd.format_report()


def test_resnet18_at_32x32():
    tv = pytest.importorskip("torchvision")
    m = randomize_bn(tv.models.resnet18(num_classes=10))
    r = check(m, torch.randn(2, 3, 32, 32))
    assert not eager(r), kd.format_report()


class WithUnsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        y = F.relu(self.a(x))
        y = torch.sort(y, dim=-1).values  # no sort in kiln
        return self.b(y).tanh()


def test_unsupported_op_is_partitioned_to_eager_and_reported(capfd):
    r = check(WithUnsupported(), torch.randn(4, 8))
    off = eager(r)
    assert [n["target"] for n in off if "sort" in n["target"]], kd.format_report()
    assert all("sort" in n["target"] or "getitem" in n["target"] for n in off), kd.format_report()
    assert r["partitions"] == 2
    text = kd.format_report()
    assert "eager" in text and "no kiln converter for aten.sort" in text


def test_partition_report_on_stderr_with_kiln_dump(tmp_path):
    import subprocess
    import sys
    code = ("import torch, kiln\n"
            "m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()\n"
            "with torch.no_grad(): torch.compile(m, backend='kiln')(torch.randn(2, 4))\n")
    import os
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, KILN_DUMP="partition"))
    assert r.returncode == 0, r.stderr
    assert "kiln partition report" in r.stderr and "kiln:" in r.stderr


@pytest.mark.parametrize("model,sizes,shape", [
    # torch's fake conv guards batch <= 15 on the CPU (its own heuristic): the sweep stays below
    (TinyCNN, (2, 3, 5, 8, 13), (3, 16, 16)),
    (lambda: nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)), range(2, 65, 7),
     (16,)),
])
def test_dynamic_batch_builds_the_kiln_graph_once(model, sizes, shape):
    m = model().eval()
    f = torch.compile(m, backend="kiln", dynamic=True)
    with torch.no_grad():
        for n in sizes:
            x = torch.randn(n, *shape)
            torch.testing.assert_close(f(x), m(x), rtol=1e-4, atol=1e-4)
    s = kd.stats()
    assert s["graphs"] == 1 and s["kiln_graphs_built"] == 1, s
    assert s["reference_runs"] == len(sizes)
    g = kd.partition_report()[-1]
    assert g["partitions"] == 1 and not eager(g), kd.format_report()


def test_training_graphs_stay_eager():
    m = nn.Linear(4, 4)
    out = torch.compile(m, backend="kiln")(torch.randn(2, 4))
    out.sum().backward()
    assert m.weight.grad is not None
    assert all(n["where"] == "eager" for n in kd.partition_report()[-1]["nodes"])


def test_torch_tensors_are_checked_before_any_launch(tmp_path):
    """dtype, shape, strides, then the device: each a kiln.UserError naming the input (the GPU
    launch itself is tests/python/test_package_gpu.py)."""
    g = kiln.Graph("conv")
    x = g.input("x", "f32", ["N", 4, 6, 6], "NHWC")
    w = g.constant("w", np.random.default_rng(0).standard_normal((8, 4, 3, 3)).astype(np.float32))
    g.output(g.relu(g.conv2d(x, w, padding=(1, 1))))
    cg = kiln.Engine(arch="sm_80", cache_dir=str(tmp_path), load_kernels=False).compile(g)
    cl = torch.randn(2, 4, 6, 6).contiguous(memory_format=torch.channels_last)
    with pytest.raises(kiln.UserError, match=r"graph 'conv': input 'x': expected f32 "
                                             r"\(torch.float32\), found torch.float16"):
        cg(cl.half())
    with pytest.raises(kiln.UserError, match=r"input 'x': dim 1: expected 4"):
        cg(torch.randn(2, 3, 6, 6).contiguous(memory_format=torch.channels_last))
    with pytest.raises(kiln.UserError, match=r"input 'x': expected NHWC strides .* found strides "
                                             r"\[144, 36, 6, 1\]: pass "
                                             r"x.contiguous\(memory_format=torch.channels_last\)"):
        cg(torch.randn(2, 4, 6, 6))
    with pytest.raises(kiln.UserError, match=r"input 'x': a cpu tensor given to a graph "
                                             r"compiled for the GPU"):
        cg(cl)
    # numpy arrays run on the CPU reference
    y = cg(cl.numpy())
    assert y.shape == (2, 8, 6, 6) and not np.isnan(y).any()


def test_channels_last_models_keep_their_strides():
    m = randomize_bn(TinyCNN()).eval()
    body = nn.Sequential(m.c1, m.bn, nn.ReLU(), m.c2).to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 16, 16).contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        want = body(x)
        got = torch.compile(body, backend="kiln")(x)
    assert not eager(kd.partition_report()[-1])
    assert got.stride() == want.stride() and want.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_transformer_block_f16_plans_flash_attention_and_fused_epilogues():
    """SDPA becomes kiln's one attention kernel, and linears (view -> addmm -> view after
    aot_autograd, kiln.dynamo.rewrite) take their activation and residual add as epilogues."""
    m32 = Block(d=128, h=2).eval()
    m16 = Block(d=128, h=2).eval()
    m16.load_state_dict(m32.state_dict())
    m16 = m16.half()
    x = torch.randn(2, 64, 128)
    with torch.no_grad():
        want = m32(x)
        got = torch.compile(m16, backend="kiln")(x.half())
    assert not eager(kd.partition_report()[-1]), kd.format_report()
    torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2)
    (g,) = kd.kiln_graphs()
    names = [gr["name"] for gr in g.explain(arch="sm_90")["groups"]]
    assert "attention_f16_matmul_mul_softmax_matmul" in names, names
    assert "contraction_f16_matmul_add_gelu" in names, names
    assert sum(n.startswith("contraction") for n in names) == 4, names


def test_a_graph_the_engine_cannot_build_falls_back_to_eager(monkeypatch, capfd):
    import kiln.dynamo.part as kp
    import kiln.dynamo.state as ks

    class Refusing:
        def compile(self, g):
            raise kiln.UserError(f"graph '{g.name}': refused for this test")

    monkeypatch.setattr(ks, "engine", lambda *args: Refusing())
    monkeypatch.setattr(kp, "_cuda_ordinal", lambda x: 0)  # every tensor counts as on the GPU
    m = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval()
    x = torch.randn(3, 8)
    with torch.no_grad():
        f = torch.compile(m, backend="kiln")
        for _ in range(2):
            torch.testing.assert_close(f(x), m(x))
    s = kd.stats()
    assert s["fallbacks"] == 1 and s["kiln_runs"] == 0 and s["engine_compiles"] == 0, s
    assert capfd.readouterr().err.count("refused for this test") == 1


def test_under_inference_mode():
    m = randomize_bn(TinyCNN()).eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.inference_mode():
        want = m(x)
        got = torch.compile(m, backend="kiln")(x)
    assert not eager(kd.partition_report()[-1]) and kd.stats()["reference_runs"] == 1
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_backend_graphs_compile_for_the_gpu(arch, tmp_path):
    """The kiln graphs the backend builds go through kiln's codegen and NVRTC for the GPU
    targets (no GPU needed): what the CPU reference runs here, the H200 runs as kernels."""
    cnn = randomize_bn(TinyCNN()).eval().half().to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 16, 16).half().contiguous(memory_format=torch.channels_last)
    block = Block(d=128, h=2).eval().half()
    with torch.no_grad():
        torch.compile(cnn, backend="kiln")(x)
        torch._dynamo.reset()
        torch.compile(block, backend="kiln")(torch.randn(2, 64, 128).half())
    graphs = kd.kiln_graphs()
    assert len(graphs) == 2
    e = kiln.Engine(arch=arch, cache_dir=str(tmp_path), load_kernels=False, disk_cache=False)
    for g in graphs:
        kernels = e.compile(g).kernels()
        # "memory": a kernel whose source an earlier kernel of this Engine already had
        assert kernels and all(k["cache"] in ("nvrtc", "memory") for k in kernels), kernels
    assert e.stats()["nvrtc_compiles"] >= 10


class StemUpsample(nn.Module):
    """An RGB stem conv (the channel-pad pass applies in f16 NHWC), a bilinear upsample to the
    input's size (FCN's head: the decomposition computes its indices with aten.arange, kiln range
    nodes of no inputs), an open-ended slice (torch's end 2^63 - 1) and a Linear wide enough that
    its weights leave the saved graph's text."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 7, stride=2, padding=3)
        self.fc = nn.Linear(32, 32)

    def forward(self, x):
        y = F.interpolate(self.conv(x), size=x.shape[-2:], mode="bilinear", align_corners=False)
        return self.fc(y[:, 1:])


def test_stem_upsample_graph_compiles_for_the_gpu_and_saves(tmp_path):
    """The bilinear upsample all in kiln (its index arithmetic folded, its gathers at flat
    indices), Engine passes over the graph, and the backend's graph saved as a file that
    `kiln check` loads (slice ends within the file's integers, weights beside it)."""
    import subprocess
    from conftest import KILN, KILN_ENV
    m = StemUpsample().eval().half().to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 32, 32).half().contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        torch.compile(m, backend="kiln")(x)
    graphs = kd.kiln_graphs()
    nodes = [n for r in kd.partition_report() for n in r["nodes"]]
    assert all(n["where"] != "eager" for n in nodes), kd.format_report()
    # the bilinear weights' and indices' arange arithmetic is folded into constants
    assert not any(n["target"].startswith("aten.arange") for n in nodes), kd.format_report()
    e = kiln.Engine(arch="sm_90", cache_dir=str(tmp_path / "kc"), load_kernels=False,
                    disk_cache=False)
    for i, g in enumerate(graphs):
        assert e.compile(g).kernels()
        path = tmp_path / f"g{i}.json"
        g.save(str(path))
        r = subprocess.run([KILN, "check", str(path)], capture_output=True, text=True, env=KILN_ENV)
        assert r.returncode == 0, r.stderr
    assert any((tmp_path / f"g{i}.safetensors").exists() for i in range(len(graphs)))


class Normalize(nn.Module):
    """F.normalize (Swin V2's cosine attention) and its clamped norm as a second output."""

    def forward(self, x):
        n = x.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        return F.normalize(x, dim=-1) * 2.0, n


def test_normalize_eps_survives_f16():
    """max(||x||, 1e-12) in f16: the bound is 0 in f16, so a zero row divided 0 by 0 (NaN, as
    eager f16 does); kiln clamps in f32 and rounds the quotient once. The clamped norm, an output
    itself, comes back in its FX dtype (f16)."""
    x = torch.randn(4, 16).half()
    x[1] = 0
    with torch.no_grad():
        y, n = torch.compile(Normalize(), backend="kiln")(x)
    assert y.dtype == torch.float16 and n.dtype == torch.float16
    assert not torch.isnan(y).any() and (y[1] == 0).all()
    want = F.normalize(x.float(), dim=-1) * 2.0
    torch.testing.assert_close(y.float(), want, rtol=1e-2, atol=1e-2)
    assert kd.stats()["reference_runs"] >= 1


class ReferenceLaunch:
    """Stands in for a CompiledGraph on the GPU: its per-call entry (_launch, what the backend's
    short path calls) runs kiln's CPU reference, so the short path runs here without a GPU."""

    def __init__(self, g):
        self.g, self.extras = g, []

    def _launch(self, xs, device, extra):
        self.extras.append(extra)
        res = self.g.run_reference({t.name: x.numpy() for t, x in zip(self.g.inputs, xs)},
                                   bindings=dict(extra))
        return [torch.from_numpy(res[t.name]) for t in self.g.outputs]


@pytest.fixture
def device_path(monkeypatch):
    """Every tensor counts as a GPU tensor and each kiln graph compiles to a ReferenceLaunch;
    yields the list of those, and the WholeGraph objects the backend returned."""
    import kiln.dynamo.backend as kb
    import kiln.dynamo.part as kp
    import kiln.dynamo.state as ks
    launches, wholes = [], []

    class Engine:
        def compile(self, g):
            launches.append(ReferenceLaunch(g))
            return launches[-1]

    def whole(fused):
        w = kp.whole_graph(fused)
        wholes.append(w)
        return w

    monkeypatch.setattr(ks, "engine", lambda *args: Engine())
    monkeypatch.setattr(kp, "_cuda_ordinal", lambda x: 0)
    monkeypatch.setattr(kb, "whole_graph", whole)
    yield launches, wholes


def test_short_path_whole_graph(device_path):
    """A graph that is one kiln partition: dynamo calls the WholeGraph, whose short path hands
    the kiln inputs (not the parameters) to the compiled graph on every call."""
    launches, wholes = device_path
    m = randomize_bn(TinyCNN()).eval()
    f = torch.compile(m, backend="kiln")
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(2, 3, 16, 16)
            torch.testing.assert_close(f(x), m(x), rtol=1e-4, atol=1e-4)
    assert len(wholes) == 1 and wholes[0] is not None
    assert len(launches) == 1 and len(launches[0].extras) == 3
    assert len(launches[0].g.inputs) == 1  # the weights are kiln constants
    s = kd.stats()
    assert s["kiln_runs"] == 3 and s["reference_runs"] == 0 and s["engine_compiles"] == 1, s


def test_short_path_binds_dynamic_batch(device_path):
    launches, wholes = device_path
    m = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).eval()
    f = torch.compile(m, backend="kiln", dynamic=True)
    with torch.no_grad():
        for n in (2, 5, 9, 5):
            x = torch.randn(n, 16)
            torch.testing.assert_close(f(x), m(x), rtol=1e-4, atol=1e-4)
    assert len(launches) == 1 and wholes[0] is not None
    assert kd.stats()["kiln_runs"] == 4


def test_short_path_through_partitions_with_eager_between(device_path):
    """Two kiln partitions around an op kiln lacks: the GraphModule stays, each KilnPart takes
    its short path from the second call on, and the outputs match eager PyTorch."""
    launches, wholes = device_path
    m = WithUnsupported().eval()
    f = torch.compile(m, backend="kiln")
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(4, 8)
            torch.testing.assert_close(f(x), m(x), rtol=1e-4, atol=1e-4)
    assert wholes == [None] and len(launches) == 2
    assert [len(la.extras) for la in launches] == [2, 2]


def test_short_path_keeps_multiple_outputs_and_returned_inputs(device_path):
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(8, 8)

        def forward(self, x, y):
            h = self.a(x)
            return h.relu(), y, h.sigmoid() * 2

    launches, wholes = device_path
    m = Two().eval()
    f = torch.compile(m, backend="kiln")
    with torch.no_grad():
        for _ in range(2):
            x, y = torch.randn(3, 8), torch.randn(5)
            got, want = f(x, y), m(x, y)
            assert len(got) == 3 and got[1] is y
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
    assert len(launches) == 1 and wholes[0] is not None


def test_dynamo_guards_hold_static_strides():
    """fixed_shape_launch (kiln/dynamo/part.py) reads its inputs at the strides of the call it
    was bound on: that holds because dynamo compiles again when an input of static shape comes
    with other strides (a transposed view, channels-last)."""
    graphs = []

    def count(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    f = torch.compile(lambda x: x * 2, backend=count)
    with torch.no_grad():
        f(torch.randn(4, 3, 5, 5))
        f(torch.randn(4, 3, 5, 5))
        assert len(graphs) == 1
        f(torch.randn(4, 3, 5, 5).contiguous(memory_format=torch.channels_last))
        assert len(graphs) == 2
        f(torch.randn(4, 3, 5, 5).transpose(2, 3))
        assert len(graphs) == 3


class ReturnsAConstant(nn.Module):
    def forward(self, x):
        c = torch.arange(4.0) * 2
        return x + c, c


def test_a_folded_constant_returned_is_a_fresh_tensor_each_call():
    x = torch.randn(4)
    with torch.no_grad():
        f = torch.compile(ReturnsAConstant(), backend="kiln")
        first = f(x)
        first[1].add_(100)  # the caller owns what it gets back
        again = f(x)
    torch.testing.assert_close(again[1], torch.arange(4.0) * 2)
    torch.testing.assert_close(again[0], x + torch.arange(4.0) * 2)
