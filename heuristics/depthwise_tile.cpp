// The tiled depthwise conv kernel's layout (heuristics/depthwise_tile.hpp). The kernel reads each
// input element from DRAM once per CTA (the halo of neighbouring tiles from L2) and every tap
// from shared memory, so the tile trades the halo's extra fills against idle pixels past the
// output's edge; both are counted per useful output below.
#include "heuristics/depthwise_tile.hpp"

#include <algorithm>

#include "heuristics/grouped_conv_layout.hpp"

namespace kiln {
namespace {

constexpr int64_t kSmemLimit = 48 * 1024;  // four CTAs per SM at least
constexpr int kMaxVectors = 16;            // 128 channels per CTA

// The row pitch (in 16-byte vectors, at least in_w x nv) whose first-warp reads of one tap
// spread over the banks: a quarter warp (8 lanes x 16 bytes) is served in one pass when its
// lanes' vectors are distinct modulo 8. Lanes run along the vectors, then the tile's rows, then
// its column groups.
int choose_pitch(const DepthwiseTile& t, int64_t stride_h, int64_t stride_w) {
  const int base = t.in_w * t.nv;
  int best = base, best_passes = 1 << 30;
  for (int pad = 0; pad < 8; ++pad) {
    const int pitch = base + pad;
    int passes = 0;
    for (int q = 0; q < 4; ++q) {
      int count[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int worst = 0;
      for (int lane = q * 8; lane < q * 8 + 8 && lane < t.threads; ++lane) {
        const int v = lane % t.nv, row = (lane / t.nv) % t.tile_h, gx = lane / t.nv / t.tile_h;
        const int64_t slot = row * stride_h * pitch + int64_t{gx} * t.pixels * stride_w * t.nv + v;
        worst = std::max(worst, ++count[slot % 8]);
      }
      passes += worst;
    }
    if (passes < best_passes) {
      best_passes = passes;
      best = pitch;
    }
  }
  return best;
}

struct Candidate {
  DepthwiseTile t;
  double cost = 0;
};

// Relative time per useful output vector: the tile's fills (input vectors staged, halo
// included) and its outputs (the computed ones, idle columns and rows past the edge included),
// times how much of the GPU a grid of that many CTAs leaves idle.
double tile_cost(const GroupedConvShape& s, const DepthwiseTile& t, int64_t vectors) {
  const double useful = static_cast<double>(s.oh * s.ow);
  const double computed = static_cast<double>(t.tiles_h * t.tile_h * t.tiles_w * t.tile_w);
  // A pixel's nv vectors are one contiguous run of memory (the tile's whole rows where nv
  // covers C); runs under 64 bytes waste part of each DRAM access.
  const double run = t.nv == vectors ? 1e9 : 16.0 * t.nv;
  const double fills =
      static_cast<double>(t.tiles_h * t.tiles_w * t.in_h * t.in_w) * std::max(1.0, 64.0 / run);
  // A 3x3 output costs about one fill (its FMAs, shared-memory reads and store against a 16-byte
  // cp.async and its DRAM or L2 bytes); larger filters cost proportionally more FMAs.
  const double tap_weight = static_cast<double>(s.r * s.s) / 9.0;
  double cost = (fills + computed * tap_weight) / useful;
  const int64_t images =
      std::max<int64_t>(1, s.pixels_estimate / std::max<int64_t>(1, s.oh * s.ow));
  // Warps in flight hide the fills' latency: a grid of fewer than 32 warps per SM leaves DRAM
  // idle part of the time, where the layer has that many (a thread per 4 output pixels).
  const int64_t warps = (t.threads + 31) / 32;
  const int64_t grid_warps = images * t.tiles_h * t.tiles_w * (vectors / t.nv) * warps;
  const int64_t want =
      std::min<int64_t>(32 * int64_t{s.sm_count}, images * s.oh * s.ow * vectors / (4 * 32));
  if (grid_warps < want) cost *= static_cast<double>(want) / static_cast<double>(grid_warps);
  cost *= static_cast<double>(warps * 32) / t.threads;  // the last warp's idle lanes
  if (t.threads < 128) cost *= 1.15;  // few warps per CTA: each CTA's fill waits alone
  return cost;
}

}  // namespace

DepthwiseTile choose_depthwise_tile(const GroupedConvShape& s) {
  DepthwiseTile none;
  if (s.elem_bytes != 2 || s.sm < 80) {
    none.why_not = "16-bit activations on sm_80+ only (cp.async)";
    return none;
  }
  if (s.groups != s.c || s.k != s.c) {
    none.why_not = "not one input and one output channel per group";
    return none;
  }
  if (s.c % 8 != 0) {
    none.why_not = "channels not a multiple of 8 (16-byte vectors)";
    return none;
  }
  if (s.ow < 1 || s.oh < 1) {
    none.why_not = "symbolic output height or width";
    return none;
  }
  const int64_t vectors = s.c / 8;
  // Registers: 8 accumulators per pixel and a filter row of 8 channels; 128 threads where
  // that passes ~128 registers (two 256-thread CTAs would not fit an SM's register file).
  Candidate best;
  best.cost = -1;
  for (int nv = static_cast<int>(std::min<int64_t>(kMaxVectors, vectors)); nv >= 1; --nv) {
    if (vectors % nv != 0) continue;
    for (int p = static_cast<int>(std::min<int64_t>(8, s.ow)); p >= std::min<int64_t>(4, s.ow);
         --p) {
      const int regs = 8 * p + 8 * static_cast<int>(s.s) + 24;
      const int max_threads = regs > 128 ? 128 : 256;
      const int64_t groups_max = (s.ow + p - 1) / p;
      for (int gx = 1; gx <= groups_max; ++gx) {
        for (int th = 1; th <= s.oh; ++th) {
          DepthwiseTile t;
          t.nv = nv;
          t.pixels = p;
          t.col_groups = gx;
          t.tile_h = th;
          t.tile_w = gx * p;
          t.threads = nv * th * gx;
          if (t.threads > max_threads) break;
          t.in_h = static_cast<int>((th - 1) * s.stride_h + (s.r - 1) * s.dil_h + 1);
          t.in_w = static_cast<int>((t.tile_w - 1) * s.stride_w + (s.s - 1) * s.dil_w + 1);
          t.pitch = t.in_w * nv + 7;  // the most padding choose_pitch adds
          t.smem_bytes = s.r * s.s * nv * 8 * 4 + int64_t{t.in_h} * t.pitch * 16;
          if (t.smem_bytes > kSmemLimit) break;
          t.tiles_h = (s.oh + th - 1) / th;
          t.tiles_w = (s.ow + t.tile_w - 1) / t.tile_w;
          const double cost = tile_cost(s, t, vectors);
          if (best.cost < 0 || cost < best.cost - 1e-9) {
            best.cost = cost;
            best.t = t;
          }
        }
      }
    }
  }
  if (best.cost < 0) {
    none.why_not = "no tile of up to 256 threads fits 48 KB of shared memory";
    return none;
  }
  DepthwiseTile& t = best.t;
  t.pitch = choose_pitch(t, s.stride_h, s.stride_w);
  t.smem_bytes = s.r * s.s * t.nv * 8 * 4 + int64_t{t.in_h} * t.pitch * 16;
  t.ok = true;
  return t;
}

}  // namespace kiln
