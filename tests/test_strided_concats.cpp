// Concats of strided slices that take each element of one tensor once
// (engine/passes/strided_concats.cpp): Swin's patch merging is one transpose; other concats of
// slices stay.
#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "engine/passes/passes.hpp"
#include "kiln/graph.hpp"
#include "tests/count_ops.hpp"
#include "tests/same_values.hpp"

namespace kiln {
namespace {

using test::count_op;

// x [N, 8, 6, 4] row-major; the concat along C of x[:, a::2, b::2] for each (a, b) of `parts`,
// as torchvision's export writes them (a slice along H, then one along W), then a relu.
std::shared_ptr<Graph> patch_merge(const std::vector<std::pair<int, int>>& parts) {
  auto g = std::make_shared<Graph>("patch_merge");
  Tensor x = g->input("x", DType::F32, {"N", 8, 6, 4});
  std::vector<Tensor> xs;
  for (auto [a, b] : parts) {
    Tensor rows = g->slice(x, {a}, {8}, {1}, {2});
    xs.push_back(g->slice(rows, {b}, {6}, {2}, {2}));
  }
  g->output(g->relu(g->concat(xs, -1)));
  return g;
}

TEST(StridedConcats, SwinPatchMergingIsOneTranspose) {
  // torchvision's order (x0, x1, x2, x3: the row start varies fastest), and the other one
  for (const auto& parts : {std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {0, 1}, {1, 1}},
                            std::vector<std::pair<int, int>>{{0, 0}, {0, 1}, {1, 0}, {1, 1}}}) {
    auto g = patch_merge(parts);
    Graph c = *g;
    std::vector<std::string> names;
    EXPECT_EQ(strided_concats_as_transposes(c, &names), 1);
    EXPECT_EQ(count_op(c, OpKind::Slice), 0);
    EXPECT_EQ(count_op(c, OpKind::Concat), 0);
    EXPECT_EQ(count_op(c, OpKind::Transpose), 1);
    test::expect_same_values(*g, c);
  }
}

TEST(StridedConcats, OtherConcatsOfSlicesStay) {
  // three of the four parts; a part twice; parts in no mixed-radix order
  for (const auto& parts : {std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {0, 1}},
                            std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {1, 0}, {1, 1}},
                            std::vector<std::pair<int, int>>{{1, 1}, {1, 0}, {0, 1}, {0, 0}}}) {
    auto g = patch_merge(parts);
    EXPECT_FALSE(has_strided_concat(*g));
  }
  {  // a crop, not a stride
    auto g = std::make_shared<Graph>("g");
    Tensor x = g->input("x", DType::F32, {"N", 8, 6, 4});
    Tensor a = g->slice(x, {0}, {4}, {1});
    Tensor b = g->slice(x, {4}, {8}, {1});
    g->output(g->relu(g->concat({a, b}, -1)));
    EXPECT_FALSE(has_strided_concat(*g));
  }
}

}  // namespace
}  // namespace kiln
