// Composed movement chains (engine/passes/movement_chains.cpp): a chain of reshapes and
// transposes is one transpose between views; MaxViT's departitions write channels-last maps so
// its MBConv convs run channels-last; the rewritten graph computes what the original does; what
// must stay stays.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "codegen/kernel_spec.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/graph.hpp"
#include "tests/maxvit_graphs.hpp"
#include "tests/same_values.hpp"

namespace kiln {
namespace {

// The copy kernels of the plan of `g` after the engine's passes, and whether every conv reads
// and writes channels-last maps.
struct Planned {
  int copies = 0;
  bool convs_channels_last = true;
  std::vector<std::string> kernels;
};

Planned planned(std::shared_ptr<const Graph> g) {
  auto f = apply_engine_passes(g, true, nullptr);
  Planned p;
  for (const Node& n : f->nodes())
    if (n.op == OpKind::Conv2d)
      p.convs_channels_last = p.convs_channels_last &&
                              f->tensor(n.inputs[0]).desc.layout == Layout::NHWC &&
                              f->tensor(n.outputs[0]).desc.layout == Layout::NHWC;
  CodegenOptions co;
  co.sm = 90;
  co.arch_specific = true;
  for (const KernelSpec& k : generate_kernels(*f, plan_fusion(*f), co)) {
    p.kernels.push_back(k.name);
    p.copies += k.name.rfind("copy_", 0) == 0;
  }
  return p;
}

TEST(MovementChains, MaxVitLayersRunChannelsLast) {
  auto g = test::maxvit_layers(16, 2, DType::F32);
  Graph c = *g;
  std::vector<std::string> notes;
  // per layer: the window partition (from a channels-last map), the window departition (its
  // output channels-last for the grid partition after it: the two factorizations of the side,
  // 2 x 7 and 7 x 2, do not compose), the grid partition with its swap, and the grid departition
  // (to a channels-last map)
  EXPECT_EQ(compose_movement_chains(c, &notes), 8) << ::testing::PrintToString(notes);
  test::expect_same_values(*g, c);
  const Planned p = planned(g);
  EXPECT_TRUE(p.convs_channels_last);
  EXPECT_EQ(p.copies, 8) << ::testing::PrintToString(p.kernels);  // 4 a layer
  for (const std::string& k : p.kernels) EXPECT_EQ(k.find("nchw"), std::string::npos) << k;
}

// As built, the layers' partitions are 6 transposes a layer (a copy kernel each, and a reshape
// of a channels-last map is one too) and the second layer's convs read the row-major maps the
// departitions write: the figures above are the pass's doing.
TEST(MovementChains, AsBuiltTheMapsAreRowMajor) {
  auto g = test::maxvit_layers(16, 2, DType::F16);
  int transposes = 0, row_major_convs = 0;
  for (const Node& n : g->nodes()) {
    transposes += n.op == OpKind::Transpose;
    row_major_convs += n.op == OpKind::Conv2d && g->tensor(n.inputs[0]).desc.layout == Layout::NCHW;
  }
  EXPECT_EQ(transposes, 12);
  EXPECT_EQ(row_major_convs, 4);  // the second layer's three and the head
}

// The layout decisions pinned: the sm_90a kernels of one layer of 64 channels, 2 x 2 windows.
TEST(MovementChains, GoldenKernels) {
  auto g = std::make_shared<Graph>("maxvit1");
  Tensor x = g->input("x", DType::F16, {"N", 64, 14, 14}, Layout::NHWC);
  g->output(test::maxvit_layer(*g, x, DType::F16, 64, 2, 300));
  // the pre-norm batchnorm folded into the first 1x1 conv (fold_batchnorm)
  const std::vector<std::string> want = {"conv_f16_nhwc_1x1_wg128x64x64_s3_tma_bias_gelu",
                                         "conv_f16_nhwc_dw3x3_t14x16c32_gelu",
                                         "conv_f16_nhwc_1x1_wg64x64x64_s3_tma_add",
                                         "copy_f16_transpose",
                                         "rownorm_f16_r64_layernorm",
                                         "matmul_f16_wg128x64x64_s3_tma_add",
                                         "copy_f16_transpose_g10",
                                         "copy_f16_transpose_g13",
                                         "rownorm_f16_r64_layernorm_g15",
                                         "matmul_f16_wg128x64x64_s3_tma_add_g16",
                                         "copy_f16_transpose_g19"};
  EXPECT_EQ(planned(g).kernels, want);
}

TEST(MovementChains, ComposesWithSymbolsAndSplitsAtomsOnce) {
  // [N, 6, 20] -> [N, 6, 4, 5] -> transpose -> [N, 5, 4, 6] -> [N, 20, 6] -> transpose
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 6, 20});
  Tensor t = g.transpose(
      g.reshape(g.transpose(g.reshape(x, {"N", 6, 4, 5}), {0, 3, 2, 1}), {"N", 20, 6}), {0, 2, 1});
  g.output(g.relu(t));
  Graph c = g;
  EXPECT_EQ(compose_movement_chains(c), 1);
  int transposes = 0;
  for (const Node& n : c.nodes()) transposes += n.op == OpKind::Transpose;
  EXPECT_EQ(transposes, 1);
  test::expect_same_values(g, c);
}

