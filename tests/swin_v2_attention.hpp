// Swin V2's window attention as torchvision's ONNX export writes it, shared by the CPU tests and
// the GPU test: over windows x [B, T, C] (N windows, symbolic), the QKV projection reshaped
// to [B, T, 3, H, D] and transposed to [3, B, H, T, D], sliced three ways; cosine attention: q and
// k each divided by max(||.||_2, 1e-12) over D, q @ k^T times the per-head logit scale
// exp(min(logit_scale, log 100)) (constants: a [H, 1, 1] subgraph), plus the position bias
// 16 sigmoid(table @ w) gathered to [1, H, T, T] (a constant subgraph too); softmax; @ v; the
// heads merged back to [B, T, C]; the output projection.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln::test {

inline Graph swin_v2_attention(DType dt, int64_t heads, int64_t d, int64_t tokens) {
  const int64_t c = heads * d;
  const Dim b("N"), t(tokens);
  Graph g("swin_v2_attention");
  Tensor x = g.input("x", dt, {b, t, Dim(c)});
  auto rnd = [&](const std::string& nm, std::vector<Dim> s, double mean, double std,
                 uint64_t seed) {
    return g.constant_random(nm, TensorDesc{dt, std::move(s), Layout::NCHW, {}}, "normal", mean,
                             std, seed);
  };
  const double fan = 1.0 / std::sqrt(static_cast<double>(c));
  Tensor qkv = g.matmul(x, rnd("w_qkv", {Dim(c), Dim(3 * c)}, 0, fan, 1),
                        rnd("b_qkv", {Dim(3 * c)}, 0, 0.1, 2));
  Tensor split = g.transpose(g.reshape(qkv, {b, t, Dim(3), Dim(heads), Dim(d)}), {2, 0, 3, 1, 4});
  auto part = [&](int64_t i) {
    return g.reshape(g.slice(split, {i}, {i + 1}, {0}), {b, Dim(heads), t, Dim(d)});
  };
  auto normalized = [&](Tensor v) {
    Tensor n = g.clamp(g.reduce("reduce_l2", v, {-1}, true), 1e-12, INFINITY);
    return g.div(v, g.expand(n, {b, Dim(heads), t, Dim(d)}));
  };
  Tensor q = normalized(part(0)), k = normalized(part(1)), v = part(2);
  // the per-head logit scale, computed from its parameter on every run as exported: scales of
  // 2.7 to 10 (torchvision initializes log 10). The scale multiplies the rounding of the
  // normalized q and k (and the reference's of the scores) into the softmax: at trained models'
  // 50 a bf16 block differs from the f64 reference by 0.1 where no index is wrong (the device's
  // run 2 of session 23).
  Tensor logit = g.constant_random("logit_scale",
                                   TensorDesc{dt, {Dim(heads), Dim(1), Dim(1)}, Layout::NCHW, {}},
                                   "uniform", 1.0, 2.3, 3);
  Tensor scale = g.exp(g.clamp(logit, -INFINITY, std::log(100.0)));
  Tensor s = g.mul(g.matmul(q, g.transpose(k, {0, 1, 3, 2})), scale);
  // the position bias: an MLP over a coordinate table, gathered per (query, key) pair
  const int64_t rel = 2 * tokens - 1;
  Tensor table = rnd("table", {Dim(rel), Dim(2)}, 0, 1, 4);
  Tensor hidden = g.relu(g.matmul(table, rnd("w_mlp1", {Dim(2), Dim(32)}, 0, 0.7, 5),
                                  rnd("b_mlp1", {Dim(32)}, 0, 0.1, 6)));
  Tensor per = g.matmul(hidden, rnd("w_mlp2", {Dim(32), Dim(heads)}, 0, 0.2, 7));  // [rel, H]
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < tokens; ++i)
    for (int64_t j = 0; j < tokens; ++j) idx.push_back(i - j + tokens - 1);
  Tensor index =
      g.constant("index", TensorDesc{DType::I64, {Dim(tokens * tokens)}, Layout::NCHW, {}},
                 HostTensor::from_i64(DType::I64, {tokens * tokens}, idx));
  Tensor bias = g.transpose(g.reshape(g.gather(per, index, 0), {t, t, Dim(heads)}), {2, 0, 1});
  Tensor sixteen = g.constant("sixteen", TensorDesc{dt, {}, Layout::NCHW, {}},
                              HostTensor::from_f64(dt, {}, {16.0}));
  bias = g.reshape(g.mul(g.sigmoid(bias), sixteen), {Dim(1), Dim(heads), t, t});
  Tensor p = g.softmax(g.add(s, bias), -1);
  Tensor o = g.reshape(g.transpose(g.matmul(p, v), {0, 2, 1, 3}), {b, t, Dim(c)});
  g.output(
      g.matmul(o, rnd("w_proj", {Dim(c), Dim(c)}, 0, fan, 8), rnd("b_proj", {Dim(c)}, 0, 0.1, 9)));
  return g;
}

}  // namespace kiln::test
