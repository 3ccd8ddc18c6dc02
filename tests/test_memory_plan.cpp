// Arena planning by liveness: exact small cases, a randomized no-overlap property, and the
// graph-level arena from kernel specs.
#include <gtest/gtest.h>

#include <random>

#include "kiln/error.hpp"
#include "runtime/memory_plan.hpp"

using namespace kiln;

namespace {
bool overlap_in_time(const BufferRequest& a, const BufferRequest& b) {
  return a.first <= b.last && b.first <= a.last;
}
int64_t aligned(int64_t v) {
  return (std::max<int64_t>(v, 1) + 255) / 256 * 256;
}
}  // namespace

TEST(MemoryPlan, ChainReusesDeadBuffers) {
  // k0 writes A; k1 reads A writes B; k2 reads B writes C; k3 reads C.
  std::vector<BufferRequest> r = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}};
  MemoryPlan p = plan_memory(r);
  EXPECT_EQ(p.total, 3 * 1024);
  EXPECT_EQ(p.peak, 2 * 1024);
  EXPECT_EQ(p.offsets[0], p.offsets[2]);  // A is dead when C is born
  EXPECT_NE(p.offsets[0], p.offsets[1]);
}

TEST(MemoryPlan, LargestFirstAndFirstFitIntoGaps) {
  // Big (0..1) and Small2 (2..3) can share; Small1 (0..3) overlaps both.
  std::vector<BufferRequest> r = {{256, 0, 3}, {4096, 0, 1}, {2048, 2, 3}};
  MemoryPlan p = plan_memory(r);
  EXPECT_EQ(p.offsets[1], 0);     // largest placed first at 0
  EXPECT_EQ(p.offsets[0], 4096);  // overlaps it: after it
  EXPECT_EQ(p.offsets[2], 0);     // fits in the gap below the small one
  EXPECT_EQ(p.peak, 4096 + 256);
  EXPECT_EQ(p.total, 4096 + 2048 + 256);
}

TEST(MemoryPlan, AlignmentAndZeroSizes) {
  MemoryPlan p = plan_memory({{1, 0, 0}, {0, 0, 0}, {257, 0, 0}});
  for (int64_t o : p.offsets) EXPECT_EQ(o % 256, 0);
  EXPECT_EQ(p.total, 256 + 256 + 512);
  EXPECT_EQ(p.peak, p.total);  // all live together
  EXPECT_EQ(plan_memory({}).peak, 0);
}

TEST(MemoryPlan, RandomizedNeverOverlapsLiveBuffers) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    int n = 1 + static_cast<int>(rng() % 40);
    int steps = 1 + static_cast<int>(rng() % 20);
    std::vector<BufferRequest> r(n);
    for (auto& b : r) {
      b.bytes = static_cast<int64_t>(rng() % 100000);
      b.first = static_cast<int>(rng() % steps);
      b.last = b.first + static_cast<int>(rng() % 5);
    }
    MemoryPlan p = plan_memory(r);
    int64_t lower = 0;  // the most bytes live at one step: no plan can beat it
    for (int s = 0; s < steps + 5; ++s) {
      int64_t live = 0;
      for (const auto& b : r)
        if (b.first <= s && s <= b.last) live += aligned(b.bytes);
      lower = std::max(lower, live);
    }
    EXPECT_GE(p.peak, lower);
    EXPECT_LE(p.peak, p.total);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(p.offsets[i] % 256, 0);
      EXPECT_LE(p.offsets[i] + aligned(r[i].bytes), p.peak);
      for (int j = i + 1; j < n; ++j) {
        if (!overlap_in_time(r[i], r[j])) continue;
        bool disjoint = p.offsets[i] + aligned(r[i].bytes) <= p.offsets[j] ||
                        p.offsets[j] + aligned(r[j].bytes) <= p.offsets[i];
        ASSERT_TRUE(disjoint) << "trial " << trial << " buffers " << i << " and " << j;
      }
    }
  }
}

TEST(MemoryPlan, TensorBytesEvaluatesSymbolsAndStrides) {
  TensorDesc d{DType::F16, {"N", 64, 7, 7}, Layout::NHWC, {}};
  EXPECT_EQ(tensor_bytes(d, {{"N", 3}}), 3 * 64 * 7 * 7 * 2);
  TensorDesc s{DType::F32, {4, 8}, Layout::Strided, {16, 1}};  // padded rows
  EXPECT_EQ(tensor_bytes(s, {}), (3 * 16 + 7 + 1) * 4);
  EXPECT_THROW(tensor_bytes(d, {}), Error);  // N unbound: user error
}

TEST(MemoryPlan, ArenaFromKernelSpecs) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 256});
  Tensor a = g.relu(x);
  Tensor b = g.exp(a);
  Tensor c = g.neg(b);
  Tensor y = g.add(c, x);
  g.output(y);
  auto spec = [](std::vector<int> tensors) {
    KernelSpec k;
    k.name = "k";
    for (int t : tensors) k.args.push_back({KernelArg::Kind::Tensor, t, Dim(1)});
    k.args.push_back({KernelArg::Kind::Int, -1, Dim("N")});
    return k;
  };
  // Unfused: x->a, a->b, b->c, (c,x)->y.
  std::vector<KernelSpec> ks = {spec({a.id, x.id}), spec({b.id, a.id}), spec({c.id, b.id}),
                                spec({y.id, c.id, x.id})};
  ArenaPlan p = plan_arena(g, ks, {{"N", 10}});
  ASSERT_EQ(p.offset.size(), 3u);  // a, b, c: not x (input) nor y (output)
  EXPECT_FALSE(p.offset.count(x.id));
  EXPECT_FALSE(p.offset.count(y.id));
  EXPECT_EQ(p.total, 3 * 10240);
  EXPECT_EQ(p.peak, 2 * 10240);
  EXPECT_EQ(p.offset.at(a.id), p.offset.at(c.id));
  // Other bindings, same kernels: sizes scale, no recompile needed.
  EXPECT_EQ(plan_arena(g, ks, {{"N", 1}}).peak, 2 * 1024);
}
