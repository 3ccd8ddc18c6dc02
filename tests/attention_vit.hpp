// torchvision's ViT encoder attention as its dynamo ONNX export writes it (vit_b_16, batch N
// symbolic and in the middle of the token-major layout), shared by the CPU planner tests and the
// GPU tests: one QKV projection, the head split through unsqueeze / transpose / squeeze, three
// selects and reshapes to [N, H, T, D] (k^T through one more reshape / transpose / reshape),
// q and k^T each times sqrt(1 / sqrt(D)), softmax, @ v, the head merge (permute + reshape) and
// the output projection.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln::test {

// `inspect`: the head-split operands (before the scale), the attention result and its merged
// heads are graph outputs too, so a test can compare them with the strides the planner composed
// (that graph does not fuse; the tensor names equal the plain graph's).
inline Graph vit_attention(DType dt, int64_t heads, int64_t d, int64_t tokens,
                           bool inspect = false) {
  const int64_t e = heads * d;
  const Dim n("N"), t(tokens), hn = Dim(heads) * Dim("N");
  Graph g("vit_attention");
  Tensor x = g.input("x", dt, {n, t, Dim(e)});
  auto weight = [&](const std::string& nm, std::vector<Dim> s, uint64_t seed) {
    return g.constant_random(nm, TensorDesc{dt, std::move(s), Layout::NCHW, {}}, "normal", 0.0,
                             1.0 / std::sqrt(static_cast<double>(e)), seed);
  };
  Tensor xt = g.transpose(x, {1, 0, 2});  // [T, N, E]
  Tensor qkv =
      g.matmul(xt, weight("w_in", {Dim(e), Dim(3 * e)}, 1), weight("b_in", {Dim(3 * e)}, 2));
  Tensor u = g.reshape(g.reshape(qkv, {t, n, Dim(3), Dim(e)}), {Dim(1), t, n, Dim(3), Dim(e)});
  Tensor sq = g.reshape(g.transpose(u, {3, 1, 2, 0, 4}), {Dim(3), t, n, Dim(e)});
  auto head = [&](int64_t i) {  // select i, then [T, N, E] -> [T, H*N, D] -> [H*N, T, D]
    Tensor s = g.reshape(g.slice(sq, {i}, {i + 1}, {0}), {t, n, Dim(e)});
    return g.transpose(g.reshape(s, {t, hn, Dim(d)}), {1, 0, 2});
  };
  Tensor q = g.reshape(head(0), {n, Dim(heads), t, Dim(d)});
  Tensor k = g.reshape(head(1), {n, Dim(heads), t, Dim(d)});
  Tensor v = g.reshape(head(2), {n, Dim(heads), t, Dim(d)});
  Tensor kt =
      g.reshape(g.transpose(g.reshape(k, {hn, t, Dim(d)}), {0, 2, 1}), {n, Dim(heads), Dim(d), t});
  const double half = std::sqrt(1.0 / std::sqrt(static_cast<double>(d)));
  Tensor c = g.constant("c", TensorDesc{dt, {Dim(1)}, Layout::NCHW, {}},
                        HostTensor::from_f64(dt, {1}, {half}));
  Tensor p = g.softmax(g.matmul(g.mul(q, c), g.mul(kt, c)), -1);
  Tensor o = g.matmul(p, v);                     // [N, H, T, D]
  Tensor merged = g.transpose(o, {2, 0, 1, 3});  // [T, N, H, D]
  Tensor flat = g.reshape(merged, {t * n, Dim(e)});
  g.output(g.matmul(flat, weight("w_out", {Dim(e), Dim(e)}, 3), weight("b_out", {Dim(e)}, 4)));
  if (inspect) {
    for (Tensor y : {u, q, kt, v, o, merged}) g.output(y);
  }
  return g;
}

}  // namespace kiln::test
