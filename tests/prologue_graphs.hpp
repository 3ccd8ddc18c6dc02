// Convs whose input is made by an elementwise chain the conv can apply to its A tiles
// (engine/planner: claim_conv_prologue; codegen/contraction/prologue.cpp), shared by the CPU
// planner / codegen test and the GPU test:
//  - a squeeze-excite block as EfficientNet's ONNX export writes it: global average pool, fc1 +
//    silu, fc2 + sigmoid, the channel scale (mul by [N, C, 1, 1]), then the 1x1 projection conv;
//  - two DenseNet layers: each reads its block's concat so far through batchnorm + relu before a
//    1x1 conv (its input a view in the block's concat buffer: a strided source), then a 3x3 conv
//    whose result joins the concat.
#pragma once

#include <memory>
#include <string>

#include "kiln/graph.hpp"

namespace kiln::test {

inline Tensor prologue_constant(Graph& g, const std::string& what, DType dt, Shape shape,
                                Layout layout, double mean, double std, uint64_t seed) {
  return g.constant_random(what, TensorDesc{dt, std::move(shape), layout, {}}, "normal", mean, std,
                           seed);
}

// x [N, c, h, w] channels-last -> SE scale -> 1x1 conv to `k` channels + bias (+ relu).
inline std::shared_ptr<Graph> se_block(int64_t c, int64_t k, int64_t h, int64_t w,
                                       DType dt = DType::F16, uint64_t seed = 500) {
  auto g = std::make_shared<Graph>("se_block");
  auto rnd = [&](const char* what, Shape shape, Layout layout, double std) {
    return prologue_constant(*g, what, dt, std::move(shape), layout, 0, std, seed++);
  };
  const int64_t cr = 8;
  Tensor x = g->input("x", dt, {"N", c, h, w}, Layout::NHWC);
  Tensor s = g->global_avgpool(x);
  s = g->silu(g->conv2d(s, rnd("w1", {cr, c, 1, 1}, Layout::NHWC, 0.5),
                        rnd("b1", {cr}, Layout::NCHW, 0.2)));
  s = g->sigmoid(
      g->conv2d(s, rnd("w2", {c, cr, 1, 1}, Layout::NHWC, 0.5), rnd("b2", {c}, Layout::NCHW, 0.2)));
  Tensor y = g->conv2d(g->mul(x, s), rnd("wp", {k, c, 1, 1}, Layout::NHWC, 0.3),
                       rnd("bp", {k}, Layout::NCHW, 0.1));
  g->output(g->relu(y));
  return g;
}

// x [N, c0, h, w] channels-last, two dense layers of growth `growth` (bottleneck 2 x growth):
// the output is the block's concat [N, c0 + 2 growth, h, w].
inline std::shared_ptr<Graph> dense_layers(int64_t c0, int64_t growth, int64_t h, int64_t w,
                                           DType dt = DType::F16, uint64_t seed = 700) {
  auto g = std::make_shared<Graph>("dense_layers");
  auto rnd = [&](const char* what, Shape shape, Layout layout, double mean, double std) {
    return prologue_constant(*g, what + std::to_string(seed), dt, std::move(shape), layout, mean,
                             std, seed++);
  };
  Tensor x = g->input("x", dt, {"N", c0, h, w}, Layout::NHWC);
  Tensor cat = x;
  int64_t c = c0;
  for (int layer = 0; layer < 2; ++layer) {
    Tensor a = g->relu(g->batchnorm(
        cat, rnd("scale", {c}, Layout::NCHW, 1, 0.2), rnd("shift", {c}, Layout::NCHW, 0, 0.2),
        rnd("mean", {c}, Layout::NCHW, 0, 0.3), rnd("var", {c}, Layout::NCHW, 1, 0.1)));
    Tensor b = g->relu(g->conv2d(a, rnd("w1", {2 * growth, c, 1, 1}, Layout::NHWC, 0, 0.3),
                                 rnd("b1", {2 * growth}, Layout::NCHW, 0, 0.1)));
    Conv2dOptions o;
    o.padding = {1, 1};
    Tensor y = g->conv2d(b, rnd("w2", {growth, 2 * growth, 3, 3}, Layout::NHWC, 0, 0.2), {}, o);
    cat = g->concat({cat, y}, 1);
    c += growth;
  }
  g->output(cat);
  return g;
}

}  // namespace kiln::test
