// L2 normalizations as row norms (engine/passes/l2_normalizations.cpp): the exported
// div(x, expand(clamp(cast(reduce_l2(x)), eps))) over the last dim of f16 rows becomes
// rmsnorm(x, eps^2 / D) / sqrt(D) — one row-norm kernel — with the same values (zero rows
// included); other forms stay.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>

#include "engine/passes/passes.hpp"
#include "kiln/reference.hpp"
#include "tests/count_ops.hpp"
#include "tests/same_values.hpp"

namespace kiln {
namespace {

// x [N, 3, 5, 32] / max(|x|_2 over the last dim, eps), as torch's F.normalize exports it
// (`exported`: the norm cast to f32 before the clamp and expanded before the div).
std::shared_ptr<Graph> normalize(DType dt, double eps, bool exported, int64_t axis = -1) {
  auto g = std::make_shared<Graph>("normalize");
  Tensor x = g->input("x", dt, {"N", 3, 5, 32});
  Tensor n = g->reduce("reduce_l2", x, {axis}, true);
  if (exported) n = g->cast(n, DType::F32);
  n = g->clamp(n, eps, INFINITY);
  if (exported) n = g->expand(n, {"N", 3, 5, 32});
  g->output(g->relu(g->div(x, n)));
  return g;
}

TEST(L2Normalizations, ExportedAndBareFormsBecomeOneRowNorm) {
  for (bool exported : {true, false}) {
    SCOPED_TRACE(exported ? "exported" : "bare");
    auto g = normalize(DType::F16, 1e-12, exported);
    ASSERT_TRUE(has_l2_normalization(*g));
    Graph f = *g;
    EXPECT_EQ(l2_normalizations_as_rmsnorms(f), 1);
    EXPECT_EQ(test::count_op(f, OpKind::Rmsnorm), 1);
    EXPECT_EQ(test::count_op(f, OpKind::ReduceL2), 0);
    EXPECT_EQ(test::count_op(f, OpKind::Div), 0);
    test::expect_same_values(*g, f, 2e-3);  // the norm is no longer rounded to f16 first
  }
}

TEST(L2Normalizations, ZeroRowsStayZero) {
  auto g = normalize(DType::F16, 1e-12, true);
  Graph f = *g;
  ASSERT_EQ(l2_normalizations_as_rmsnorms(f), 1);
  std::vector<double> v(2 * 3 * 5 * 32);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (i / 32) % 4 == 1 ? 0.0 : std::sin(0.37 * i) * 3;
  std::map<std::string, HostTensor> in{{"x", HostTensor::from_f64(DType::F16, {2, 3, 5, 32}, v)}};
  const std::vector<double> a = run_reference(*g, in).begin()->second.to_f64();
  const std::vector<double> b = run_reference(f, in).begin()->second.to_f64();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_FALSE(std::isnan(b[i])) << i;
    if ((i / 32) % 4 == 1) EXPECT_EQ(b[i], 0.0) << i;
    EXPECT_NEAR(a[i], b[i], 2e-3 * (1 + std::abs(a[i]))) << i;
  }
}

TEST(L2Normalizations, OtherFormsStay) {
  // f32 rows (norms near eps are representable), a large eps, another axis
  for (auto g : {normalize(DType::F32, 1e-12, true), normalize(DType::F16, 1e-4, true),
                 normalize(DType::F16, 1e-12, false, 2)})
    EXPECT_FALSE(has_l2_normalization(*g));
}

}  // namespace
}  // namespace kiln
