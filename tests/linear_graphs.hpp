// Linear layers as exporters write them (CPU: tests/test_matmul_reshapes.cpp, GPU:
// tests/gpu/test_matmul_reshapes_gpu.cpp): a 2-D Gemm over the rows of a sequence between
// reshapes. GPT-2's MLP (tanh GELU written out op by op, then the projection, the residual add
// and a LayerNorm) and ViT's attention output projection (rows in [S, N] order, transposed back
// to [N, S] for the residual add and LayerNorm). The batch N is a symbol; weights are seeded
// random constants; `x` (and `r`) are the inputs, `out` the output.
#pragma once

#include <memory>
#include <string>

#include "kiln/graph.hpp"

namespace kiln::test {

inline Tensor weight(Graph& g, DType dt, const std::string& name, Shape shape, double std,
                     uint64_t seed) {
  return g.constant_random(name, TensorDesc{dt, std::move(shape), Layout::NCHW, {}}, "normal", 0.0,
                           std, seed);
}

inline Tensor scalar(Graph& g, DType dt, const std::string& name, double v) {
  return g.constant(name, TensorDesc{dt, {1}, Layout::NCHW, {}},
                    HostTensor::from_f64(dt, {1}, {v}));
}

// [N*S, K] x [K, M] + bias as a reshape, a 2-D matmul and a reshape back to [lead.., M].
inline Tensor linear_2d(Graph& g, Tensor x, Shape lead, int64_t k, int64_t m,
                        const std::string& name, uint64_t seed) {
  const DType dt = g.tensor(x.id).desc.dtype;
  Dim rows(1);
  for (const Dim& d : lead) rows = rows * d;
  Tensor x2 = g.reshape(x, {rows, Dim(k)});
  Tensor y = g.matmul(x2, weight(g, dt, name + ".w", {k, m}, 1.0 / std::sqrt(double(k)), seed),
                      weight(g, dt, name + ".b", {m}, 0.1, seed + 1));
  lead.push_back(Dim(m));
  return g.reshape(y, lead);
}

inline std::shared_ptr<Graph> gpt2_mlp(DType dt) {
  auto g = std::make_shared<Graph>("gpt2_mlp");
  const int64_t s = 9, e = 64, h = 256;
  Tensor x = g->input("x", dt, {"N", s, e});
  Tensor v = linear_2d(*g, x, {Dim("N"), Dim(s)}, e, h, "fc", 11);
  // 0.5 v (1 + tanh(sqrt(2 / pi) (v + 0.044715 v^3))), as GPT-2's NewGELUActivation writes it.
  Tensor cube = g->mul(g->mul(v, v), v);
  Tensor inner = g->add(v, g->mul(scalar(*g, dt, "c0", 0.044715), cube));
  Tensor t = g->tanh(g->mul(scalar(*g, dt, "c1", 0.7978845608028654), inner));
  Tensor gelu =
      g->mul(g->mul(scalar(*g, dt, "half", 0.5), v), g->add(scalar(*g, dt, "one", 1.0), t));
  Tensor p = linear_2d(*g, gelu, {Dim("N"), Dim(s)}, h, e, "proj", 21);
  Tensor sum = g->add(p, x);
  g->output(g->add_node1(
      "layernorm",
      {sum, weight(*g, dt, "ln.s", {e}, 0.3, 31), weight(*g, dt, "ln.b", {e}, 0.3, 32)}, {},
      "out"));
  return g;
}

inline std::shared_ptr<Graph> vit_out_proj(DType dt) {
  auto g = std::make_shared<Graph>("vit_out_proj");
  const int64_t s = 11, e = 64;
  Tensor a = g->input("x", dt, {s, "N", e});  // the attention's output rows, [S, N] order
  Tensor r = g->input("r", dt, {"N", s, e});  // the residual
  Tensor y = linear_2d(*g, a, {Dim(s), Dim("N")}, e, e, "out_proj", 41);
  Tensor sum = g->add(g->transpose(y, {1, 0, 2}), r);
  g->output(g->add_node1(
      "layernorm",
      {sum, weight(*g, dt, "ln.s", {e}, 0.3, 51), weight(*g, dt, "ln.b", {e}, 0.3, 52)}, {},
      "out"));
  return g;
}

// torchvision ViT's QKV projection: layernormed [N, S, E] tokens transposed to [S, N, E]
// (batch_first=False) into a 3-D matmul with a 2-D weight and bias, then split into heads.
inline std::shared_ptr<Graph> vit_qkv_proj(DType dt) {
  auto g = std::make_shared<Graph>("vit_qkv_proj");
  const int64_t s = 11, e = 64;
  Tensor x = g->input("x", dt, {"N", s, e});
  Tensor t = g->transpose(x, {1, 0, 2});  // [S, N, E], strided over x
  Tensor y = g->matmul(t, weight(*g, dt, "in_proj.w", {e, 3 * e}, 1.0 / 8.0, 61),
                       weight(*g, dt, "in_proj.b", {3 * e}, 0.1, 62));
  g->output(g->relu(g->reshape(y, {Dim(s), Dim("N"), Dim(3), Dim(e)})));
  return g;
}

}  // namespace kiln::test
