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

// Lanes along C: the fewest idle lanes (the last channel tile's), at least 8 where that many fit
// (neighbouring lanes read neighbouring 16-byte vectors: whole 32-byte sectors and more), ties to
// the wider tile.
int choose_threads_c(int64_t nvec, int max_tc) {
  const int64_t floor_tc = std::min<int64_t>({8, nvec, max_tc});
  int best = 1;
  double best_score = 1e9;
  for (int t = 1; t <= max_tc; ++t) {
    const int64_t padded = (nvec + t - 1) / t * t;
    double score = static_cast<double>(padded - nvec) / static_cast<double>(padded);
    if (t < floor_tc) score += 0.5;
    if (score <= best_score + 1e-12) {
      best_score = score;
      best = t;
    }
  }
  return best;
}

// Pixel groups per thread: up to 8, while the grid keeps at least 4 CTAs per SM.
int choose_iters(const GroupedConvShape& s, const GroupedConvLayout& L, int64_t ctiles) {
  if (s.pixels_estimate <= 0 || s.ow < 1) return 1;
  const int64_t rows = s.pixels_estimate / s.ow;  // N x OH
  const int64_t groups = rows * ((s.ow + L.pixels - 1) / L.pixels);
  for (int it = 8; it > 1; it /= 2) {
    const int64_t ctas = (groups + int64_t{L.threads_p} * it - 1) / (int64_t{L.threads_p} * it);
    if (ctas * ctiles >= 4 * int64_t{s.sm_count}) return it;
  }
  return 1;
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
  if (s.elem_bytes == 2 && s.sm >= 80 && L.cg % 8 == 0 && L.kg % 8 == 0) {
    // Groups of 8 channels and more: f32 FMA issue would bound the SIMT kernel (a 16-channel
    // group is 288 FMAs per output); one m16n8k16 is 2048 of them from 6 32-bit loads.
    L.mma = true;
    L.mma_k = L.cg % 16 == 0 ? 16 : 8;
    for (int n : {32, 24, 16, 8})
      if (L.kg % n == 0) {
        L.mma_n = n;
        break;
      }
    L.threads = 32 * L.mma_warps;
    L.smem_bytes = s.r * s.s * L.mma_n * (L.cg + 8) * 2;
    L.unroll_rows = s.r * s.s <= 9;
    L.ok = true;
    return L;
  }
  L.tile = choose_depthwise_tile(s);
  if (L.tile.ok) {
    L.smem_bytes = L.tile.smem_bytes;
    L.threads = L.tile.threads;
    L.ok = true;
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
  const int64_t tap_bytes = s.r * s.s * L.cg * L.vec * 4;  // one lane's filters
  const int64_t max_tc = std::min<int64_t>(32, s.smem_limit / tap_bytes);
  if (max_tc < 1) {
    L.why_not = "the filters of one channel vector exceed shared memory";
    return L;
  }
  L.threads_c = choose_threads_c(nvec, static_cast<int>(max_tc));
  L.threads_p = kThreads / L.threads_c;
  L.threads = L.threads_c * L.threads_p;
  L.smem_bytes = tap_bytes * L.threads_c;
  L.iters = choose_iters(s, L, (nvec + L.threads_c - 1) / L.threads_c);
  const int64_t chunks = L.groups_per_thread > 1 || L.sliding ? 1 : L.cg / L.chunk;
  L.unroll_rows = L.sliding ? s.r * s.s <= 25 : s.r * s.s * chunks <= 9;
  L.ok = true;
  return L;
}

}  // namespace kiln
