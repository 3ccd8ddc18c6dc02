// Multi-head attention graphs shared by the CPU view-pass tests and the GPU contraction tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln::test {

// Multi-head attention as an ONNX export writes it: projections, the head split (reshape +
// transpose), q @ k^T (a transpose of the last two dims), scale, softmax, @ v, the heads merge
// (transpose + reshape), the output projection. The engine reads every reshape and transpose in
// place (views: the matmuls load and store through strides), so no copy kernel runs. `out_root`:
// the merged heads are a graph output too (the transposed store lands in the caller's buffer).
// `kt_direct`: k^T as one transpose of the split heads ([N, T, H, D] -> [N, H, D, T], as torch's
// exporter folds the two), else as a transpose of k.
inline Graph attention_graph(DType dt, int64_t t, int64_t heads, int64_t hd, bool out_root,
                             bool kt_direct) {
  const int64_t c = heads * hd;
  Graph g("attention");
  Tensor x = g.input("x", dt, {"N", Dim(t), Dim(c)});
  auto weight = [&](const std::string& n, std::vector<Dim> s, uint64_t seed) {
    return g.constant_random(n, TensorDesc{dt, std::move(s), Layout::NCHW, {}}, "normal", 0.0,
                             1.0 / std::sqrt(static_cast<double>(c)), seed);
  };
  auto split = [&](Tensor y) {
    return g.transpose(g.reshape(y, {"N", Dim(t), Dim(heads), Dim(hd)}), {0, 2, 1, 3});
  };
  Tensor q = split(g.matmul(x, weight("wq", {Dim(c), Dim(c)}, 1), weight("bq", {Dim(c)}, 2)));
  Tensor kl = g.matmul(x, weight("wk", {Dim(c), Dim(c)}, 3), weight("bk", {Dim(c)}, 4));
  Tensor v = split(g.matmul(x, weight("wv", {Dim(c), Dim(c)}, 5)));
  Tensor kt = kt_direct
                  ? g.transpose(g.reshape(kl, {"N", Dim(t), Dim(heads), Dim(hd)}), {0, 2, 3, 1})
                  : g.transpose(split(kl), {0, 1, 3, 2});
  Tensor scale = g.constant("scale", TensorDesc{dt, {}, Layout::NCHW, {}},
                            HostTensor::from_f64(dt, {}, {std::sqrt(static_cast<double>(hd))}));
  Tensor att = g.softmax(g.div(g.matmul(q, kt), scale), -1);
  Tensor o = g.reshape(g.transpose(g.matmul(att, v), {0, 2, 1, 3}), {"N", Dim(t), Dim(c)});
  if (out_root) g.output(o);
  g.output(g.add(g.matmul(o, weight("wo", {Dim(c), Dim(c)}, 6)), x));
  return g;
}

}  // namespace kiln::test
