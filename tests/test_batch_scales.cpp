// Per-batch scales of matmul results moved onto the left operand (engine/passes/batch_scales.cpp):
// (A @ B) * s = (A * s) @ B for s constant along the result's last two dims (Swin V2's per-head
// logit scale), and nothing else moved.
#include <gtest/gtest.h>

#include <memory>

#include "engine/passes/passes.hpp"
#include "tests/count_ops.hpp"
#include "tests/same_values.hpp"

namespace kiln {
namespace {

// softmax(a [N, 3, 5, 8] @ b [N, 3, 8, 6] times s of `sshape`) (s a run-time input: any tensor
// moves).
std::shared_ptr<Graph> scaled_scores(Shape sshape, bool bias = false, DType dt = DType::F32) {
  auto g = std::make_shared<Graph>("scaled_scores");
  Tensor a = g->input("a", dt, {"N", 3, 5, 8});
  Tensor b = g->input("b", dt, {"N", 3, 8, 6});
  Tensor s = g->input("s", dt, std::move(sshape));
  Tensor bb =
      bias ? g->constant_random("bias", TensorDesc{dt, {6}, Layout::NCHW, {}}, "normal", 0, 1, 3)
           : Tensor{};
  g->output(g->softmax(g->mul(g->matmul(a, b, bb), s), -1));
  return g;
}

TEST(BatchScales, PerHeadScaleMovesOntoTheLeftOperand) {
  for (Shape s : {Shape{3, 1, 1}, Shape{"N", 3, 1, 1}, Shape{"N", 1, 1, 1}}) {
    SCOPED_TRACE(shape_str(s));
    auto g = scaled_scores(s);
    Graph f = *g;
    ASSERT_TRUE(has_batch_scaled_matmul(f));
    EXPECT_EQ(scales_before_matmuls(f), 1);
    // the mul reads a and feeds the matmul
    const Node* mm = nullptr;
    for (const Node& n : f.nodes())
      if (n.op == OpKind::Matmul) mm = &n;
    ASSERT_NE(mm, nullptr);
    const int p = f.tensor(mm->inputs[0]).producer;
    ASSERT_GE(p, 0);
    EXPECT_EQ(f.nodes()[p].op, OpKind::Mul);
    EXPECT_EQ(f.nodes()[p].inputs[0], f.find("a"));
    EXPECT_EQ(f.nodes()[f.tensor(f.outputs()[0]).producer].inputs[0], mm->outputs[0]);
    test::expect_same_values(*g, f, 1e-6);  // f32: a * s rounds once more
  }
}

TEST(BatchScales, OthersStay) {
  // a scalar (the attention's own scale step), a factor varying along the keys or the queries, a
  // matmul with a bias (the bias would be scaled too)
  for (auto g : {scaled_scores({1}), scaled_scores({3, 1, 6}), scaled_scores({3, 5, 1}),
                 scaled_scores({3, 1, 1}, true)}) {
    EXPECT_FALSE(has_batch_scaled_matmul(*g));
    Graph f = *g;
    EXPECT_EQ(scales_before_matmuls(f), 0);
  }
  // the scores read elsewhere too (the matmul's result must exist), or the scaled scores a graph
  // output (it keeps its tensor)
  for (int out : {0, 1}) {
    auto g = scaled_scores({3, 1, 1});
    ASSERT_EQ(g->nodes()[out].op, out == 0 ? OpKind::Matmul : OpKind::Mul);
    g->output(Tensor{g->nodes()[out].outputs[0]});
    EXPECT_FALSE(has_batch_scaled_matmul(*g));
  }
}

}  // namespace
}  // namespace kiln
