// Attention in the batch shape of its mask (engine/passes/attention_batch_splits.cpp): Swin's
// shifted-window attention (scores reshaped around the window mask) becomes one chain the fused
// kernel takes, its bias and mask one constant; the rewritten graph computes what the original
// does; what must stay stays.
#include <gtest/gtest.h>

#include <string>

#include "codegen/kernel_spec.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/graph.hpp"
#include "tests/count_ops.hpp"
#include "tests/same_values.hpp"
#include "tests/window_attention_graphs.hpp"

namespace kiln {
namespace {

using test::count_op;

TEST(AttentionBatchSplits, SwinWindowMaskIsOneFusedAttention) {
  auto g = test::window_attention(4, 2, 16, 32, DType::F32);
  Graph c = *g;
  EXPECT_EQ(split_attention_batches(c), 1);
  EXPECT_EQ(count_op(c, OpKind::Add), 1);  // the bias and the mask summed
  test::expect_same_values(*g, c, 1e-6);   // the sum rounds once, not twice
  // f16: one attention kernel (then the graph's relu)
  auto f = apply_engine_passes(test::window_attention(4, 2, 16, 32), true, nullptr);
  CodegenOptions co;
  co.sm = 90;
  co.arch_specific = true;
  std::vector<std::string> names;
  for (const KernelSpec& k : generate_kernels(*f, plan_fusion(*f), co)) names.push_back(k.name);
  const std::vector<std::string> want = {"attention_f16_d32_q64_maskadd_s16x16",
                                         "pointwise_f16_relu"};
  EXPECT_EQ(names, want);
}

// q scaled by a per-head tensor: the mul stays before the split (the kernel making q applies it),
// only a scalar scale is rebuilt after it for the attention to take.
TEST(AttentionBatchSplits, PerHeadScaleStaysBeforeTheSplit) {
  auto g = test::window_attention(4, 2, 16, 32, DType::F32, true);
  Graph c = *g;
  EXPECT_EQ(split_attention_batches(c), 1);
  ASSERT_EQ(count_op(c, OpKind::Mul), 1);
  for (const Node& n : c.nodes())
    if (n.op == OpKind::Mul) {
      const int q = n.inputs[0] == c.find("scale") ? n.inputs[1] : n.inputs[0];
      EXPECT_EQ(c.tensor(q).desc.shape, (Shape{Dim("N") * Dim(4), Dim(2), Dim(16), Dim(32)}));
    }
  test::expect_same_values(*g, c, 1e-6);
}

TEST(AttentionBatchSplits, WhatMustStayStays) {
  {  // the attention's result is a graph output
    auto g = std::make_shared<Graph>("g");
    Tensor q = g->input("q", DType::F32, {8, 2, 4, 8});
    Tensor s = g->matmul(q, q, {}, false, true);
    Tensor m = g->reshape(g->relu(g->reshape(s, {2, 4, 2, 4, 4})), {8, 2, 4, 4});
    g->output(g->matmul(g->softmax(m), q));
    EXPECT_EQ(split_attention_batches(*g), 0);
  }
  {  // the merge back is not the split's inverse
    auto g = std::make_shared<Graph>("g");
    Tensor q = g->input("q", DType::F32, {8, 2, 4, 8});
    Tensor s = g->matmul(q, q, {}, false, true);
    Tensor m = g->reshape(g->relu(g->reshape(s, {2, 4, 2, 4, 4})), {2, 8, 4, 4});
    g->output(g->relu(g->matmul(g->softmax(m), g->reshape(q, {2, 8, 4, 8}))));
    EXPECT_EQ(split_attention_batches(*g), 0);
  }
  {  // the scores are read by something else too
    auto g = std::make_shared<Graph>("g");
    Tensor q = g->input("q", DType::F32, {8, 2, 4, 8});
    Tensor s = g->matmul(q, q, {}, false, true);
    Tensor m = g->reshape(g->relu(g->reshape(s, {2, 4, 2, 4, 4})), {8, 2, 4, 4});
    g->output(g->relu(g->matmul(g->softmax(m), q)));
    g->output(s);
    EXPECT_EQ(split_attention_batches(*g), 0);
  }
}

}  // namespace
}  // namespace kiln
