// Sibling projections as one matmul (engine/passes/sibling_matmuls.cpp): HF's separate q, k and v
// projections of one input become one matmul whose result the three read as slices; projections
// with an epilogue, of other inputs or by run-time weights stay.
#include <gtest/gtest.h>

#include <memory>

#include "engine/passes/passes.hpp"
#include "kiln/graph.hpp"
#include "tests/count_ops.hpp"
#include "tests/same_values.hpp"

namespace kiln {
namespace {

using test::count_op;

Tensor weight(Graph& g, const char* name, Shape s, uint64_t seed) {
  return g.constant_random(name, TensorDesc{DType::F32, std::move(s), Layout::NCHW, {}}, "normal",
                           0, 0.5, seed);
}

// x [N, 5, 16] -> q, k (no bias) and v projections, each split into heads.
std::shared_ptr<Graph> qkv(bool epilogue_on_v = false) {
  auto g = std::make_shared<Graph>("qkv");
  Tensor x = g->input("x", DType::F32, {"N", 5, 16});
  Tensor q = g->matmul(x, weight(*g, "wq", {16, 8}, 1), weight(*g, "bq", {8}, 2));
  Tensor k = g->matmul(x, weight(*g, "wk", {16, 8}, 3));
  Tensor v = g->matmul(x, weight(*g, "wv", {16, 4}, 4), weight(*g, "bv", {4}, 5));
  if (epilogue_on_v) v = g->relu(v);
  g->output(g->transpose(g->reshape(q, {"N", 5, 2, 4}), {0, 2, 1, 3}));
  g->output(g->transpose(g->reshape(k, {"N", 5, 2, 4}), {0, 2, 1, 3}));
  g->output(g->reshape(v, {"N", 5, 2, 2}));
  return g;
}

TEST(SiblingMatmuls, QkvProjectionsAreOneMatmul) {
  auto g = qkv();
  Graph c = *g;
  std::vector<std::string> merged;
  EXPECT_EQ(merge_sibling_matmuls(c, &merged), 1);
  ASSERT_EQ(merged.size(), 1u);
  EXPECT_EQ(count_op(c, OpKind::Matmul), 1);
  EXPECT_EQ(count_op(c, OpKind::Slice), 3);
  test::expect_same_values(*g, c);
}

TEST(SiblingMatmuls, WhatCannotMergeStays) {
  {  // v's relu would lose its place in v's epilogue: q and k merge alone
    auto g = qkv(true);
    Graph c = *g;
    EXPECT_EQ(merge_sibling_matmuls(c), 1);
    EXPECT_EQ(count_op(c, OpKind::Matmul), 2);
    test::expect_same_values(*g, c);
  }
  {  // other inputs; run-time weights
    auto g = std::make_shared<Graph>("g");
    Tensor x = g->input("x", DType::F32, {"N", 16});
    Tensor y = g->input("y", DType::F32, {"N", 16});
    Tensor w = g->input("w", DType::F32, {16, 8});
    g->output(g->reshape(g->matmul(x, weight(*g, "a", {16, 8}, 1)), {"N", 2, 4}));
    g->output(g->reshape(g->matmul(y, weight(*g, "b", {16, 8}, 2)), {"N", 2, 4}));
    g->output(g->reshape(g->matmul(x, w), {"N", 2, 4}));
    EXPECT_FALSE(has_sibling_matmuls(*g));
  }
}

}  // namespace
}  // namespace kiln
