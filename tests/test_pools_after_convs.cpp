// Average pools before narrowing 1x1 convs (engine/passes/pools_after_convs.cpp): Inception's
// pool branch averages the conv's fewer channels, its bias added after the pool; everything
// else stays.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "engine/passes/passes.hpp"
#include "kiln/graph.hpp"
#include "tests/count_ops.hpp"
#include "tests/same_values.hpp"

namespace kiln {
namespace {

using test::count_op;

// x [N, 16, 7, 7] channels-last -> avgpool 3x3 stride 1 pad 1 -> conv r x r to `k` channels
// (+ bias) -> relu.
std::shared_ptr<Graph> pool_branch(int64_t k, int r, bool include_pad, bool bias = true) {
  auto g = std::make_shared<Graph>("pool_branch");
  Tensor x = g->input("x", DType::F32, {"N", 16, 7, 7}, Layout::NHWC);
  Pool2dOptions po;
  po.kernel = {3, 3};
  po.stride = {1, 1};
  po.padding = {1, 1};
  Tensor p = g->avgpool2d(x, po);
  if (include_pad)
    g->mutable_nodes()[g->tensor(p.id).producer].attrs["count_include_pad"] = AttrValue(int64_t{1});
  auto cst = [&](const char* name, Shape s) {
    return g->constant_random(name, TensorDesc{DType::F32, std::move(s), Layout::NCHW, {}},
                              "normal", 0, 0.5, 7);
  };
  Conv2dOptions co;
  co.padding = {r / 2, r / 2};
  Tensor y = g->conv2d(p, cst("w", {k, 16, r, r}), bias ? cst("b", {k}) : Tensor{}, co);
  g->output(g->relu(y));
  return g;
}

TEST(PoolsAfterConvs, InceptionPoolBranchAveragesTheConvsChannels) {
  for (bool include_pad : {false, true})
    for (bool bias : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "include_pad " << include_pad << " bias " << bias);
      auto g = pool_branch(4, 1, include_pad, bias);
      Graph c = *g;
      EXPECT_EQ(pools_after_convs(c), 1);
      // the conv reads x, the pool reads the conv
      const Node& pool = *std::find_if(c.nodes().begin(), c.nodes().end(),
                                       [](const Node& n) { return n.op == OpKind::Avgpool2d; });
      EXPECT_EQ(c.nodes()[c.tensor(pool.inputs[0]).producer].op, OpKind::Conv2d);
      EXPECT_EQ(count_op(c, OpKind::Add), bias ? 1 : 0);
      test::expect_same_values(*g, c, 1e-5);
    }
}

TEST(PoolsAfterConvs, OtherPoolsAndConvsStay) {
  EXPECT_FALSE(has_pool_before_narrowing_conv(*pool_branch(4, 3, false)));   // a 3x3 conv
  EXPECT_FALSE(has_pool_before_narrowing_conv(*pool_branch(32, 1, false)));  // it widens
  auto g = pool_branch(4, 1, false);
  const Node& pool = *std::find_if(g->nodes().begin(), g->nodes().end(),
                                   [](const Node& n) { return n.op == OpKind::Avgpool2d; });
  g->output(Tensor{pool.outputs[0]});  // the pool's result is needed too
  EXPECT_FALSE(has_pool_before_narrowing_conv(*g));
}

}  // namespace
}  // namespace kiln
