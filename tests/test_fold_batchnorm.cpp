// Batchnorm folding into conv2d / matmul: the graph loses its batchnorm and computes the same
// values (CPU reference before and after, on fresh random inputs).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "engine/passes/passes.hpp"
#include "kiln/engine.hpp"
#include "kiln/graph.hpp"
#include "kiln/io.hpp"
#include "kiln/reference.hpp"
#include "tests/count_ops.hpp"
#include "tests/random_input.hpp"
#include "tests/test_paths.hpp"

using namespace kiln;

using test::count_op;

namespace {

using test::random_input;  // no exact zeros

// Max relative error (against max |ref|) between two tensors.
double max_rel(const HostTensor& a, const HostTensor& b) {
  auto x = a.to_f64(), y = b.to_f64();
  EXPECT_EQ(x.size(), y.size());
  double scale = 1e-30, err = 0;
  for (size_t i = 0; i < x.size(); ++i) scale = std::max(scale, std::abs(x[i]));
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) return INFINITY;
    err = std::max(err, std::abs(x[i] - y[i]));
  }
  return err / scale;
}

Tensor vec_const(Graph& g, const std::string& name, DType dt, int64_t n, double mean, double std,
                 uint64_t seed, const std::string& dist = "normal") {
  return g.constant_random(name, {dt, {n}, Layout::NCHW, {}}, dist, mean, std, seed);
}

Graph conv_bn(DType dt, bool bias, bool relu_after) {
  Graph g("convbn");
  Tensor x = g.input("x", dt, {"N", 8, 9, 7}, Layout::NHWC);
  Tensor w = g.constant_random("w", {dt, {12, 8, 3, 3}, Layout::NHWC, {}}, "normal", 0, 0.3, 1);
  Tensor b = bias ? vec_const(g, "b", dt, 12, 0, 0.5, 2) : Tensor{};
  Conv2dOptions o;
  o.padding = {1, 1};
  o.stride = {2, 1};
  Tensor y = g.conv2d(x, w, b, o);
  Tensor gamma = vec_const(g, "gamma", dt, 12, 1, 0.2, 3);
  Tensor beta = vec_const(g, "beta", dt, 12, 0, 0.2, 4);
  Tensor mean = vec_const(g, "mean", dt, 12, 0, 0.3, 5);
  Tensor var = vec_const(g, "var", dt, 12, 0.5, 2.0, 6, "uniform");
  Tensor z = g.batchnorm(y, gamma, beta, mean, var, 1e-3);
  if (relu_after) z = g.relu(z);
  g.output(z);
  return g;
}

void expect_same_outputs(const Graph& before, const Graph& after,
                         const std::map<std::string, HostTensor>& in, double tol) {
  auto r0 = run_reference(before, in), r1 = run_reference(after, in);
  ASSERT_EQ(r0.size(), r1.size());
  for (auto& [name, t] : r0) {
    ASSERT_TRUE(r1.count(name)) << name;
    EXPECT_LE(max_rel(t, r1.at(name)), tol) << name;
  }
}

}  // namespace

TEST(FoldBatchnorm, ConvWithAndWithoutBias) {
  for (bool bias : {false, true}) {
    SCOPED_TRACE(bias ? "bias" : "no bias");
    Graph g = conv_bn(DType::F32, bias, true);
    Graph f = g;
    EXPECT_EQ(fold_batchnorm(f), 1);
    EXPECT_EQ(count_op(f, OpKind::Batchnorm), 0);
    EXPECT_EQ(count_op(f, OpKind::Conv2d), 1);
    for (const auto& n : f.nodes())
      if (n.op == OpKind::Conv2d) {
        ASSERT_EQ(n.inputs.size(), 3u);
        EXPECT_EQ(f.tensor(n.inputs[1]).role, TensorRole::Constant);
        EXPECT_EQ(f.tensor(n.inputs[2]).role, TensorRole::Constant);
      }
    // The output keeps its name.
    EXPECT_EQ(f.tensor(f.outputs()[0]).name, g.tensor(g.outputs()[0]).name);
    std::map<std::string, HostTensor> in{
        {"x", random_input(DType::F32, {3, 8, 9, 7}, Layout::NHWC, 11)}};
    expect_same_outputs(g, f, in, 1e-5);
  }
}

