// The CTA-to-sequence mapping of codegen/device/kiln_attention_varlen.cuh run on the CPU (its
// device code compiled as host C++): every query row of every sequence is covered by exactly one
// CTA of the grid the emitter launches (floor(Tq / BQ) + B + 1), for many random mixes of lengths
// including empty sequences; bad offsets (negative, decreasing, past T) never give a CTA rows or
// keys outside [0, T), and the check flags them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace kiln::varlen_host {
// What the device file needs from CUDA, for the host: the CTA / thread indices and atomicOr.
struct Idx {
  unsigned x = 0, y = 0, z = 0;
};
inline Idx blockIdx, threadIdx;
inline unsigned atomicOr(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p |= v;
  return old;
}
using std::max;
#define __device__
#define __forceinline__ inline
#include "codegen/device/kiln_attention_varlen.cuh"
#undef __device__
#undef __forceinline__
}  // namespace kiln::varlen_host

namespace kiln {
namespace {

using namespace varlen_host;

// Row r's covering count over the grid, for BQ query rows a CTA.
template <int BQ>
std::vector<int> coverage(const std::vector<int>& cq, const std::vector<int>& ck, long long tq,
                          long long tk) {
  const int b = static_cast<int>(cq.size()) - 1;
  std::vector<int> seen(static_cast<size_t>(std::max<long long>(tq, 0)), 0);
  const long long grid = tq / BQ + b + 1;
  for (long long cta = 0; cta < grid; ++cta) {
    KcVarlenBlock blk;
    if (!kc_varlen_block<BQ>(cq.data(), ck.data(), b, tq, tk, cta, blk)) continue;
    EXPECT_GE(blk.q0, 0);
    EXPECT_LE(blk.q0 + blk.lq, tq);
    EXPECT_GE(blk.k0, 0);
    EXPECT_LE(blk.k0 + blk.lk, tk);
    EXPECT_GE(blk.lk, 0);
    EXPECT_LT(blk.qb, blk.lq);
    for (int r = blk.qb; r < std::min(blk.qb + BQ, blk.lq); ++r) ++seen[blk.q0 + r];
  }
  return seen;
}

template <int BQ>
void random_mixes() {
  std::mt19937 rng(BQ);
  for (int trial = 0; trial < 300; ++trial) {
    const int b = 1 + static_cast<int>(rng() % 12);
    std::vector<int> cq{0}, ck{0};
    for (int i = 0; i < b; ++i) {
      const int kind = static_cast<int>(rng() % 4);
      const int len = kind == 0 ? 0 : kind == 1 ? 1 + rng() % BQ : static_cast<int>(rng() % 400);
      cq.push_back(cq.back() + len);
      ck.push_back(ck.back() + static_cast<int>(rng() % 300));
    }
    const std::vector<int> seen = coverage<BQ>(cq, ck, cq.back(), ck.back());
    for (size_t r = 0; r < seen.size(); ++r) ASSERT_EQ(seen[r], 1) << "row " << r;
    unsigned err = 0;
    kc_varlen_check(cq.data(), ck.data(), b, cq.back(), ck.back(), &err);
    EXPECT_EQ(err, 0u);
  }
}

TEST(AttentionVarlenBlocks, EveryRowOnceForAnyMix) {
  random_mixes<16>();
  random_mixes<32>();
  random_mixes<64>();
}

TEST(AttentionVarlenBlocks, BadOffsetsStayInBoundsAndAreFlagged) {
  const long long tq = 100, tk = 90;
  const std::vector<std::vector<int>> bad = {
      {0, 150, 120, 100}, {-40, 5, 75, 100}, {0, 5, 75, 1000}, {3, 5, 75, 100},
      {0, 80, 20, 100},   {0, -7, -9, 100},  {50, 10, 0, 0},   {0, 2147483647, 3, 100}};
  const std::vector<int> ck = {0, 30, 60, 90};
  for (const std::vector<int>& cq : bad) {
    coverage<64>(cq, ck, tq, tk);  // the bounds are checked inside
    unsigned err = 0;
    kc_varlen_check(cq.data(), ck.data(), 3, tq, tk, &err);
    EXPECT_EQ(err, KC_VARLEN_BAD_OFFSETS);
    err = 0;
    kc_varlen_check(ck.data(), cq.data(), 3, tk, tq, &err);  // as key offsets
    EXPECT_EQ(err, KC_VARLEN_BAD_OFFSETS);
  }
  unsigned err = 0;
  const std::vector<int> good = {0, 40, 40, 100};
  kc_varlen_check(good.data(), ck.data(), 3, tq, tk, &err);
  EXPECT_EQ(err, 0u);
  blockIdx.x = 1;  // only CTA (0, 0) checks
  kc_varlen_check(bad[0].data(), ck.data(), 3, tq, tk, &err);
  EXPECT_EQ(err, 0u);
  blockIdx.x = 0;
}

}  // namespace
}  // namespace kiln
