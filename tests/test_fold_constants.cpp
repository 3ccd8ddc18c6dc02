// Constant folding (engine/api/fold_constants.cpp): a node of constants is a constant, made by the
// CPU reference when its data is first used; bounded in size; never with fusion off or for a graph
// output; the result computes the same values.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>

#include "engine/api/fold_constants.hpp"
#include "kiln/error.hpp"
#include "kiln/lowering.hpp"
#include "kiln/reference.hpp"
#include "tests/count_ops.hpp"
#include "tests/same_values.hpp"

namespace kiln {
namespace {

Tensor normal(Graph& g, const std::string& name, Shape s, uint64_t seed) {
  return g.constant_random(name, TensorDesc{DType::F32, std::move(s), Layout::NCHW, {}}, "normal",
                           0, 1, seed);
}

// x [N, 4, 6] + 16 sigmoid(table [4, 3] @ w [3, 6]) (a position-bias-like constant subgraph).
std::shared_ptr<Graph> biased(bool bias_is_output = false) {
  auto g = std::make_shared<Graph>("biased");
  Tensor x = g->input("x", DType::F32, {"N", 4, 6});
  Tensor sixteen = g->constant("sixteen", TensorDesc{DType::F32, {}, Layout::NCHW, {}},
                               HostTensor::from_f64(DType::F32, {}, {16.0}));
  Tensor bias = g->mul(
      g->sigmoid(g->matmul(normal(*g, "table", {4, 3}, 1), normal(*g, "w", {3, 6}, 2))), sixteen);
  g->output(g->add(x, bias));
  if (bias_is_output) g->output(bias);
  return g;
}

TEST(FoldConstants, ConstantSubgraphBecomesOneConstant) {
  auto g = biased();
  std::string note;
  std::shared_ptr<const Graph> f = fold_constants(g, &note);
  ASSERT_NE(f, g);
  EXPECT_EQ(test::count_op(*f, OpKind::Add), 1);
  EXPECT_EQ(test::count_op(*f, OpKind::Matmul), 0);
  EXPECT_EQ(test::count_op(*f, OpKind::Sigmoid), 0);
  EXPECT_EQ(f->nodes().size(), 1u);
  EXPECT_NE(note.find("constant subgraphs folded (3 nodes)"), std::string::npos) << note;
  test::expect_same_values(*g, *f);  // the reference made the constant: the same bits
  // the Engine's lowering folds it: one kernel
  const Lowering l = lower_graph(*g);
  EXPECT_EQ(l.kernels.size(), 1u);
  EXPECT_NE(l.passes_note.find("constant subgraphs folded"), std::string::npos);
}

TEST(FoldConstants, NothingWithoutFusionOrForAGraphOutput) {
  LoweringOptions o;
  o.fusion = false;
  EXPECT_EQ(lower_graph(*biased(), o).passes_note.find("folded"), std::string::npos);
  // the bias is a graph output: its node stays, what only feeds it folds
  auto g = biased(true);
  std::shared_ptr<const Graph> f = fold_constants(g, nullptr);
  EXPECT_EQ(test::count_op(*f, OpKind::Mul), 1);
  EXPECT_EQ(test::count_op(*f, OpKind::Matmul), 0);
  test::expect_same_values(*g, *f);
}

TEST(FoldConstants, LargeResultsStayKernels) {
  // 2^21 elements: more than a folded result may hold
  auto g = std::make_shared<Graph>("large");
  Tensor x = g->input("x", DType::F32, {"N", 2048, 1024});
  g->output(g->add(x, g->relu(normal(*g, "c", {2048, 1024}, 3))));
  EXPECT_EQ(fold_constants(g, nullptr), g);
}

// A chain of constant ops folds to a bounded depth (the data of a folded constant is made by
// recursion through the chain): the rest runs as kernels, with the same values.
TEST(FoldConstants, LongChainsFoldToABoundedDepth) {
  auto g = std::make_shared<Graph>("chain");
  Tensor x = g->input("x", DType::F32, {"N", 8});
  Tensor c = normal(*g, "c", {8}, 5);
  for (int i = 0; i < 300; ++i) c = g->tanh(c);
  g->output(g->add(x, c));
  std::string note;
  std::shared_ptr<const Graph> f = fold_constants(g, &note);
  EXPECT_NE(note.find("(64 nodes)"), std::string::npos) << note;
  EXPECT_EQ(test::count_op(*f, OpKind::Tanh), 300 - 64);
  test::expect_same_values(*g, *f);
}

// A folded node that fails (a constant gather out of range) plans, and its error reaches the
// first use of the data as a user error naming the graph and the node.
TEST(FoldConstants, AFailingNodeFailsWhereItsDataIsUsed) {
  auto g = std::make_shared<Graph>("bad_lookup");
  Tensor x = g->input("x", DType::F32, {"N", 4});
  Tensor idx = g->constant("idx", TensorDesc{DType::I64, {1}, Layout::NCHW, {}},
                           HostTensor::from_i64(DType::I64, {1}, {7}));
  g->output(g->add(x, g->gather(normal(*g, "table", {3, 4}, 4), idx, 0)));
  std::shared_ptr<const Graph> f = fold_constants(g, nullptr);
  ASSERT_NE(f, g);
  try {
    run_reference(*f, {{"x", HostTensor::zeros(DType::F32, {2, 4})}});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::User);
    const std::string w = e.what();
    EXPECT_NE(w.find("bad_lookup"), std::string::npos) << w;
    EXPECT_NE(w.find("index out of range"), std::string::npos) << w;
  }
}

TEST(FoldConstants, DataMadeOnFirstUse) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto g = std::make_shared<Graph>("lazy");
  Tensor x = g->input("x", DType::F32, {"N", 8});
  Tensor c = g->constant_deferred("c", TensorDesc{DType::F32, {8}, Layout::NCHW, {}}, [calls] {
    ++*calls;
    return HostTensor::from_f64(DType::F32, {8}, {-1, 2, -3, 4, -5, 6, -7, 8});
  });
  g->output(g->add(x, g->relu(c)));
  std::shared_ptr<const Graph> f = fold_constants(g, nullptr);
  const Lowering l = lower_graph(*g);  // planning and codegen read no constant data here
  EXPECT_EQ(*calls, 0);
  EXPECT_EQ(l.kernels.size(), 1u);
  test::expect_same_values(*g, *f);
  EXPECT_GE(*calls, 1);
}

}  // namespace
}  // namespace kiln
