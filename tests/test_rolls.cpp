// Rolls as gathers (engine/passes/rolls.cpp): torch.roll's slices and concat are one gather,
// two rolls along neighbouring axes one gather of both; the rewritten graph computes what the
// original does; what must stay stays.
#include <gtest/gtest.h>

#include <string>

#include "codegen/kernel_spec.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/graph.hpp"
#include "tests/count_ops.hpp"
#include "tests/roll_graphs.hpp"
#include "tests/same_values.hpp"

namespace kiln {
namespace {

using test::count_op;

TEST(Rolls, OneAxisIsOneGather) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 5, 7, 3});
  g.output(g.relu(test::roll(g, x, 2, 2, 7)));
  Graph c = g;
  EXPECT_EQ(rolls_as_gathers(c), 1);
  EXPECT_EQ(count_op(c, OpKind::Gather), 1);
  EXPECT_EQ(count_op(c, OpKind::Slice), 0);
  EXPECT_EQ(count_op(c, OpKind::Concat), 0);
  test::expect_same_values(g, c);
}

TEST(Rolls, SwinShiftIsTwoGathers) {
  auto g = test::swin_shift(8, DType::F32);
  Graph c = *g;
  std::vector<std::string> notes;
  EXPECT_EQ(rolls_as_gathers(c, &notes), 2) << ::testing::PrintToString(notes);
  EXPECT_EQ(count_op(c, OpKind::Gather), 2);
  EXPECT_EQ(count_op(c, OpKind::Concat), 0);
  test::expect_same_values(*g, c);
  // planned: the roll and the partition as one gather (engine/passes/gather_permutes.cpp), the
  // norm, the departition transpose, the roll back and the add
  auto f = apply_engine_passes(test::swin_shift(64), true, nullptr);
  CodegenOptions co;
  co.sm = 90;
  co.arch_specific = true;
  std::vector<std::string> names;
  for (const KernelSpec& k : generate_kernels(*f, plan_fusion(*f), co)) names.push_back(k.name);
  const std::vector<std::string> want = {"copy_f16_gather", "rownorm_f16_r64_layernorm",
                                         "copy_f16_transpose", "copy_f16_gather_g9",
                                         "pointwise_f16_add"};
  EXPECT_EQ(names, want);
}

TEST(Rolls, WhatMustStayStays) {
  {  // slices of two tensors
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N", 6, 4});
    Tensor y = g.input("y", DType::F32, {"N", 6, 4});
    g.output(g.concat({g.slice(x, {2}, {6}, {1}), g.slice(y, {0}, {2}, {1})}, 1));
    EXPECT_EQ(rolls_as_gathers(g), 0);
  }
  {  // the head is not what the tail leaves out
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N", 6, 4});
    g.output(g.concat({g.slice(x, {2}, {6}, {1}), g.slice(x, {0}, {3}, {1})}, 1));
    EXPECT_EQ(rolls_as_gathers(g), 0);
  }
  {  // a slice read by something else too
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N", 6, 4});
    Tensor a = g.slice(x, {2}, {6}, {1});
    g.output(g.concat({a, g.slice(x, {0}, {2}, {1})}, 1));
    g.output(g.relu(a));
    EXPECT_EQ(rolls_as_gathers(g), 0);
  }
  {  // a channels-last map: its positions are not rows of a row-major view
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N", 4, 6, 5}, Layout::NHWC);
    g.output(g.relu(test::roll(g, x, 1, 2, 6)));
    EXPECT_EQ(rolls_as_gathers(g), 0);
  }
}

}  // namespace
}  // namespace kiln