TEST(MovementChains, WhatMustStayStays) {
  {  // one transpose: nothing to compose
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N", 6, 20});
    g.output(
        g.relu(g.reshape(g.transpose(g.reshape(x, {"N", 6, 4, 5}), {0, 1, 3, 2}), {"N", 6, 20})));
    EXPECT_EQ(compose_movement_chains(g), 0);
  }
  {  // the chain's output is a graph output (the caller's buffer)
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N", 6, 20});
    g.output(g.transpose(g.transpose(g.reshape(x, {"N", 6, 4, 5}), {0, 2, 1, 3}), {0, 1, 3, 2}));
    EXPECT_EQ(compose_movement_chains(g), 0);
  }
  {  // a matmul reads the chain's output (a strided operand the loaders take as it is)
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N", 6, 20});
    Tensor w =
        g.constant_random("w", TensorDesc{DType::F32, {6, 3}, Layout::NCHW, {}}, "normal", 0, 1, 1);
    Tensor t = g.transpose(g.transpose(g.reshape(x, {"N", 6, 4, 5}), {0, 2, 1, 3}), {0, 1, 3, 2});
    g.output(g.matmul(t, w));
    EXPECT_EQ(compose_movement_chains(g), 0);
  }
  {  // a tensor between the transposes is read by something else
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N", 6, 20});
    Tensor a = g.transpose(g.reshape(x, {"N", 6, 4, 5}), {0, 2, 1, 3});
    g.output(g.relu(g.transpose(a, {0, 1, 3, 2})));
    g.output(g.relu(a));
    EXPECT_EQ(compose_movement_chains(g), 0);
  }
  {  // a graph output's layout would change: the departition stays row-major, composed anyway
    auto g = std::make_shared<Graph>("out");
    Tensor x = g->input("x", DType::F32, {"N", 8, 14, 14}, Layout::NHWC);
    Tensor w = g->reshape(g->transpose(g->reshape(x, {"N", 8, 2, 7, 2, 7}), {0, 2, 4, 3, 5, 1}),
                          {"N", 4, 49, 8});
    Tensor d =
        g->reshape(g->transpose(g->reshape(g->relu(w), {"N", 2, 2, 7, 7, 8}), {0, 5, 1, 3, 2, 4}),
                   {"N", 8, 14, 14});
    g->output(g->relu(d));  // row-major, as declared
    Graph c = *g;
    EXPECT_EQ(compose_movement_chains(c), 1);  // the partition only
    EXPECT_EQ(c.tensor(c.outputs()[0]).desc.layout, Layout::NCHW);
    test::expect_same_values(*g, c);
  }
}

}  // namespace
}  // namespace kiln
