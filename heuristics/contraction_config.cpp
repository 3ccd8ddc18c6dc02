// Tile choice for conv2d / matmul: the candidate block tiles are scored by wave efficiency (how
// full the last wave of CTAs is) and tile efficiency (bigger tiles reuse operands more).
#include "heuristics/contraction_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kiln {

std::string ContractionConfig::str() const {
  if (kind == Kind::Direct) return "direct";
  if (kind == Kind::Simt) return "simt";
  if (kind == Kind::Grouped) return "grouped";
  std::string s =
      fmt::format("{}{}x{}x{}_s{}", kind == Kind::Wgmma ? "wg" : "t", bm, bn, bk, stages);
  if (split_k > 1) s += fmt::format("_sk{}", split_k);
  if (tma && rowfold)
    s += "_rf";
  else if (tma && im2col)
    s += "_i2c";
  else if (tma)
    s += "_tma";
  else if (ws)
    s += "_ws";
  return s;
}

namespace {

struct Candidate {
  int bm, bn, bk, wm, wn;
  double tile_eff;  // relative throughput of a full tile (operand reuse, warps)
};

constexpr Candidate kCandidates[] = {
    {128, 256, 32, 64, 64, 1.00}, {256, 128, 32, 64, 64, 1.00}, {128, 128, 32, 64, 64, 0.95},
    {128, 64, 32, 64, 32, 0.85},  {64, 128, 32, 32, 64, 0.85},  {64, 64, 32, 32, 32, 0.70},
};

// wgmma tiles (bk = 64): the block tile, pipeline depth and relative throughput of a full tile.
// Big tiles keep one CTA per SM with deep pipelines; small ones leave room for 2-3 CTAs per SM.
struct WgCandidate {
  int bm, bn, stages;
  double tile_eff;
  // The same for a conv whose A arrives by im2col TMA: every BN-column tile re-reads its rows'
  // R x S windows of the input (the im2col operand is R*S times the input), so narrow tiles pay
  // more (docs/PERFORMANCE.md has the ResNet-50 layers' times).
  double i2c_eff;
};
// 256x128 runs four warpgroups (512 threads, 64x128 each): the same operand reuse per warpgroup
// as 128x128 but twice the rows per B tile and more warps to hide the loader latency; it wins
// where M is large (concrete M of a static or shape-specialized graph at big batch sizes).
constexpr WgCandidate kWgCandidates[] = {
    {128, 256, 4, 1.00, 1.00}, {256, 128, 4, 0.93, 0.93}, {128, 128, 5, 0.90, 0.92},
    {128, 64, 4, 0.80, 0.70},  {64, 128, 4, 0.75, 0.85},  {64, 64, 4, 0.60, 0.55},
};

// The mma.sync config of a tile (bigger tiles get one stage less: shared memory).
ContractionConfig mma_config(const Candidate& cand) {
  ContractionConfig c;
  c.kind = ContractionConfig::Kind::Mma;
  c.bm = cand.bm;
  c.bn = cand.bn;
  c.bk = cand.bk;
  c.wm = cand.wm;
  c.wn = cand.wn;
  c.stages = cand.bm + cand.bn >= 384 ? 3 : 4;
  return c;
}

ContractionConfig wgmma_config(const WgCandidate& cand, int stages, int split_k) {
  return wgmma_tile(cand.bm, cand.bn, stages, split_k);
}

bool tensor_core_ok(const ContractionProblemInfo& p) {
  bool half = p.dtype == DType::F16 || p.dtype == DType::BF16;
  return half && p.mma_ok && p.sm >= 80 && p.k >= 16;
}

// Split-K for small-M / large-K problems (too few output tiles to fill the SMs): the busiest
// SM's time, in MAC units, for a tile / split count. A split CTA adds the cost of writing its
// f32 partial tile and (amortized) the last CTA's read of all partials: about kSplitOverhead
// k tiles of MMA work.
constexpr double kSplitOverhead = 3.0;
constexpr int kSplits[] = {2, 3, 4, 5, 6, 8};

double split_cost(const ContractionProblemInfo& p, int bm, int bn, double eff, int splits) {
  int64_t ktiles = (p.k + 63) / 64;
  int64_t kper = (ktiles + splits - 1) / splits;
  int64_t ctas = ((p.m + bm - 1) / bm) * ((p.n + bn - 1) / bn) * p.batch * splits;
  int64_t per_sm_max = (ctas + p.sm_count - 1) / p.sm_count;
  double tile = static_cast<double>(bm) * bn;
  double per_cta =
      static_cast<double>(kper) * tile / eff + (splits > 1 ? kSplitOverhead * tile : 0);
  return static_cast<double>(per_sm_max) * per_cta;
}

// Replaces `c` (the best unsplit wgmma tile) with a split-K config when the model predicts at
// least 15% less time. Only for a concrete M (a symbolic batch may be much larger) and one GEMM.
void choose_split_k(const ContractionProblemInfo& p, ContractionConfig* c) {
  if (p.m_is_estimate || p.batch != 1) return;
  double base_eff = 1.0;
  for (const WgCandidate& cand : kWgCandidates)
    if (cand.bm == c->bm && cand.bn == c->bn) base_eff = cand.tile_eff;
  double best = 0.85 * split_cost(p, c->bm, c->bn, base_eff, 1);
  int64_t ktiles = (p.k + 63) / 64;
  for (const WgCandidate& cand : kWgCandidates) {
    int smem = (cand.bm + cand.bn) * 64 * 2 * cand.stages + 1024;
    if (smem > p.smem_optin) continue;
    for (int s : kSplits) {
      if (ktiles < 4 * s) continue;  // every split keeps a pipeline's worth of k tiles
      double cost = split_cost(p, cand.bm, cand.bn, cand.tile_eff, s);
      if (cost < best) {
        best = cost;
        *c = wgmma_config(cand, cand.stages, s);
      }
    }
  }
}

}  // namespace