TEST(FoldBatchnorm, HalfPrecisionWithinTolerance) {
  Graph g = conv_bn(DType::F16, true, false);
  Graph f = g;
  EXPECT_EQ(fold_batchnorm(f), 1);
  std::map<std::string, HostTensor> in{
      {"x", random_input(DType::F16, {2, 8, 9, 7}, Layout::NHWC, 5)}};
  expect_same_outputs(g, f, in, 1e-2);
}

TEST(FoldBatchnorm, MatmulOverLastDim) {
  for (bool tb : {false, true}) {
    Graph g("mmbn");
    Tensor a = g.input("a", DType::F32, {"M", 16});
    Shape ws = tb ? Shape{10, 16} : Shape{16, 10};
    Tensor w = g.constant_random("w", {DType::F32, ws, Layout::NCHW, {}}, "normal", 0, 0.5, 1);
    Tensor y = g.matmul(a, w, {}, false, tb);
    Tensor z = g.batchnorm(y, vec_const(g, "g", DType::F32, 10, 1, 0.3, 2),
                           vec_const(g, "b", DType::F32, 10, 0, 0.3, 3),
                           vec_const(g, "m", DType::F32, 10, 0, 0.3, 4),
                           vec_const(g, "v", DType::F32, 10, 0.2, 3.0, 5, "uniform"));
    g.output(g.silu(z));
    Graph f = g;
    EXPECT_EQ(fold_batchnorm(f), 1);
    EXPECT_EQ(count_op(f, OpKind::Batchnorm), 0);
    std::map<std::string, HostTensor> in{{"a", random_input(DType::F32, {5, 16}, Layout::NCHW, 9)}};
    expect_same_outputs(g, f, in, 1e-5);
  }
}

TEST(FoldBatchnorm, ChainedBatchnormsFoldTwice) {
  Graph c("chain2");
  Tensor x = c.input("x", DType::F32, {"N", 8, 9, 7}, Layout::NHWC);
  Tensor w =
      c.constant_random("w", {DType::F32, {12, 8, 3, 3}, Layout::NHWC, {}}, "normal", 0, 0.3, 1);
  Tensor y = c.conv2d(x, w);
  for (int i = 0; i < 2; ++i)
    y = c.batchnorm(
        y, vec_const(c, fmt::format("g{}", i), DType::F32, 12, 1, 0.2, 20 + i),
        vec_const(c, fmt::format("b{}", i), DType::F32, 12, 0, 0.2, 30 + i),
        vec_const(c, fmt::format("m{}", i), DType::F32, 12, 0, 0.2, 40 + i),
        vec_const(c, fmt::format("v{}", i), DType::F32, 12, 0.5, 1.5, 50 + i, "uniform"));
  c.output(y);
  Graph cf = c;
  EXPECT_EQ(fold_batchnorm(cf), 2);
  EXPECT_EQ(count_op(cf, OpKind::Batchnorm), 0);
  std::map<std::string, HostTensor> in{
      {"x", random_input(DType::F32, {2, 8, 9, 7}, Layout::NHWC, 3)}};
  expect_same_outputs(c, cf, in, 1e-5);
}

