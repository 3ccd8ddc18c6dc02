// Whisper's encoder stem, smaller: two conv1d (+ gelu) over frames, the transpose to tokens, the
// positions added, a layernorm (tests/test_conv1d_layouts.cpp, tests/gpu/test_ops_gpu.cpp).
#pragma once

#include <memory>

#include "kiln/graph.hpp"

namespace kiln::test {

// x [N, 16, W] -> conv1d k3 p1 (+ bias) -> gelu -> conv1d k3 s2 p1 -> gelu -> transpose to
// [N, W/2, 32] tokens + positions -> layernorm (Whisper's encoder stem, smaller), as importers
// lower Conv1d: reshapes around a conv2d with H = 1.
inline std::shared_ptr<Graph> whisper_stem(DType dt, int64_t w) {
  auto g = std::make_shared<Graph>("stem");
  auto cst = [&](const char* name, Shape s) {
    return g->constant_random(name, TensorDesc{dt, std::move(s), Layout::NCHW, {}}, "normal", 0,
                              0.3, 11);
  };
  auto conv1d = [&](Tensor x, Tensor wt, Tensor b, int64_t stride) {
    const Shape s = g->tensor(x.id).desc.shape;
    Conv2dOptions o;
    o.padding = {0, 1};
    o.stride = {1, stride};
    Tensor y = g->conv2d(g->reshape(x, {s[0], s[1], 1, s[2]}), wt, b, o);
    const Shape t = g->tensor(y.id).desc.shape;
    return g->reshape(y, {t[0], t[1], t[3]});
  };
  Tensor x = g->input("x", dt, {"N", 16, w});
  Tensor h = g->gelu(conv1d(x, cst("w1", {32, 16, 1, 3}), cst("b1", {32}), 1), GeluApprox::None);
  h = g->gelu(conv1d(h, cst("w2", {32, 32, 1, 3}), cst("b2", {32}), 2), GeluApprox::None);
  Tensor tokens = g->transpose(h, {0, 2, 1});
  g->output(g->layernorm(g->add(tokens, cst("pos", {w / 2, 32}))));
  return g;
}

}  // namespace kiln::test
