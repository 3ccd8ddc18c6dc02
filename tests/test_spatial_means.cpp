// The Engine pass that makes spatial means global average pools (engine/passes/passes.hpp:
// spatial_means_as_pools), and the reshape of a channels-last [N, C, 1, 1] as a view: the
// squeeze-excite block as core ATen writes it (mean over {-1, -2} keeping dims, then a view).
#include <gtest/gtest.h>

#include <cmath>

#include "engine/passes/passes.hpp"
#include "kiln/engine.hpp"
#include "kiln/graph.hpp"
#include "kiln/reference.hpp"
#include "tests/count_ops.hpp"
#include "tests/random_input.hpp"

using namespace kiln;
using test::random_input;

using test::count_op;

namespace {

// x * sigmoid(conv1x1(reshape(mean(x)))) over an NHWC f16 map.
std::shared_ptr<Graph> squeeze_excite(std::vector<int64_t> axes, bool keepdims) {
  auto g = std::make_shared<Graph>("se");
  Tensor x = g->input("x", DType::F16, {"N", 32, 14, 14}, Layout::NHWC);
  Tensor w =
      g->constant_random("w", {DType::F16, {32, 32, 1, 1}, Layout::NCHW, {}}, "normal", 0, 0.2, 1);
  Tensor m = g->reduce("reduce_mean", x, axes, keepdims);
  Tensor r = g->reshape(m, {"N", 32, 1, 1});
  g->output(g->mul(x, g->sigmoid(g->conv2d(r, w))));
  return g;
}

}  // namespace

TEST(SpatialMeans, BecomeGlobalPoolsAndTheirReshapeAView) {
  auto g = squeeze_excite({-1, -2}, true);
  std::string note;
  std::shared_ptr<const Graph> f = apply_engine_passes(g, true, &note);
  EXPECT_NE(note.find("spatial means as global average pools: "), std::string::npos) << note;
  EXPECT_EQ(count_op(*f, OpKind::ReduceMean), 0);
  EXPECT_EQ(count_op(*f, OpKind::GlobalAvgpool), 1);
  // The pooled [N, 32, 1, 1] channels-last map is in row-major order: the reshape is a view.
  EXPECT_NE(note.find(" (reshape)"), std::string::npos) << note;
  std::map<std::string, HostTensor> in{
      {"x", random_input(DType::F16, {3, 32, 14, 14}, Layout::NHWC, 7)}};
  auto want = run_reference(*g, in), got = run_reference(*f, in);
  for (const auto& [name, t] : want) {
    auto a = t.to_f64(), b = got.at(name).to_f64();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-2 * (1 + std::abs(a[i]))) << i;
  }
  // Planned for sm_90 (no GPU: compiled, not loaded): a global pool kernel, no reduction and no
  // copy kernel for the reshape.
  EngineOptions o;
  o.arch = "sm_90";
  o.load_kernels = false;
  o.disk_cache = false;
  std::string names;
  for (const KernelInfo& k : Engine(o).compile(*g).kernels()) names += k.name + " ";
  EXPECT_NE(names.find("global_avgpool"), std::string::npos) << names;
  EXPECT_EQ(names.find("reduction"), std::string::npos) << names;
  EXPECT_EQ(names.find("copy"), std::string::npos) << names;
}

TEST(SpatialMeans, OtherMeansStayReductions) {
  for (auto [axes, keep] :
       {std::pair<std::vector<int64_t>, bool>{{2, 3}, false}, {{1, 2}, true}, {{1, 2, 3}, true}}) {
    auto g = std::make_shared<Graph>("m");
    Tensor x = g->input("x", DType::F32, {2, 8, 5, 5}, Layout::NHWC);
    g->output(g->reduce("reduce_mean", x, axes, keep));
    std::shared_ptr<const Graph> f = apply_engine_passes(g, true);
    EXPECT_EQ(count_op(*f, OpKind::ReduceMean), 1) << axes.size() << keep;
  }
}
