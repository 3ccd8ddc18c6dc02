// ShuffleNet V2 units as the ONNX export writes them, shared by the CPU pass test and the GPU test
// of channel shuffles (engine/passes/channel_shuffles.cpp).
#pragma once

#include <memory>
#include <string>

#include "kiln/graph.hpp"

namespace kiln::test {

inline Tensor conv1x1_relu(Graph& g, Tensor x, DType dt, int64_t cin, int64_t cout, uint64_t seed) {
  Tensor w = g.constant_random("w" + std::to_string(seed),
                               TensorDesc{dt, {cout, cin, 1, 1}, Layout::NHWC, {}}, "normal", 0,
                               0.3, seed);
  return g.relu(g.conv2d(x, w));
}

// [N, C] of a map's spatial means (a classifier head: the graph output has no map layout).
inline Tensor pooled(Graph& g, Tensor y, int64_t c) {
  return g.reshape(g.add_node1("global_avgpool", {y}), {"N", c});
}

// x [N, C, 6, 5] channels-last, a 1x1 conv, then two units of C channels: the shuffle (reshape
// to [N, 2, C/2, 6, 5], transpose(0, 2, 1, 3, 4), reshape back), its halves, the second through
// a 1x1 conv, concatenated; then a 1x1 conv to 8 channels and the pooled head.
// `shuffle_out`: the second unit's shuffled map is the graph output instead.
inline std::shared_ptr<Graph> shuffle_units(int64_t c, DType dt = DType::F16,
                                            bool shuffle_out = false) {
  auto g = std::make_shared<Graph>("shuffle");
  Tensor x = g->input("x", dt, {"N", c, 6, 5}, Layout::NHWC);
  Tensor y = conv1x1_relu(*g, x, dt, c, c, 1);
  for (int unit = 0; unit < 2; ++unit) {
    Tensor s = g->reshape(g->transpose(g->reshape(y, {"N", 2, c / 2, 6, 5}), {0, 2, 1, 3, 4}),
                          {"N", c, 6, 5});
    if (shuffle_out && unit == 1) {
      g->output(s);
      return g;
    }
    Tensor a = g->slice(s, {0}, {c / 2}, {1});
    Tensor b = conv1x1_relu(*g, g->slice(s, {c / 2}, {c}, {1}), dt, c / 2, c / 2, 10 + unit);
    y = g->concat({a, b}, 1);
  }
  g->output(pooled(*g, conv1x1_relu(*g, y, dt, c, 8, 20), 8));
  return g;
}

}  // namespace kiln::test
