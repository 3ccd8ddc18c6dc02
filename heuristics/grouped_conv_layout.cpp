// The grouped / depthwise conv kernel's layout (heuristics/grouped_conv_layout.hpp). The kernel is
// bound by DRAM (depthwise) or by f32 FMA issue (narrow groups): every choice below keeps the
// loads 16 bytes wide along C, the f32 weights a thread holds in registers at most 64 (72 for a
// depthwise 9x9 row), and the accumulators at most 64.
#include "heuristics/grouped_conv_layout.hpp"

#include <algorithm>

namespace kiln {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxGroupChannels = 64;
constexpr int kMaxAccumulators = 64;

// The largest power of two <= cap dividing every value.
int pow2_dividing(int cap, std::initializer_list<int64_t> values) {
  for (int w = cap; w > 1; w /= 2) {
    bool all = true;
    for (int64_t v : values) all = all && v % w == 0;
    if (all) return w;
  }
  return 1;
}

// Output channels per thread: the widest store vector that divides K and either lies inside one
// group or covers whole groups; a thread spanning several groups holds all their weights of one
// filter tap (cg * vec floats), so that stays within 64.
int choose_vec(int64_t k, int64_t cg, int64_t kg, int vmax) {
  for (int v = vmax; v > 1; v /= 2) {
    if (k % v != 0) continue;
    if (v <= kg ? kg % v != 0 : v % kg != 0) continue;
    if (v > kg && cg * v > 64) continue;
    return v;
  }
  return 1;
}

// Output pixels per thread: 4 to 8 (accumulators), the fewest wasted columns of the output row
// (7 on 7- and 14-wide rows); a wide depthwise filter prefers more pixels (its sliding window
// loads (P - 1) * stride + S columns for P pixels).
int choose_pixels(const GroupedConvShape& s, int vec, bool sliding) {
  const int pmax = std::min(8, kMaxAccumulators / vec);
  if (s.ow < 1) return std::min(4, pmax);
  const bool prefer_wide = sliding && s.s >= 5;
  int best = std::min(4, pmax);
  int64_t best_waste = -1;
  for (int p = std::min(4, pmax); p <= pmax; ++p) {
    const int64_t waste = (s.ow + p - 1) / p * p - s.ow;
    const int64_t scaled = waste * 8 / p;  // wasted fraction of a thread's pixels, in eighths
    if (best_waste < 0 || scaled < best_waste || (scaled == best_waste && prefer_wide)) {
      best_waste = scaled;
      best = p;
    }
  }
  return best;
}

}  // namespace

GroupedConvLayout grouped_conv_layout(const GroupedConvShape& s) {
  GroupedConvLayout L;
  if (s.groups < 2 || s.c % s.groups != 0 || s.k % s.groups != 0) {
    L.why_not = "not a grouped conv";
    return L;
  }
  L.cg = s.c / s.groups;
  L.kg = s.k / s.groups;
  if (L.cg > kMaxGroupChannels) {
    L.why_not = "groups wider than 64 input channels";
    return L;
  }
  const int vmax = 16 / s.elem_bytes;
  L.vec = choose_vec(s.k, L.cg, L.kg, vmax);
  L.groups_per_thread = L.vec > L.kg ? static_cast<int>(L.vec / L.kg) : 1;
  L.vec_per_group = L.vec / L.groups_per_thread;
  L.span = L.groups_per_thread * L.cg;
  L.sliding = L.cg == 1;
  if (L.groups_per_thread > 1 || L.sliding) {
    L.chunk = static_cast<int>(L.span);  // every group of the thread at once
  } else {
    const int cap = std::min(16, 64 / L.vec);
    L.chunk = 1;
    for (int ch = cap; ch > 1; --ch)
      if (L.cg % ch == 0) {
        L.chunk = ch;
        break;
      }
  }
  if (L.sliding && s.s * L.vec > 72) {
    L.why_not = "depthwise filter row too wide for registers";
    return L;
  }
  L.x_vec = pow2_dividing(vmax, {L.chunk, s.c, L.groups_per_thread > 1 ? L.span : L.cg});
  L.y_vec = L.vec;
  L.pixels = choose_pixels(s, L.vec, L.sliding);
  const int64_t nvec = s.k / L.vec;
  int tc = 1;
  while (tc < 32 && tc < nvec) tc *= 2;
  auto smem = [&](int t) { return s.r * s.s * L.cg * t * L.vec * 4; };
  while (tc > 1 && smem(tc) > s.smem_limit) tc /= 2;
  if (smem(tc) > s.smem_limit) {
    L.why_not = "the filters of one channel vector exceed shared memory";
    return L;
  }
  L.threads_c = tc;
  L.threads_p = kThreads / tc;
  L.threads = kThreads;
  L.smem_bytes = smem(tc);
  L.ok = true;
  return L;
}

}  // namespace kiln
