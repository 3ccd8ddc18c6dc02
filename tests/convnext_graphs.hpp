// ConvNeXt blocks as torchvision writes them and the ONNX export keeps them, shared by the CPU
// pass test and the GPU test of elementwise ops moved above channels-last relabels
// (engine/passes/relabel_epilogues.cpp): a depthwise 7x7 conv, permute to [N, H, W, C], layernorm,
// fc1 + gelu, fc2, permute back, the layer scale (mul by [C, 1, 1]) and the residual add.
#pragma once

#include <memory>
#include <string>

#include "kiln/graph.hpp"

namespace kiln::test {

inline Tensor convnext_block(Graph& g, Tensor x, DType dt, int64_t c, uint64_t seed) {
  auto rnd = [&](const char* what, Shape shape, Layout layout, double std) {
    return g.constant_random(what + std::to_string(seed),
                             TensorDesc{dt, std::move(shape), layout, {}}, "normal", 0, std,
                             seed++);
  };
  Conv2dOptions dw;
  dw.padding = {3, 3};
  dw.groups = c;
  Tensor d = g.conv2d(x, rnd("dw", {c, 1, 7, 7}, Layout::NHWC, 0.2),
                      rnd("dwb", {c}, Layout::NCHW, 0.1), dw);
  Tensor t = g.transpose(d, {0, 2, 3, 1});
  Tensor ln =
      g.layernorm(t, rnd("lns", {c}, Layout::NCHW, 0.3), rnd("lnb", {c}, Layout::NCHW, 0.1));
  Tensor h = g.gelu(
      g.matmul(ln, rnd("w1", {c, 4 * c}, Layout::NCHW, 0.3), rnd("b1", {4 * c}, Layout::NCHW, 0.1)),
      GeluApprox::None);
  Tensor y =
      g.matmul(h, rnd("w2", {4 * c, c}, Layout::NCHW, 0.2), rnd("b2", {c}, Layout::NCHW, 0.1));
  Tensor back = g.transpose(y, {0, 3, 1, 2});
  return g.add(g.mul(back, rnd("scale", {c, 1, 1}, Layout::NCHW, 0.5)), x);
}

// Two ConvNeXt blocks over x [N, c, 6, 5] channels-last, then a 1x1 conv to 8 channels and the
// pooled head [N, 8].
inline std::shared_ptr<Graph> convnext_blocks(int64_t c, DType dt = DType::F16) {
  auto g = std::make_shared<Graph>("convnext");
  Tensor x = g->input("x", dt, {"N", c, 6, 5}, Layout::NHWC);
  Tensor y = convnext_block(*g, convnext_block(*g, x, dt, c, 100), dt, c, 200);
  Tensor w = g->constant_random("head", TensorDesc{dt, {8, c, 1, 1}, Layout::NHWC, {}}, "normal", 0,
                                0.3, 7);
  g->output(g->reshape(g->global_avgpool(g->conv2d(y, w)), {"N", 8}));
  return g;
}

}  // namespace kiln::test
