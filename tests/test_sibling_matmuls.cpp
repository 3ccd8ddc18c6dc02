// Sibling projections as one matmul (engine/passes/sibling_matmuls.cpp): HF's separate q, k and v
// projections of one input become one matmul whose result the attention reads as three slices;
// projections with an epilogue, of other inputs, by run-time weights or in f32 stay.
#include <gtest/gtest.h>

#include <memory>

#include "engine/passes/passes.hpp"
#include "kiln/graph.hpp"
#include "tests/count_ops.hpp"
#include "tests/same_values.hpp"

namespace kiln {
namespace {

using test::count_op;

Tensor weight(Graph& g, const char* name, Shape s, DType dt, uint64_t seed) {
  return g.constant_random(name, TensorDesc{dt, std::move(s), Layout::NCHW, {}}, "normal", 0, 0.5,
                           seed);
}

// x [N, 5, 16] -> q, k (no bias) and v projections split into 2 heads -> softmax(q k^T) v.
std::shared_ptr<Graph> qkv(DType dt, bool epilogue_on_v = false) {
  auto g = std::make_shared<Graph>("qkv");
  Tensor x = g->input("x", dt, {"N", 5, 16});
  Tensor q = g->matmul(x, weight(*g, "wq", {16, 8}, dt, 1), weight(*g, "bq", {8}, dt, 2));
  Tensor k = g->matmul(x, weight(*g, "wk", {16, 8}, dt, 3));
  Tensor v = g->matmul(x, weight(*g, "wv", {16, 8}, dt, 4), weight(*g, "bv", {8}, dt, 5));
  if (epilogue_on_v) v = g->relu(v);
  auto heads = [&](Tensor t) { return g->transpose(g->reshape(t, {"N", 5, 2, 4}), {0, 2, 1, 3}); };
  Tensor s = g->softmax(g->matmul(heads(q), heads(k), {}, false, true));
  g->output(g->matmul(s, heads(v)));
  return g;
}

TEST(SiblingMatmuls, QkvProjectionsAreOneMatmul) {
  for (DType dt : {DType::F16, DType::BF16}) {
    auto g = qkv(dt);
    Graph c = *g;
    std::vector<std::string> merged;
    EXPECT_EQ(merge_sibling_matmuls(c, &merged), 1);
    ASSERT_EQ(merged.size(), 1u);
    EXPECT_EQ(count_op(c, OpKind::Matmul), 3);  // the projection and the attention's two
    EXPECT_EQ(count_op(c, OpKind::Slice), 3);
    test::expect_same_values(*g, c);
  }
}

TEST(SiblingMatmuls, WhatCannotMergeStays) {
  {  // v's relu would lose its place in v's epilogue: q and k merge alone
    auto g = qkv(DType::F16, true);
    Graph c = *g;
    EXPECT_EQ(merge_sibling_matmuls(c), 1);
    EXPECT_EQ(count_op(c, OpKind::Matmul), 4);
    test::expect_same_values(*g, c);
  }
  // f32: no fused attention reads the slices in place
  EXPECT_FALSE(has_sibling_matmuls(*qkv(DType::F32)));
  {  // other inputs; run-time weights
    auto g = std::make_shared<Graph>("g");
    Tensor x = g->input("x", DType::F16, {"N", 4, 16});
    Tensor y = g->input("y", DType::F16, {"N", 4, 16});
    Tensor w = g->input("w", DType::F16, {16, 8});
    Tensor a = g->matmul(x, weight(*g, "a", {16, 8}, DType::F16, 1));
    Tensor b = g->matmul(y, weight(*g, "b", {16, 8}, DType::F16, 2));
    Tensor c = g->matmul(x, w);
    g->output(g->matmul(a, b, {}, false, true));
    g->output(g->matmul(c, b, {}, false, true));
    EXPECT_FALSE(has_sibling_matmuls(*g));
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Whisper's q: the projection scaled by a constant scalar is the projection by scaled weights
// (engine/passes/matmul_scales.cpp), which then merges with k and v.
TEST(MatmulScales, ScaledQueryFoldsThenMerges) {
  auto g = std::make_shared<Graph>("scaled_q");
  Tensor x = g->input("x", DType::F16, {"N", 5, 16});
  auto w = [&](const char* name, Shape s, uint64_t seed) {
    return g->constant_random(name, TensorDesc{DType::F16, std::move(s), Layout::NCHW, {}},
                              "normal", 0, 0.5, seed);
  };
  TensorDesc sd{DType::F16, {}, Layout::NCHW, {}};
  Tensor c = g->constant("scale", sd, HostTensor::from_f64(DType::F16, {}, {0.125}));
  Tensor q = g->mul(g->matmul(x, w("wq", {16, 8}, 1), w("bq", {8}, 2)), c);
  Tensor k = g->matmul(x, w("wk", {16, 8}, 3));
  Tensor v = g->matmul(x, w("wv", {16, 8}, 4), w("bv", {8}, 5));
  auto heads = [&](Tensor t) { return g->transpose(g->reshape(t, {"N", 5, 2, 4}), {0, 2, 1, 3}); };
  g->output(g->matmul(g->softmax(g->matmul(heads(q), heads(k), {}, false, true)), heads(v)));
  Graph f = *g;
  EXPECT_EQ(fold_matmul_scales(f), 1);
  EXPECT_EQ(test::count_op(f, OpKind::Mul), 0);
  EXPECT_EQ(merge_sibling_matmuls(f), 1);
  EXPECT_EQ(test::count_op(f, OpKind::Matmul), 3);
  test::expect_same_values(*g, f, 1e-2);  // the weights times 1/8 round once, not the products
}

}  // namespace
}  // namespace kiln
