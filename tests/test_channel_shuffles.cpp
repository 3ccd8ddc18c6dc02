// Channel shuffles (engine/passes/channel_shuffles.cpp): ShuffleNet's reshape / transpose / reshape
// over the channels of a channels-last map is one channels-last gather (one per half where only
// the halves are read), the convs after it read
// channels-last maps (no row-major conv kernels), the rewritten graph computes what the original
// does, and what must stay stays.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "codegen/kernel_spec.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/graph.hpp"
#include "tests/same_values.hpp"
#include "tests/shuffle_graphs.hpp"

namespace kiln {
namespace {

int count_op(const Graph& g, OpKind op) {
  return static_cast<int>(
      std::count_if(g.nodes().begin(), g.nodes().end(), [&](const Node& n) { return n.op == op; }));
}

TEST(ChannelShuffles, ShuffleIsOneChannelsLastGather) {
  auto g = test::shuffle_units(16);
  std::string note;
  auto f = apply_engine_passes(g, true, &note);
  EXPECT_NE(note.find("channel shuffles as one channels-last gather"), std::string::npos) << note;
  // each unit's halves, each gathered from the unshuffled map: no shuffled map, no slice copies
  EXPECT_EQ(count_op(*f, OpKind::Gather), 4);
  EXPECT_EQ(count_op(*f, OpKind::Slice), 0);
  EXPECT_EQ(count_op(*f, OpKind::Transpose), 0);
  for (const Node& n : f->nodes())  // every conv reads and writes channels-last maps
    if (n.op == OpKind::Conv2d) {
      EXPECT_EQ(f->tensor(n.inputs[0]).desc.layout, Layout::NHWC) << n.name;
      EXPECT_EQ(f->tensor(n.outputs[0]).desc.layout, Layout::NHWC) << n.name;
    }
  test::expect_same_values(*g, *f);
}

// The layout decisions pinned: the sm_90 kernels of two ShuffleNet units of 116 channels (stage 3's
// width), every conv channels-last on tensor cores, each half one gather.
TEST(ChannelShuffles, GoldenKernels) {
  auto f = apply_engine_passes(test::shuffle_units(116), true, nullptr);
  CodegenOptions co;
  co.sm = 90;
  co.arch_specific = true;  // what the Engine builds on an H200 (sm_90a)
  std::vector<std::string> names;
  for (const KernelSpec& k : generate_kernels(*f, plan_fusion(*f), co)) names.push_back(k.name);
  const std::vector<std::string> want = {"conv_f16_nhwc_1x1_c4_wg64x64x64_s3_relu",
                                         "copy_f16_gather",
                                         "copy_f16_gather_g2",
                                         "conv_f16_nhwc_1x1_cscalar_wg64x64x64_s3_relu",
                                         "copy_f16_concat",
                                         "copy_f16_gather_g5",
                                         "copy_f16_gather_g6",
                                         "conv_f16_nhwc_1x1_cscalar_wg64x64x64_s3_relu_g7",
                                         "copy_f16_concat_g8",
                                         "conv_f16_nhwc_1x1_c4_wg64x64x64_s3_relu_g9",
                                         "window_f16_r30_global_avgpool"};
  EXPECT_EQ(names, want);
}

TEST(ChannelShuffles, OddGroupSizesAndThreeGroups) {
  auto g = std::make_shared<Graph>("g3");
  Tensor x = g->input("x", DType::F32, {"N", 21, 3, 4}, Layout::NHWC);
  Tensor s =
      g->reshape(g->transpose(g->reshape(x, {"N", 3, 7, 3, 4}), {0, 2, 1, 3, 4}), {"N", 21, 3, 4});
  Tensor w = g->constant_random("w", TensorDesc{DType::F32, {5, 21, 1, 1}, Layout::NHWC, {}},
                                "normal", 0, 0.3, 3);
  g->output(test::pooled(*g, g->relu(g->conv2d(s, w)), 5));
  Graph c = *g;
  EXPECT_EQ(channel_shuffles_as_gathers(c), 1);
  test::expect_same_values(*g, c);
}

TEST(ChannelShuffles, WhatMustStayStays) {
  {  // the second shuffled map is a graph output, row-major as the caller expects: the first
     // unit's shuffle only
    auto g = test::shuffle_units(16, DType::F16, true);
    Graph c = *g;
    EXPECT_EQ(channel_shuffles_as_gathers(c), 1);
    EXPECT_EQ(c.tensor(c.outputs()[0]).desc.layout, Layout::NCHW);
    test::expect_same_values(*g, c);
  }
  {  // row-major maps: nothing to keep channels-last
    Graph g;
    Tensor x = g.input("x", DType::F16, {"N", 8, 4, 4});
    g.output(g.relu(
        g.reshape(g.transpose(g.reshape(x, {"N", 2, 4, 4, 4}), {0, 2, 1, 3, 4}), {"N", 8, 4, 4})));
    EXPECT_EQ(channel_shuffles_as_gathers(g), 0);
  }
  {  // another permutation
    Graph g;
    Tensor x = g.input("x", DType::F16, {"N", 8, 4, 4}, Layout::NHWC);
    g.output(g.relu(
        g.reshape(g.transpose(g.reshape(x, {"N", 2, 4, 4, 4}), {0, 1, 2, 4, 3}), {"N", 8, 4, 4})));
    EXPECT_EQ(channel_shuffles_as_gathers(g), 0);
  }
  {  // the transposed map read by something else too
    Graph g;
    Tensor x = g.input("x", DType::F16, {"N", 8, 4, 4}, Layout::NHWC);
    Tensor t = g.transpose(g.reshape(x, {"N", 2, 4, 4, 4}), {0, 2, 1, 3, 4});
    g.output(g.relu(g.reshape(t, {"N", 8, 4, 4})));
    g.output(g.relu(t));
    EXPECT_EQ(channel_shuffles_as_gathers(g), 0);
  }
}

}  // namespace
}  // namespace kiln