ContractionConfig wgmma_tile(int bm, int bn, int stages, int split_k) {
  ContractionConfig c;
  c.kind = ContractionConfig::Kind::Wgmma;
  c.bm = bm;
  c.bn = bn;
  c.bk = 64;
  c.wm = 64;
  c.wn = bn;
  c.stages = stages;
  c.split_k = split_k;
  return c;
}

ContractionConfig wgmma_tma_tile(int bm, int bn, int stages, bool im2col) {
  ContractionConfig c = wgmma_tile(bm, bn, stages);
  c.ws = true;
  c.tma = true;
  c.im2col = im2col;
  return c;
}

ContractionConfig wgmma_rowfold_tile(int bm, int bn, int stages) {
  ContractionConfig c = wgmma_tma_tile(bm, bn, stages);
  c.rowfold = true;
  return c;
}

std::pair<int, int> spatial_pixel_tile(int64_t ow, int bm) {
  if (bm == 64) return {8, 8};
  return ow >= 12 ? std::pair<int, int>{8, 16} : std::pair<int, int>{16, 8};
}

namespace {

// M tiles of a candidate: BM rows of the GEMM (im2col TMA too), or pixel blocks of one image
// (spatial TMA).
int64_t m_tiles(const ContractionProblemInfo& p, int bm, bool spatial) {
  if (!spatial || p.tma_im2col) return (p.m + bm - 1) / bm;
  auto [th, tw] = spatial_pixel_tile(p.ow, bm);
  return p.images * ((p.oh + th - 1) / th) * ((p.ow + tw - 1) / tw);
}

}  // namespace

