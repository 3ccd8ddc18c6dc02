// The attention block of a VQGAN / LDM-style UNet (bench_zoo's unet_small) as its ONNX export
// writes it, shared by the CPU planner tests and the GPU test: over channels-last x [N, C, H, W],
// a 1x1 conv to q, k, v (3C channels), reshaped to [N, 3, heads, D, H*W] and split three ways;
// softmax(q^T @ k / sqrt(D)); O^T = v @ P^T ([N, heads, D, H*W]) reshaped to [N, C, H, W] (the
// channels in NCHW order: a view of the matmul's row-major result); a 1x1 projection conv and the
// residual add.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "kiln/graph.hpp"

namespace kiln::test {

// `filters`: the convs' filter layout (channels-last as the f16 NHWC import writes them, or NCHW
// as the f32 import does); x takes the same layout.
inline Graph unet_attention(DType dt, int64_t c, int64_t heads, int64_t h, int64_t w,
                            Layout filters = Layout::NHWC) {
  const int64_t d = c / heads, hw = h * w;
  const Dim n("N");
  Graph g("unet_attention");
  Tensor x = g.input("x", dt, {n, Dim(c), Dim(h), Dim(w)}, filters);
  auto rnd = [&](const std::string& nm, std::vector<Dim> s, Layout l, double std, uint64_t seed) {
    return g.constant_random(nm, TensorDesc{dt, std::move(s), l, {}}, "normal", 0.0, std, seed);
  };
  const double fan = 1.0 / std::sqrt(static_cast<double>(c));
  Tensor qkv = g.conv2d(x, rnd("w_qkv", {Dim(3 * c), Dim(c), Dim(1), Dim(1)}, filters, fan, 1),
                        rnd("b_qkv", {Dim(3 * c)}, Layout::NCHW, 0.1, 2));
  Tensor r = g.reshape(qkv, {n, Dim(3), Dim(heads), Dim(d), Dim(hw)});
  auto part = [&](int64_t i) {  // unbind(1): slice, then squeeze
    return g.reshape(g.slice(r, {i}, {i + 1}, {1}), {n, Dim(heads), Dim(d), Dim(hw)});
  };
  Tensor q = part(0), k = part(1), v = part(2);
  Tensor s = g.matmul(g.transpose(q, {0, 1, 3, 2}), k);  // [N, heads, HW, HW]
  Tensor scale = g.constant("scale", TensorDesc{dt, {}, Layout::NCHW, {}},
                            HostTensor::from_f64(dt, {}, {std::sqrt(static_cast<double>(d))}));
  Tensor p = g.softmax(g.div(s, scale), -1);
  Tensor ot = g.matmul(v, g.transpose(p, {0, 1, 3, 2}));  // [N, heads, D, HW]
  Tensor o = g.reshape(ot, {n, Dim(c), Dim(h), Dim(w)});
  Tensor y = g.conv2d(o, rnd("w_proj", {Dim(c), Dim(c), Dim(1), Dim(1)}, filters, fan, 3),
                      rnd("b_proj", {Dim(c)}, Layout::NCHW, 0.1, 4));
  g.output(g.add(x, y));
  return g;
}

}  // namespace kiln::test