TEST(FoldBatchnorm, LeavesUnfoldableGraphsAlone) {
  // Conv output also used elsewhere.
  {
    Graph g("shared");
    Tensor x = g.input("x", DType::F32, {1, 4, 5, 5});
    Tensor w =
        g.constant_random("w", {DType::F32, {4, 4, 1, 1}, Layout::NCHW, {}}, "normal", 0, 1, 1);
    Tensor y = g.conv2d(x, w);
    Tensor z = g.batchnorm(y, vec_const(g, "g", DType::F32, 4, 1, 0.1, 2),
                           vec_const(g, "b", DType::F32, 4, 0, 0.1, 3),
                           vec_const(g, "m", DType::F32, 4, 0, 0.1, 4),
                           vec_const(g, "v", DType::F32, 4, 1, 2, 5, "uniform"));
    g.output(g.add(z, y));
    EXPECT_EQ(fold_batchnorm(g), 0);
    EXPECT_EQ(count_op(g, OpKind::Batchnorm), 1);
  }
  // Weights are a run-time input.
  {
    Graph g("dynw");
    Tensor x = g.input("x", DType::F32, {1, 4, 5, 5});
    Tensor w = g.input("w", DType::F32, {4, 4, 1, 1});
    Tensor z = g.batchnorm(g.conv2d(x, w), vec_const(g, "g", DType::F32, 4, 1, 0.1, 2),
                           vec_const(g, "b", DType::F32, 4, 0, 0.1, 3),
                           vec_const(g, "m", DType::F32, 4, 0, 0.1, 4),
                           vec_const(g, "v", DType::F32, 4, 1, 2, 5, "uniform"));
    g.output(z);
    EXPECT_EQ(fold_batchnorm(g), 0);
  }
  // Batchnorm statistics are inputs.
  {
    Graph g("dynstats");
    Tensor x = g.input("x", DType::F32, {1, 4, 5, 5});
    Tensor w =
        g.constant_random("w", {DType::F32, {4, 4, 1, 1}, Layout::NCHW, {}}, "normal", 0, 1, 1);
    Tensor m = g.input("m", DType::F32, {4});
    Tensor z = g.batchnorm(g.conv2d(x, w), vec_const(g, "g", DType::F32, 4, 1, 0.1, 2),
                           vec_const(g, "b", DType::F32, 4, 0, 0.1, 3), m,
                           vec_const(g, "v", DType::F32, 4, 1, 2, 5, "uniform"));
    g.output(z);
    EXPECT_EQ(fold_batchnorm(g), 0);
  }
  // Batched matmul: batchnorm's channel is M, not foldable into the weights.
  {
    Graph g("bmm");
    Tensor a = g.input("a", DType::F32, {2, 3, 4});
    Tensor w = g.constant_random("w", {DType::F32, {4, 5}, Layout::NCHW, {}}, "normal", 0, 1, 1);
    Tensor z = g.batchnorm(g.matmul(a, w), vec_const(g, "g", DType::F32, 3, 1, 0.1, 2),
                           vec_const(g, "b", DType::F32, 3, 0, 0.1, 3),
                           vec_const(g, "m", DType::F32, 3, 0, 0.1, 4),
                           vec_const(g, "v", DType::F32, 3, 1, 2, 5, "uniform"));
    g.output(z);
    EXPECT_EQ(fold_batchnorm(g), 0);
  }
}

// Engine::compile (and `kiln plan|emit|explain`) fold before planning: the bottleneck example's
// three batchnorms leave no batchnorm math in its kernels; without fusion, or with nothing to
// fold, the graph is passed through untouched (no copy).
TEST(FoldBatchnorm, EngineFoldsBeforePlanning) {
  auto g = std::make_shared<const Graph>(load_graph_file(
      std::string(kiln::testing::source_dir()) + "/examples/graphs/resnet50_bottleneck.json"));
  ASSERT_EQ(count_op(*g, OpKind::Batchnorm), 3);
  std::string note;
  std::shared_ptr<const Graph> f = apply_engine_passes(g, true, &note);
  EXPECT_EQ(count_op(*f, OpKind::Batchnorm), 0);
  EXPECT_NE(note.find("3 batchnorms folded"), std::string::npos) << note;
  EXPECT_EQ(apply_engine_passes(g, false).get(), g.get());
  EXPECT_EQ(apply_engine_passes(f, true).get(), f.get());

  EngineOptions o;
  o.load_kernels = false;
  o.arch = "sm_90";
  o.disk_cache = false;
  Engine eng(o);
  CompiledGraph cg = eng.compile(*g);
  ASSERT_EQ(cg.kernels().size(), 3u);
  for (const KernelInfo& k : cg.kernels())
    EXPECT_EQ(k.name.find("batchnorm"), std::string::npos) << k.name;
  // The compiled graph still answers to the original's inputs and outputs.
  auto shapes = cg.output_shapes({{"N", 2}});
  EXPECT_EQ(shapes.size(), 1u);
  EXPECT_TRUE(shapes.count(g->tensor(g->outputs()[0]).name));
}