// TMA loads (one producer thread issues whole boxes; faster than the same tile with cp.async on
// every ResNet-50 conv layer and the large matmul, docs/PERFORMANCE.md) are preferred wherever
// the operands allow them. Those kernels take tiles of at most two consumer warpgroups and no
// split-K. A conv that is not a plain GEMM takes the im2col form where it can: its M tiles are
// whole (the spatial form's pixel blocks of one image leave 23 % of a 128-pixel block empty on
// 28x28, 14x14 and 7x7 outputs).
ContractionConfig choose_wgmma_config(const ContractionProblemInfo& p) {
  ContractionConfig c;
  if (!p.wgmma_ok || p.sm != 90 || !tensor_core_ok(p)) return c;
  if (p.tma_rowfold) {
    // Few k tiles (the stem: 7 filter rows = 4) and a narrow N: one output row of up to 128
    // pixels per CTA, the whole N where it fits one tile.
    const int stages =
        static_cast<int>(std::max<int64_t>(3, std::min<int64_t>(4, (p.k + 63) / 64)));
    return wgmma_rowfold_tile(128, p.n <= 64 ? 64 : 128, stages);
  }
  const bool tma = p.tma_gemm || p.tma_spatial;
  // A cp.async GEMM of one or two k tiles (attention's q @ k^T over 64-wide heads) is bound by its
  // epilogue's latency, not by the tensor cores: the R CTAs an SM holds overlap their epilogues,
  // so a wave of sm_count x R CTAs takes about one tile's epilogue, which grows with its area.
  // Cost = waves x BM x BN, the pipeline no deeper than 3 stages (more holds nothing).
  const int64_t ktiles = (p.k + 63) / 64;
  if (!tma && ktiles <= 2) {
    double best_cost = -1;
    for (const WgCandidate& cand : kWgCandidates) {
      if (cand.bm > 128) continue;
      ContractionConfig cfg = wgmma_config(cand, 3, 1);
      if (cfg.smem_bytes() > p.smem_optin) continue;
      const int64_t resident =
          std::max(1, std::min(233472 / (cfg.smem_bytes() + 1024), 2048 / cfg.threads()));
      const int64_t ctas =
          ((p.m + cand.bm - 1) / cand.bm) * ((p.n + cand.bn - 1) / cand.bn) * p.batch;
      const int64_t slots = static_cast<int64_t>(p.sm_count) * resident;
      const double cost = static_cast<double>((ctas + slots - 1) / slots) * cand.bm * cand.bn;
      if (best_cost < 0 || cost < best_cost - 1e-9) {
        best_cost = cost;
        c = cfg;
      }
    }
    return c;
  }
  double best = -1;
  for (const WgCandidate& cand : kWgCandidates) {
    if (tma && cand.bm > 128) continue;
    // A TMA pipeline deeper than the k tiles holds nothing more (the producer never waits): at
    // most max(3, k tiles) stages, which leaves shared memory for a prefetched residual tile.
    const int tma_stages =
        static_cast<int>(std::max<int64_t>(3, std::min<int64_t>(cand.stages, (p.k + 63) / 64)));
    ContractionConfig cfg = tma ? wgmma_tma_tile(cand.bm, cand.bn, tma_stages, p.tma_im2col)
                                : wgmma_config(cand, cand.stages, 1);
    if (cfg.smem_bytes() > p.smem_optin) continue;
    int64_t tiles_m = m_tiles(p, cand.bm, p.tma_spatial), tiles_n = (p.n + cand.bn - 1) / cand.bn;
    int64_t ctas = tiles_m * tiles_n * p.batch;
    // Balance over the SMs: an SM running two CTAs takes about twice as long as one running one
    // (a CTA of these tiles nearly saturates the tensor cores), so the busiest SM sets the time.
    int64_t per_sm_max = (ctas + p.sm_count - 1) / p.sm_count;
    double balance = static_cast<double>(ctas) / static_cast<double>(per_sm_max * p.sm_count);
    double fill =
        static_cast<double>(p.m * p.n) / static_cast<double>(tiles_m * cand.bm * tiles_n * cand.bn);
    double score = (p.tma_im2col ? cand.i2c_eff : cand.tile_eff) * balance * fill;
    if (score > best + 1e-9) {
      best = score;
      c = cfg;
    }
  }
  if (c.kind == ContractionConfig::Kind::Wgmma && !c.tma) choose_split_k(p, &c);
  return c;
}

ContractionConfig choose_contraction_config(const ContractionProblemInfo& p) {
  ContractionConfig w = choose_wgmma_config(p);
  if (w.kind == ContractionConfig::Kind::Wgmma) return w;
  return choose_mma_config(p);
}

