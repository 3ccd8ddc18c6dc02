// A MaxViT layer as torchvision writes it and the ONNX export keeps it, shared by the CPU pass
// test and the GPU test of composed movement chains (engine/passes/movement_chains.cpp): an MBConv
// (batchnorm, 1x1 conv, depthwise 3x3 conv, 1x1 conv, residual add), then window attention's and
// grid attention's partitions of the map into 7 x 7 tokens, each with a layernorm and an MLP
// over the tokens' channels in place of the attention, and the departitions back.
#pragma once

#include <memory>
#include <string>

#include "kiln/graph.hpp"

namespace kiln::test {

inline Tensor random_const(Graph& g, const std::string& name, DType dt, Shape shape, Layout layout,
                           double std, uint64_t seed) {
  return g.constant_random(name, TensorDesc{dt, std::move(shape), layout, {}}, "normal", 0, std,
                           seed);
}

// x [N, c, 7 p, 7 p] (p windows a side) -> [N, c, 7 p, 7 p].
inline Tensor maxvit_layer(Graph& g, Tensor x, DType dt, int64_t c, int64_t p, uint64_t seed) {
  const int64_t h = 7 * p;
  Tensor bn = g.batchnorm(
      x,
      g.constant_random("bn_s" + std::to_string(seed), TensorDesc{dt, {c}, Layout::NCHW, {}},
                        "uniform", 0.5, 1.5, seed + 1),
      random_const(g, "bn_b" + std::to_string(seed), dt, {c}, Layout::NCHW, 0.1, seed + 2),
      random_const(g, "bn_m" + std::to_string(seed), dt, {c}, Layout::NCHW, 0.1, seed + 3),
      g.constant_random("bn_v" + std::to_string(seed), TensorDesc{dt, {c}, Layout::NCHW, {}},
                        "uniform", 0.5, 1.5, seed + 4));
  Tensor wa = random_const(g, "wa" + std::to_string(seed), dt, {2 * c, c, 1, 1}, Layout::NHWC, 0.3,
                           seed + 5);
  Tensor wd = random_const(g, "wd" + std::to_string(seed), dt, {2 * c, 1, 3, 3}, Layout::NHWC, 0.3,
                           seed + 6);
  Tensor wc = random_const(g, "wc" + std::to_string(seed), dt, {c, 2 * c, 1, 1}, Layout::NHWC, 0.3,
                           seed + 7);
  Conv2dOptions dw;
  dw.padding = {1, 1};
  dw.groups = 2 * c;
  Tensor m = g.add(g.conv2d(g.gelu(g.conv2d(g.gelu(g.conv2d(bn, wa), GeluApprox::None), wd, {}, dw),
                                   GeluApprox::None),
                            wc),
                   x);
  // Window partition: [N, c, p, 7, p, 7] -> [N, p, p, 7, 7, c] -> [N, p p, 49, c].
  Tensor w = g.reshape(g.transpose(g.reshape(m, {"N", c, p, 7, p, 7}), {0, 2, 4, 3, 5, 1}),
                       {"N", p * p, 49, c});
  auto tokens = [&](Tensor t, uint64_t s) {
    Tensor ln =
        g.layernorm(t, random_const(g, "ln" + std::to_string(s), dt, {c}, Layout::NCHW, 0.3, s));
    Tensor w1 = random_const(g, "w1_" + std::to_string(s), dt, {c, c}, Layout::NCHW, 0.3, s + 1);
    return g.add(g.matmul(ln, w1), t);
  };
  w = tokens(w, seed + 10);
  // Window departition: [N, p, p, 7, 7, c] -> [N, c, p, 7, p, 7] -> [N, c, h, h].
  Tensor d = g.reshape(g.transpose(g.reshape(w, {"N", p, p, 7, 7, c}), {0, 5, 1, 3, 2, 4}),
                       {"N", c, h, h});
  // Grid partition: [N, c, 7, p, 7, p] -> [N, 7, 7, p, p, c] -> [N, 49, p p, c], swapped to
  // [N, p p, 49, c].
  Tensor q =
      g.transpose(g.reshape(g.transpose(g.reshape(d, {"N", c, 7, p, 7, p}), {0, 2, 4, 3, 5, 1}),
                            {"N", 49, p * p, c}),
                  {0, 2, 1, 3});
  q = tokens(q, seed + 20);
  // Grid departition: swap back, [N, 7, 7, p, p, c] -> [N, c, 7, p, 7, p] -> [N, c, h, h].
  return g.reshape(g.transpose(g.reshape(g.transpose(q, {0, 2, 1, 3}), {"N", 7, 7, p, p, c}),
                               {0, 5, 1, 3, 2, 4}),
                   {"N", c, h, h});
}

// Two MaxViT layers over x [N, c, 7 p, 7 p] channels-last, then a 1x1 conv to 8 channels and the
// pooled head [N, 8].
inline std::shared_ptr<Graph> maxvit_layers(int64_t c, int64_t p, DType dt = DType::F16) {
  auto g = std::make_shared<Graph>("maxvit");
  Tensor x = g->input("x", dt, {"N", c, 7 * p, 7 * p}, Layout::NHWC);
  Tensor y = maxvit_layer(*g, maxvit_layer(*g, x, dt, c, p, 100), dt, c, p, 200);
  Tensor w = random_const(*g, "head", dt, {8, c, 1, 1}, Layout::NHWC, 0.3, 7);
  g->output(g->reshape(g->global_avgpool(g->conv2d(y, w)), {"N", 8}));
  return g;
}

}  // namespace kiln::test
