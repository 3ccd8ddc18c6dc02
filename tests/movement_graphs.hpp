// Graphs of the byte-moving movement ops (concat, split, slice, expand, tile, depth/space, pad
// modes, trilu), shared by the CPU codegen tests (tests/test_movement_ops.cpp: every kernel
// compiles with NVRTC) and the GPU op harness (tests/gpu/test_ops_gpu.cpp: every kernel against
// the CPU reference). Each graph covers the vector path (an innermost memory dim a multiple of
// the vector width) and the scalar one, symbolic dims, and elementwise neighbours.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln::test {

struct MovementGraph {
  std::string name;
  std::function<std::shared_ptr<Graph>()> build;
  std::map<std::string, std::vector<int64_t>> inputs;  // concrete shapes for a run
};

inline std::vector<MovementGraph> movement_graphs(DType dt) {
  const std::string d = dtype_name(dt);
  std::vector<MovementGraph> v;
  v.push_back(
      {"concat_" + d,
       [dt] {
         auto g = std::make_shared<Graph>("concat");
         Tensor a = g->input("a", dt, {"N", 3, 5, 7}), b = g->input("b", dt, {"N", 5, 5, 7});
         g->output(g->concat({a, g->relu(b)}, 1));  // channels, scalar path
         Tensor c = g->input("c", dt, {"N", 3, 5, 8}, Layout::NHWC);
         Tensor e = g->input("e", dt, {"N", 5, 5, 8}, Layout::NHWC);
         g->output(g->exp(g->concat({c, e}, 1)));  // NHWC channels: 8 = vectors
         Tensor f = g->input("f", dt, {"M", 4, 8}), h = g->input("h", dt, {2, 4, 8});
         g->output(g->concat({f, h, f}, 0));  // symbolic offsets along the axis
         g->output(g->concat({f, f}, -1));    // the innermost dim: lanes from both
         return g;
       },
       {{"a", {2, 3, 5, 7}},
        {"b", {2, 5, 5, 7}},
        {"c", {2, 3, 5, 8}},
        {"e", {2, 5, 5, 8}},
        {"f", {3, 4, 8}},
        {"h", {2, 4, 8}}}});
  v.push_back({"slice_split_" + d,
               [dt] {
                 auto g = std::make_shared<Graph>("slice");
                 Tensor x = g->input("x", dt, {"N", 6, 9, 10});
                 g->output(g->slice(x, {1, -1}, {8, -100}, {2, 3}, {2, -3}));  // steps, clamps
                 g->output(g->slice(g->neg(x), {-4}, {1000}, {1}));            // prologue
                 Tensor y = g->input("y", dt, {"M", 4, 32});
                 g->output(g->slice(y, {8}, {24}, {2}));  // 16 innermost: vectors
                 std::vector<Tensor> parts = g->split(y, 1, {1, 3});
                 g->output(parts[0]);
                 g->output(g->relu(parts[1]));
                 return g;
               },
               {{"x", {2, 6, 9, 10}}, {"y", {3, 4, 32}}}});
  v.push_back({"expand_tile_" + d,
               [dt] {
                 auto g = std::make_shared<Graph>("expand");
                 Tensor x = g->input("x", dt, {3, 1, 5});
                 g->output(g->expand(x, {2, 1, 4, 1}));  // both ways: [2, 3, 4, 5]
                 Tensor z = g->input("z", dt, {"N", 1});
                 g->output(g->expand(z, {"N", 16}));  // a broadcast row: vectors
                 g->output(g->tile(x, {2, 3, 1}));
                 g->output(g->tile(z, {2, 8}));
                 return g;
               },
               {{"x", {3, 1, 5}}, {"z", {3, 1}}}});
  v.push_back({"depth_space_" + d,
               [dt] {
                 auto g = std::make_shared<Graph>("d2s");
                 Tensor x = g->input("x", dt, {"N", 8, 3, 5});
                 g->output(g->depth_to_space(x, 2, "DCR"));
                 g->output(g->depth_to_space(x, 2, "CRD"));
                 Tensor y = g->input("y", dt, {"N", 3, 4, 6});
                 g->output(g->space_to_depth(y, 2));
                 return g;
               },
               {{"x", {2, 8, 3, 5}}, {"y", {2, 3, 4, 6}}}});
  v.push_back(
      {"pad_modes_trilu_" + d,
       [dt] {
         auto g = std::make_shared<Graph>("padmode");
         Tensor x = g->input("x", dt, {"N", 3, 5, 7});
         auto mode = [&](std::vector<int64_t> p, const char* m) {
           return g->add_node1("pad", {x}, {{"pads", std::move(p)}, {"mode", std::string(m)}});
         };
         g->output(mode({0, 0, 2, 3, 0, 0, 4, 6}, "reflect"));
         g->output(mode({1, 1, 2, 3, 0, 2, 5, 9}, "edge"));
         Tensor n = g->input("n", dt, {"N", 4, 5, 7}, Layout::NHWC);
         g->output(g->add_node1("pad", {n},  // NHWC channels 4 -> 8: vectors
                                {{"pads", std::vector<int64_t>{0, 0, 1, 0, 0, 4, 3, 0}},
                                 {"mode", std::string("edge")}}));
         g->output(g->trilu(g->input("t", dt, {"M", 5, 7}), true, 1));
         Tensor s = g->input("s", dt, {16, 16});
         g->output(g->trilu(s, false, -2));
         g->output(g->trilu(g->sigmoid(s), true, 0));  // prologue
         return g;
       },
       {{"x", {2, 3, 5, 7}}, {"n", {2, 4, 5, 7}}, {"t", {3, 5, 7}}, {"s", {16, 16}}}});
  return v;
}

}  // namespace kiln::test