ContractionConfig choose_mma_config(const ContractionProblemInfo& p) {
  ContractionConfig c;
  if (!tensor_core_ok(p)) {
    if (p.simt_ok)
      c.kind = ContractionConfig::Kind::Simt;
    else if (p.grouped_ok)
      c.kind = ContractionConfig::Kind::Grouped;
    return c;
  }
  double best = -1;
  for (const Candidate& cand : kCandidates) {
    int smem = mma_config(cand).smem_bytes();
    if (smem > p.smem_optin) continue;
    int64_t tiles_m = (p.m + cand.bm - 1) / cand.bm, tiles_n = (p.n + cand.bn - 1) / cand.bn;
    int64_t ctas = tiles_m * tiles_n * p.batch;
    // CTAs resident per SM: bounded by shared memory and by registers (~64K regs, ~2 per acc).
    int per_sm = std::max(1, std::min<int>(p.smem_optin / smem, 65536 / (cand.bm * cand.bn * 2)));
    int64_t slots = static_cast<int64_t>(p.sm_count) * per_sm;
    double waves = static_cast<double>(ctas) / slots;
    double wave_eff = waves >= 1 ? waves / std::ceil(waves) : 1.0;
    // Padding waste: the part of the edge tiles that computes nothing.
    double fill =
        static_cast<double>(p.m * p.n) / static_cast<double>(tiles_m * cand.bm * tiles_n * cand.bn);
    // Small problems: too few CTAs to fill the GPU hurts more than small tiles do.
    double occupancy = std::min(1.0, static_cast<double>(ctas) / p.sm_count);
    double score = cand.tile_eff * wave_eff * fill * occupancy;
    if (score > best + 1e-9) {
      best = score;
      c = mma_config(cand);
    }
  }
  return c;
}

bool operator==(const ContractionConfig& a, const ContractionConfig& b) {
  return a.kind == b.kind && a.bm == b.bm && a.bn == b.bn && a.bk == b.bk && a.wm == b.wm &&
         a.wn == b.wn && a.stages == b.stages && a.split_k == b.split_k && a.ws == b.ws &&
         a.tma == b.tma && a.im2col == b.im2col && a.rowfold == b.rowfold;
}

std::vector<ContractionConfig> contraction_candidates(const ContractionProblemInfo& p, size_t max) {
  std::vector<ContractionConfig> out;
  auto add = [&](const ContractionConfig& c) {
    if (out.size() < max && c.smem_bytes() <= p.smem_optin &&
        std::find(out.begin(), out.end(), c) == out.end())
      out.push_back(c);
  };
  const ContractionConfig rule = choose_contraction_config(p);
  add(rule);
  if (rule.kind == ContractionConfig::Kind::Wgmma) {
    const int64_t ktiles = (p.k + 63) / 64;
    // TMA tiles first where the operands take them (see choose_wgmma_config), one stage
    // more too (TMA keeps a whole tile per stage in flight).
    // An im2col conv also tries the spatial pixel blocks (better L2 reuse of the windows).
    if (rule.rowfold)
      for (int bm : {128, 64})
        for (int bn : {64, 128})
          for (int st : {3, 4}) add(wgmma_rowfold_tile(bm, bn, st));
    if (rule.tma && !rule.rowfold) {
      std::vector<bool> forms = {rule.im2col};
      if (rule.im2col && p.tma_spatial) forms.push_back(false);
      for (bool i2c : forms) {
        for (const WgCandidate& cand : kWgCandidates)
          if (cand.bm <= 128) add(wgmma_tma_tile(cand.bm, cand.bn, cand.stages, i2c));
        for (const WgCandidate& cand : kWgCandidates)
          if (cand.bm <= 128 && cand.stages + 1 <= ktiles + 1)
            add(wgmma_tma_tile(cand.bm, cand.bn, cand.stages + 1, i2c));
      }
    }
    // Every tile at its usual depth, then split-K variants (concrete single-GEMM M), then one
    // stage less / more: ordered so that a small `max` keeps the likeliest winners.
    // Warp-specialized variants first (every stage holds a tile in flight, so one more stage
    // where it fits), then every tile at its usual depth.
    for (const WgCandidate& cand : kWgCandidates) {
      if (cand.bm > 128) continue;  // at most two consumer warpgroups (registers)
      ContractionConfig c = wgmma_config(cand, cand.stages, 1);
      c.ws = true;
      add(c);
    }
    for (const WgCandidate& cand : kWgCandidates) add(wgmma_config(cand, cand.stages, 1));
    if (!p.m_is_estimate && p.batch == 1)
      for (int split : {2, 4, 8})
        for (const WgCandidate& cand : kWgCandidates)
          if (ktiles >= 4 * split) add(wgmma_config(cand, cand.stages, split));
    for (const WgCandidate& cand : kWgCandidates)
      for (int ds : {-1, 1})
        if (cand.stages + ds >= 2 && cand.stages + ds <= ktiles + 1)
          add(wgmma_config(cand, cand.stages + ds, 1));
  } else if (rule.kind == ContractionConfig::Kind::Mma) {
    for (const Candidate& cand : kCandidates) add(mma_config(cand));
  }
  return out;
}

}  // namespace kiln