namespace {

// x -> batchnorm -> conv2d (kxk, `pad`, `groups`), MaxViT's pre-norm before its 1x1 conv; a 1x1
// conv's input x is also the residual (read by the add), as in an MBConv.
Graph bn_conv(int64_t k, int64_t pad, int64_t groups, bool bias) {
  Graph g("bnconv");
  Tensor x = g.input("x", DType::F32, {"N", 8, 9, 7}, Layout::NHWC);
  Tensor z = g.batchnorm(x, vec_const(g, "gamma", DType::F32, 8, 1, 0.2, 3),
                         vec_const(g, "beta", DType::F32, 8, 0, 0.2, 4),
                         vec_const(g, "mean", DType::F32, 8, 0, 0.3, 5),
                         vec_const(g, "var", DType::F32, 8, 0.5, 2.0, 6, "uniform"), 1e-3);
  Tensor w = g.constant_random("w", {DType::F32, {8, 8 / groups, k, k}, Layout::NHWC, {}}, "normal",
                               0, 0.3, 1);
  Conv2dOptions o;
  o.padding = {pad, pad};
  o.groups = groups;
  Tensor y = g.conv2d(z, w, bias ? vec_const(g, "b", DType::F32, 8, 0, 0.5, 2) : Tensor{}, o);
  g.output(k == 1 ? g.add(y, x) : y);
  return g;
}

}  // namespace

TEST(FoldBatchnorm, IntoTheConvAfterIt) {
  for (int64_t k : {1, 3})
    for (bool bias : {false, true}) {
      SCOPED_TRACE(fmt::format("{}x{} bias {}", k, k, bias));
      Graph g = bn_conv(k, 0, 1, bias);
      Graph f = g;
      EXPECT_TRUE(has_batchnorm_next_to_contraction(g));
      EXPECT_EQ(fold_batchnorm(f), 1);
      EXPECT_EQ(count_op(f, OpKind::Batchnorm), 0);
      std::map<std::string, HostTensor> in{
          {"x", random_input(DType::F32, {2, 8, 9, 7}, Layout::NHWC, 7)}};
      expect_same_outputs(g, f, in, 1e-6);
    }
}

TEST(FoldBatchnorm, NotIntoPaddedOrGroupedConvs) {
  // a padded tap reads 0, not the batchnorm of 0; groups: not handled
  for (auto [pad, groups] : {std::pair<int64_t, int64_t>{1, 1}, {0, 2}}) {
    Graph g = bn_conv(3, pad, groups, true);
    EXPECT_FALSE(has_batchnorm_next_to_contraction(g));
    EXPECT_EQ(fold_batchnorm(g), 0);
  }
  // the batchnorm's output read by something else too
  Graph g("shared");
  Tensor x = g.input("x", DType::F32, {"N", 8, 9, 7}, Layout::NHWC);
  Tensor z = g.batchnorm(x, vec_const(g, "gamma", DType::F32, 8, 1, 0.2, 3),
                         vec_const(g, "beta", DType::F32, 8, 0, 0.2, 4),
                         vec_const(g, "mean", DType::F32, 8, 0, 0.3, 5),
                         vec_const(g, "var", DType::F32, 8, 0.5, 2.0, 6, "uniform"));
  Tensor w =
      g.constant_random("w", {DType::F32, {8, 8, 1, 1}, Layout::NHWC, {}}, "normal", 0, 0.3, 1);
  g.output(g.add(g.conv2d(z, w), z));
  EXPECT_EQ(fold_batchnorm(g), 0);
}
