"""The FX converters op by op (kiln/dynamo/ops/): small modules through
torch.compile(backend="kiln") on the CPU, each computed wholly by kiln (its CPU reference) and
compared with eager PyTorch f32 within 1e-4."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import kiln.dynamo as kd


class Fn(nn.Module):
    def __init__(self, fn, *mods):
        super().__init__()
        self.fn, self.mods = fn, nn.ModuleList(mods)

    def forward(self, *xs):
        return self.fn(self.mods, *xs)


def x4(*s):
    return torch.randn(*s)


def _window_mask(x):
    """Swin's shifted-window mask: slice assignments into zeros (slice_scatter in core ATen)."""
    mask = x.new_zeros(6, 5)
    count = 0
    for h in ((0, 2), (2, -2), (-2, None)):
        for w in ((0, 1), (1, 3), (3, None)):
            mask[h[0]:h[1], w[0]:w[1]] = count
            count += 1
    return mask


def _assigned(x):
    y = x * 3
    y[:, 1:3] = x[:, :2] * 2
    y[4:] = x[:2] - 1
    return y


CASES = {
    "groupnorm_silu": (Fn(lambda m, x: F.silu(m[0](x)), nn.GroupNorm(4, 8)), [x4(2, 8, 5, 5)]),
    "rmsnorm": (Fn(lambda m, x: m[0](x), nn.RMSNorm(16, eps=1e-6)), [x4(3, 16)]),
    "avgpool_pad": (Fn(lambda m, x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)),
                    [x4(2, 3, 9, 9)]),
    "maxpool_ceil_mode": (Fn(lambda m, x: F.max_pool2d(x, 3, 2, ceil_mode=True) +
                          F.max_pool2d(x, 2, 2, 1, ceil_mode=True)[:, :, :4, :4]),
                          [x4(2, 3, 8, 8)]),
    "adaptive_avgpool": (Fn(lambda m, x, y: F.adaptive_avg_pool2d(x, (3, 2)).sum() +
                          F.adaptive_avg_pool2d(y, 4) + F.adaptive_avg_pool2d(x, 1).mean()),
                         [x4(2, 3, 6, 4), x4(2, 3, 1, 1)]),
    "maxpool_stride": (Fn(lambda m, x: F.max_pool2d(x, 3, 2, 1)), [x4(2, 3, 9, 9)]),
    "conv_transpose": (Fn(lambda m, x: m[0](x), nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1,
                                                                  output_padding=1)),
                       [x4(2, 4, 5, 5)]),
    "depthwise_conv_hardswish": (Fn(lambda m, x: F.hardswish(m[0](x)),
                                    nn.Conv2d(6, 6, 3, padding=1, groups=6)), [x4(2, 6, 7, 7)]),
    "activations": (Fn(lambda m, x: F.leaky_relu(x, 0.1) + F.elu(x) + F.softplus(x) +
                       F.hardsigmoid(x) + F.mish(x) + torch.tanh(x) + F.relu6(x) +
                       torch.clamp(x, -0.5, 0.7)), [x4(4, 9)]),
    "math": (Fn(lambda m, x, y: torch.exp(x) * y - x / (y.abs() + 1) + torch.sqrt(x.abs()) +
                torch.rsqrt(y.abs() + 1) + x.pow(2) + torch.maximum(x, y) + torch.erf(x)),
             [x4(3, 5), x4(3, 5)]),
    "compare_where": (Fn(lambda m, x, y: torch.where(x > y, x, y * 2) +
                         torch.where((x <= 0) & (y != 0), 1.0, 0.0)), [x4(4, 6), x4(4, 6)]),
    "cat_split_slice": (Fn(lambda m, x, y: torch.cat(torch.cat([x, y], 1).split([3, 5], 1)[::-1],
                                                     1)[:, 1:7:2] * 2), [x4(2, 4), x4(2, 4)]),
    "select_expand": (Fn(lambda m, x: x[:, 0:1].expand(3, 5) + x[1]), [x4(3, 5)]),
    "pad_permute": (Fn(lambda m, x: F.pad(x, (1, 2, 0, 1), value=0.5).permute(0, 2, 3, 1) + 1),
                    [x4(2, 3, 4, 4)]),
    "reductions": (Fn(lambda m, x: torch.cat([x.sum(1), x.mean(1), x.amax(1), x.amin(1)], 0) +
                      x.sum()), [x4(3, 7)]),
    "vector_norm_normalize": (Fn(lambda m, x: F.normalize(x, dim=-1) + x.norm(dim=(0, 1)) +
                                 torch.linalg.vector_norm(x, keepdim=True) +
                                 torch.linalg.vector_norm(x, 1, -1, True) +
                                 torch.linalg.vector_norm(x, float("inf"), -1, True)),
                              [x4(2, 3, 6)]),
    "log_softmax_cumsum": (Fn(lambda m, x: F.log_softmax(x, -1) + torch.cumsum(x, 1)),
                           [x4(3, 6)]),
    "embedding": (Fn(lambda m, i: m[0](i) * 2, nn.Embedding(10, 4)),
                  [torch.tensor([[1, 2, 9], [0, 3, 3]])]),
    "gather_index_select": (Fn(lambda m, x, i: torch.gather(x, 1, i) + x.index_select(1, i[0])
                              + x[:, i[1]]),
                            [x4(2, 3), torch.tensor([[2, 0, 1], [1, 1, 0]])]),
    "arange_full_fmod": (Fn(lambda m, x: x + torch.arange(1, 9, 2, dtype=torch.float32) +
                            torch.full((3, 4), 0.5) + torch.fmod(x, 0.3)), [x4(3, 4)]),
    "as_strided_reshape": (Fn(lambda m, x: torch.as_strided(x.mean((2, 3), keepdim=True),
                                                          (2, 6, 1, 1), (6, 1, 6, 6)) * 2),
                           [x4(2, 6, 3, 3)]),
    "bmm_matmul": (Fn(lambda m, a, b: torch.bmm(a, b) @ b.transpose(1, 2)),
                   [x4(2, 3, 4), x4(2, 4, 4)]),
    "slice_assign": (Fn(lambda m, x: _window_mask(x) + _assigned(x)), [x4(6, 5)]),
    "index_several": (Fn(lambda m, x, i, j: torch.cat([x[:, i, j].flatten(),  # adjacent
                                                       x[i[:, :1] % 2, :, j].flatten()])),
                      [x4(2, 3, 4, 5), torch.tensor([[0, 2, -1], [1, 1, 0]]),
                       torch.tensor([3, -4, 1])]),
    "conv1d_gelu": (Fn(lambda m, x: F.gelu(m[1](F.gelu(m[0](x)))),
                       nn.Conv1d(6, 8, 3, padding=1), nn.Conv1d(8, 8, 3, stride=2, padding=1)),
                    [x4(2, 6, 11)]),
    "interpolate_kept": (Fn(lambda m, x: F.interpolate(x, size=(9, 7), mode="bilinear") +
                            F.interpolate(x, size=(9, 7), mode="bilinear", align_corners=True) +
                            m[0](x)[:, :, :9, :7], nn.Upsample(scale_factor=2)),
                         [x4(2, 3, 5, 4)]),
    "interpolate_fractional_scale": (Fn(lambda m, x: F.interpolate(x, scale_factor=1.5) +
                                        F.interpolate(x, scale_factor=1.5, mode="bilinear")),
                                     [x4(2, 3, 5, 5)]),
    "einsum": (Fn(lambda m, q, k: torch.einsum("bghid,bghjd->bghij", q, k).softmax(-1) @ k +
                  torch.einsum("ji,jk->ik", q[0, 0, 0], k[0, 0, 0]).sum() +
                  torch.einsum("bghid->bghdi", q).transpose(-1, -2)),
               [x4(2, 3, 4, 5, 6), x4(2, 3, 4, 5, 6)]),
    "upsample_nearest_decomposed": (Fn(lambda m, x: F.interpolate(x, scale_factor=2.0) +
                                       F.interpolate(x, size=(8, 8))), [x4(2, 3, 4, 4)]),
    "sdpa_with_mask": (Fn(lambda m, q, k, v, mask: F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask)), [x4(1, 2, 4, 8), x4(1, 2, 4, 8), x4(1, 2, 4, 8),
                                    x4(1, 1, 4, 4)]),
}


