// Graphs of the resize op, shared by the CPU codegen tests (tests/test_resize.cpp: every kernel
// compiles with NVRTC) and the GPU op harness (tests/gpu/test_ops_gpu.cpp: every kernel against
// the CPU reference): nearest (a gather copy) and linear (its own kernel) in every coordinate and
// nearest mode, 1 to 3 spatial dims, upsampling and downsampling, odd sizes, NCHW and NHWC (the
// channel-vector path and the scalar one), scales and sizes, symbolic dims, prologues.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/graph.hpp"
#include "tests/movement_graphs.hpp"

namespace kiln::test {

inline std::vector<MovementGraph> resize_graphs(DType dt) {
  const std::string d = dtype_name(dt);
  std::vector<MovementGraph> v;
  v.push_back(
      {"resize_nearest_" + d,
       [dt] {
         auto g = std::make_shared<Graph>("rnear");
         Tensor x = g->input("x", dt, {"N", 3, 7, 9});
         // UNet-style x2 (asymmetric, floor) with a prologue; the vector path (W 18).
         g->output(g->resize(g->silu(x), {1, 1, 2, 2}, "nearest", "asymmetric", "floor"));
         // Odd up/down ratios in every nearest and coordinate mode.
         const char* coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"};
         const char* rounds[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
         for (int i = 0; i < 4; ++i) {
           g->output(g->resize_to(x, {"N", 3, 11, 4}, "nearest", coords[i], rounds[i]));
           g->output(g->resize(x, {1, 1, 0.6, 1.7}, "nearest", coords[i], rounds[3 - i]));
         }
         g->output(g->resize_to(x, {"N", 3, 1, 1}, "nearest", "align_corners"));
         // NHWC: a pixel's channels are one vector (C 8), or scalars (C 5).
         Tensor h = g->input("h", dt, {"N", 8, 5, 6}, Layout::NHWC);
         g->output(g->resize(h, {1, 1, 2, 1.5}, "nearest", "half_pixel"));
         Tensor k = g->input("k", dt, {"N", 5, 5, 6}, Layout::NHWC);
         g->output(g->resize_to(k, {"N", 5, 3, 13}, "nearest", "half_pixel"));
         // 1-D and 3-D spatial; a symbolic spatial dim at an integer scale.
         g->output(g->resize(g->input("a", dt, {"N", 4, 13}), {1, 1, 2.5}));
         g->output(g->resize(g->input("b", dt, {2, 3, 3, 4, 5}), {1, 1, 2, 0.5, 1.4}, "nearest",
                             "asymmetric", "round_prefer_ceil"));
         g->output(g->resize(g->input("s", dt, {"N", 2, "H", 6}), {1, 1, 3, 2}));
         return g;
       },
       {{"x", {2, 3, 7, 9}},
        {"h", {2, 8, 5, 6}},
        {"k", {2, 5, 5, 6}},
        {"a", {2, 4, 13}},
        {"b", {2, 3, 3, 4, 5}},
        {"s", {2, 2, 5, 6}}}});
  v.push_back(
      {"resize_linear_" + d,
       [dt] {
         auto g = std::make_shared<Graph>("rlin");
         Tensor x = g->input("x", dt, {"N", 3, 7, 9});
         const char* coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"};
         for (const char* c : coords) {
           g->output(g->resize(x, {1, 1, 2, 2}, "linear", c));        // FCN-style
           g->output(g->resize_to(x, {"N", 3, 4, 13}, "linear", c));  // down and up
         }
         g->output(g->resize_to(x, {"N", 3, 1, 5}, "linear", "pytorch_half_pixel"));
         g->output(g->resize_to(g->exp(x), {"N", 3, 7, 20}, "linear"));  // prologue, H 1:1
         // NHWC: channel vectors (C 16), and scalars (C 3).
         Tensor h = g->input("h", dt, {"N", 16, 5, 6}, Layout::NHWC);
         g->output(g->resize(h, {1, 1, 2, 2}, "linear", "half_pixel"));
         g->output(g->resize(g->relu(h), {1, 1, 0.5, 1.5}, "linear", "align_corners"));
         Tensor k = g->input("k", dt, {"N", 3, 5, 6}, Layout::NHWC);
         g->output(g->resize_to(k, {"N", 3, 9, 4}, "linear", "half_pixel"));
         // Linear 1-D, trilinear, a symbolic spatial dim.
         g->output(g->resize(g->input("a", dt, {"N", 4, 13}), {1, 1, 2.5}, "linear"));
         g->output(g->resize_to(g->input("b", dt, {2, 3, 3, 4, 5}), {2, 3, 5, 3, 9}, "linear",
                                "align_corners"));
         g->output(g->resize(g->input("s", dt, {"N", 2, "H", 6}), {1, 1, 2, 3}, "linear",
                             "pytorch_half_pixel"));
         return g;
       },
       {{"x", {2, 3, 7, 9}},
        {"h", {2, 16, 5, 6}},
        {"k", {2, 3, 5, 6}},
        {"a", {2, 4, 13}},
        {"b", {2, 3, 3, 4, 5}},
        {"s", {2, 2, 5, 6}}}});
  return v;
}

}  // namespace kiln::test
