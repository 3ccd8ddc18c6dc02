"""The package on the GPU (the H200): torch CUDA tensors through CompiledGraph (zero-copy, on
torch's current stream) against the CPU reference, and bad inputs as Python exceptions; the
backend on CUDA models against eager PyTorch. Skipped visibly without a CUDA device."""
import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")
ok, why = kiln.cuda_available()
pytestmark = pytest.mark.skipif(not (ok and torch.cuda.is_available()),
                                reason=f"needs a CUDA device: {why or 'torch sees none'}")


def conv_graph(layout="NHWC", dtype="f16"):
    rng = np.random.default_rng(1)
    g = kiln.Graph("conv")
    x = g.input("x", dtype, ["N", 16, 8, 8], layout)
    w = g.constant("w", rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.1, dtype)
    b = g.constant("b", rng.standard_normal(32).astype(np.float32), dtype)
    g.output(g.relu(g.conv2d(x, w, b, padding=(1, 1))))
    return g


def test_channels_last_conv_matches_the_reference_on_torchs_stream():
    g = conv_graph()
    cg = kiln.Engine().compile(g)
    x = torch.randn(4, 16, 8, 8, device="cuda", dtype=torch.float16)
    x = x.contiguous(memory_format=torch.channels_last)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = cg(x)
    s.synchronize()
    assert y.is_contiguous(memory_format=torch.channels_last) and y.dtype == torch.float16
    ref = g.run_reference(x=x.cpu().numpy())[g.outputs[0].name]
    got = y.float().cpu().numpy()
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, ref, rtol=1e-2, atol=1e-2)


def test_outputs_given_and_symbols_rebound_without_a_recompile():
    g = conv_graph()
    e = kiln.Engine()
    cg = e.compile(g)
    for n in (1, 3, 8):
        x = torch.randn(n, 16, 8, 8, device="cuda", dtype=torch.float16).contiguous(
            memory_format=torch.channels_last)
        out = torch.full((n, 32, 8, 8), float("nan"), device="cuda", dtype=torch.float16)
        out = out.contiguous(memory_format=torch.channels_last)
        (y,) = cg.run_torch({"x": x}, outputs=[out])
        torch.cuda.synchronize()
        assert y is out and not torch.isnan(out).any()
        ref = g.run_reference(x=x.cpu().numpy())[g.outputs[0].name]
        np.testing.assert_allclose(out.float().cpu().numpy(), ref, rtol=1e-2, atol=1e-2)
    assert e.stats()["plans"] == 1


def test_bad_inputs_raise_with_kilns_message():
    g = conv_graph()
    cg = kiln.Engine().compile(g)
    good = torch.randn(2, 16, 8, 8, device="cuda", dtype=torch.float16).contiguous(
        memory_format=torch.channels_last)
    with pytest.raises(kiln.UserError, match=r"input 'x': expected f16"):
        cg(good.float())
    with pytest.raises(kiln.UserError, match=r"input 'x': a cpu tensor given to a graph"):
        cg(good.cpu())
    with pytest.raises(kiln.UserError, match=r"input 'x': dim 1: expected 16"):
        cg(torch.randn(2, 8, 8, 8, device="cuda", dtype=torch.float16))
    with pytest.raises(kiln.UserError, match=r"expected NHWC strides"):
        cg(good.contiguous())


def test_backend_on_cuda_matches_eager_f32_and_f16():
    import torch.nn as nn
    m = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                      nn.Flatten(), nn.Linear(16 * 8 * 8, 10)).cuda().eval()
    x = torch.randn(8, 3, 8, 8, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    import kiln.dynamo as kd
    kd.reset()
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(m, backend="kiln")(x), m(x), rtol=1e-3,
                                   atol=1e-3)
        torch._dynamo.reset()
        mh, xh = m.half(), x.half()
        torch.testing.assert_close(torch.compile(mh, backend="kiln")(xh), mh(xh), rtol=1e-2,
                                   atol=1e-2)
    assert kd.stats()["kiln_runs"] >= 2 and kd.stats()["engine"]["plans"] >= 2


def test_backend_cuda_graphs_replay_fresh_inputs_into_distinct_outputs():
    import torch.nn as nn
    import kiln.dynamo as kd
    m = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 8, 3, padding=1)
                      ).cuda().half().eval().to(memory_format=torch.channels_last)
    kd.reset()
    torch._dynamo.reset()
    with torch.no_grad():
        f = torch.compile(m, backend="kiln", options={"cuda_graphs": True})
        xs = [torch.randn(4, 3, 8, 8, device="cuda", dtype=torch.float16).contiguous(
            memory_format=torch.channels_last) for _ in range(3)]
        ys = [f(x) for x in xs]  # a replay per call; each result outlives the next replay
        torch.cuda.synchronize()
        for x, y in zip(xs, ys):
            assert not torch.isnan(y).any()
            torch.testing.assert_close(y, m(x), rtol=1e-2, atol=1e-2)
    assert kd.stats()["kiln_runs"] >= 3