@pytest.fixture(autouse=True)
def fresh():
    torch._dynamo.reset()
    kd.reset()
    kd.clear_reports()
    torch.manual_seed(0)


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_through_the_backend_matches_eager(name):
    model, inputs = CASES[name]
    model = model.eval()
    with torch.no_grad():
        want = model(*inputs)
        got = torch.compile(model, backend="kiln")(*inputs)
    report = kd.partition_report()[-1]
    off = [n for n in report["nodes"] if n["where"] == "eager"]
    assert not off, kd.format_report()
    assert kd.stats()["reference_runs"] == 1
    assert not torch.isnan(got).any()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_an_index_out_of_range_in_one_component_is_an_error():
    # x[:, i, j] with j = 5 on a dim of 5: the flat index 0 * 5 + 5 would read x[:, 1, 0]
    x = x4(2, 3, 5)
    with torch.no_grad():
        f = torch.compile(Fn(lambda m, x, i, j: x[:, i, j]), backend="kiln")
        with pytest.raises(Exception, match="out of range"):
            f(x, torch.tensor([0, 1]), torch.tensor([2, 5]))


@pytest.mark.parametrize("form", ["pow", "cube", "half_last"])
def test_written_out_tanh_gelu_is_one_kiln_gelu(form):
    """GPT-2's gelu_new: the formula becomes kiln's gelu (tanh), the linear's epilogue."""
    k = math.sqrt(2.0 / math.pi)

    def act(m, x):
        h = m[0](x)
        cube = torch.pow(h, 3.0) if form == "pow" else h * (h * h)
        t = torch.tanh(k * (h + 0.044715 * cube))
        return h * (1.0 + t) * 0.5 if form == "half_last" else 0.5 * h * (1.0 + t)
    model = Fn(act, nn.Linear(8, 16)).eval()
    x = x4(3, 5, 8)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend="kiln")(x), model(x),
                                   rtol=1e-4, atol=1e-4)
    (g,) = kd.kiln_graphs()
    ops = [n["op"] for n in g.nodes]
    assert "gelu" in ops and "tanh" not in ops and "pow" not in ops, ops


