// Gathers rearranged along their axis (engine/passes/gather_permutes.cpp): Swin's roll (a gather
// of the map's flattened positions) and the window partition after it are one gather; a
// rearrangement that moves the other dims stays.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/passes/passes.hpp"
#include "kiln/graph.hpp"
#include "tests/count_ops.hpp"
#include "tests/same_values.hpp"

namespace kiln {
namespace {

using test::count_op;

// x [N, 36, 4]: the 6 x 6 map rolled by (1, 2) as one gather of positions, then partitioned
// into 3 x 3 windows: [N, 2, 3, 2, 3, 4] -> perm -> [N, 2, 2, 3, 3, 4] -> [4N, 9, 4], a relu.
std::shared_ptr<Graph> rolled_partition(std::vector<int64_t> perm) {
  auto g = std::make_shared<Graph>("rolled_partition");
  Tensor x = g->input("x", DType::F32, {"N", 36, 4});
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 6; ++j) idx.push_back(((i + 1) % 6) * 6 + (j + 2) % 6);
  TensorDesc d;
  d.dtype = DType::I64;
  d.shape = {Dim(36)};
  Tensor k = g->constant("positions", d, HostTensor::from_i64(DType::I64, {36}, idx));
  Tensor r = g->reshape(g->gather(x, k, 1), {"N", 2, 3, 2, 3, 4});
  Tensor t = g->transpose(r, std::move(perm));
  g->output(g->relu(g->reshape(t, {Dim("N") * Dim(4), 9, 4})));
  return g;
}

TEST(GatherPermutes, RollAndWindowPartitionAreOneGather) {
  auto g = rolled_partition({0, 1, 3, 2, 4, 5});
  Graph c = *g;
  EXPECT_EQ(gathers_through_permutes(c), 1);
  EXPECT_EQ(count_op(c, OpKind::Transpose), 0);
  EXPECT_EQ(count_op(c, OpKind::Gather), 1);
  test::expect_same_values(*g, c);
}

TEST(GatherPermutes, RearrangementsOfOtherDimsStay) {
  // the channels move: not a rearrangement of positions alone
  auto g = rolled_partition({0, 1, 3, 2, 5, 4});
  EXPECT_FALSE(has_permuted_gather(*g));
}

}  // namespace
}  // namespace kiln
