// torch.roll as the ONNX export writes it (two slices along an axis, concatenated), and Swin's
// shifted-window step built from it, shared by the CPU pass test and the GPU test of rolls as
// gathers (engine/passes/rolls.cpp).
#pragma once

#include <memory>

#include "kiln/graph.hpp"

namespace kiln::test {

// x rolled by `shift` along `axis` of static size `len` (torch.roll(x, shift, axis)).
inline Tensor roll(Graph& g, Tensor x, int64_t shift, int64_t axis, int64_t len) {
  const int64_t s = ((-shift % len) + len) % len;  // output i reads input (i + s) mod len
  return g.concat({g.slice(x, {s}, {len}, {axis}), g.slice(x, {0}, {s}, {axis})}, axis);
}

// x [N, 14, 14, c] rolled by (-3, -3), partitioned into 7 x 7 windows with a layernorm over the
// channels, departitioned, rolled back by (3, 3), plus x: a Swin shifted-window step without its
// attention.
inline std::shared_ptr<Graph> swin_shift(int64_t c, DType dt = DType::F16) {
  auto g = std::make_shared<Graph>("swin_shift");
  Tensor x = g->input("x", dt, {"N", 14, 14, c});
  Tensor r = roll(*g, roll(*g, x, -3, 1, 14), -3, 2, 14);
  Tensor w = g->reshape(g->transpose(g->reshape(r, {"N", 2, 7, 2, 7, c}), {0, 1, 3, 2, 4, 5}),
                        {"N", 4, 49, c});
  Tensor ln = g->layernorm(
      w, g->constant_random("s", TensorDesc{dt, {c}, Layout::NCHW, {}}, "normal", 1, 0.2, 5));
  Tensor d = g->reshape(g->transpose(g->reshape(ln, {"N", 2, 2, 7, 7, c}), {0, 1, 3, 2, 4, 5}),
                        {"N", 14, 14, c});
  g->output(g->add(roll(*g, roll(*g, d, 3, 1, 14), 3, 2, 14), x));
  return g;
}

}  // namespace kiln::test