def test_constant_subgraphs_are_folded_before_kiln_sees_them():
    x = x4(6, 5)
    model = Fn(lambda m, x: x + _window_mask(x) * torch.arange(5.0))
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend="kiln")(x), model(x))
    (g,) = kd.kiln_graphs()
    assert [n["op"] for n in g.nodes] == ["add"], g.nodes


def test_interpolate_is_one_kiln_resize():
    x = x4(2, 3, 5, 4)
    model = Fn(lambda m, x: F.interpolate(x, size=(9, 7), mode="bilinear") * 2)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend="kiln")(x), model(x))
    (g,) = kd.kiln_graphs()
    assert [n["op"] for n in g.nodes] == ["resize", "mul"], g.nodes


def test_batched_matmul_einsum_is_a_matmul_kiln_fuses_into_attention():
    """MaxViT's "BGHID,BGHJD->BGHIJ" then softmax then @ v: one attention kernel (f16)."""
    q, k = x4(2, 3, 4, 49, 32).half(), x4(2, 3, 4, 49, 32).half()
    model = Fn(lambda m, q, k: torch.einsum("BGHID,BGHJD->BGHIJ", q, k).softmax(-1) @ k)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend="kiln")(q, k), model(q, k),
                                   rtol=1e-2, atol=1e-2)
    (g,) = kd.kiln_graphs()
    kernels = [k["name"] for k in g.explain()["kernels"]]
    assert len(kernels) == 1 and kernels[0].startswith("attention_f16"), kernels


@pytest.mark.parametrize("form", ["to", "dtype"])
def test_softmax_upcast_of_f16_attention_is_the_fused_kernel(form):
    """Hugging Face's eager attention: softmax in f32 of the f16 scores, cast back. kiln's
    softmax computes in f32 and rounds once: the same values, and the attention kernel."""
    q, k, v = (x4(2, 3, 64, 32).half() for _ in range(3))

    def attn(m, q, k, v):
        s = (q @ k.transpose(-1, -2)) * 0.125
        p = s.float().softmax(-1) if form == "to" else F.softmax(s, -1, dtype=torch.float32)
        return p.to(torch.float16) @ v
    model = Fn(attn)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend="kiln")(q, k, v),
                                   model(q, k, v), rtol=1e-2, atol=1e-2)
    (g,) = kd.kiln_graphs()
    kernels = [k["name"] for k in g.explain()["kernels"]]
    assert len(kernels) == 1 and kernels[0].startswith("attention_f16"), kernels
