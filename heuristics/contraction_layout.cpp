// The tensor-core kernels' layout (see contraction_layout.hpp).
#include "heuristics/contraction_layout.hpp"

#include <algorithm>

#include "engine/base/check.hpp"

namespace kiln {

std::pair<int, int> rowfold_pixel_tile(int64_t ow, int bm) {
  // Whole warpgroups (64 pixels) per output row; a 128-pixel tile takes one row of up to 128.
  const int bw = bm == 128 && ow > 64 ? 128 : 64;
  return {bm / bw, bw};
}

int64_t ctas_per_sm(int64_t smem) {
  return 233472 / (smem + 1024);
}

namespace {

using Mainloop = ContractionMainloop;

// The mainloop and A's loader; validates the config against the operands.
void choose_mainloop(const ContractionShape& s, ContractionLayout* L) {
  const ContractionConfig& cfg = L->cfg;
  const bool wg = cfg.kind == ContractionConfig::Kind::Wgmma;
  KILN_ASSERT(wg || cfg.kind == ContractionConfig::Kind::Mma, "{}: config {} is no tensor-core one",
              s.where, cfg.str());
  KILN_ASSERT(!wg || (cfg.bk == 64 && s.wgmma), "{}: wgmma config {} not applicable", s.where,
              cfg.str());
  // Warp-specialized wgmma: the loaders run on the producer warpgroup's 128 threads only.
  const bool warp_spec = wg && cfg.ws;
  KILN_ASSERT(!warp_spec || cfg.split_k == 1, "{}: warp-specialized config {} with split-K",
              s.where, cfg.str());
  // TMA: plain-GEMM operands (2-D boxes), else a conv tiled by blocks of output pixels whose
  // input windows are 4-D boxes of the NHWC input, one per filter tap (zero-filled padding).
  // im2col: the same convs, A by im2col-mode TMA over GEMM rows (BM consecutive output pixels).
  // Row-folded: A as whole input rows per filter row, M tiles output pixel blocks as spatial.
  const bool rowfold = cfg.tma && cfg.rowfold && s.tma_rowfold;
  const bool im2col = cfg.tma && !cfg.rowfold && cfg.im2col && s.tma_im2col;
  const bool spatial = cfg.tma && !cfg.rowfold && !cfg.im2col && !s.tma_gemm && s.tma_spatial;
  KILN_CHECK(!cfg.tma || (warp_spec && cfg.bm <= 128 &&
                          (cfg.rowfold  ? rowfold
                           : cfg.im2col ? im2col
                                        : s.tma_gemm || spatial)),
             "{}: config {} needs TMA-loadable operands (an unbatched matmul with A not "
             "transposed and 16-byte aligned rows, or an NHWC conv with static spatial dims and "
             "C a multiple of 64, or a 1x1 stride-1 one with C a multiple of 8; im2col: an NHWC "
             "conv of the first kind with padding and bounding-box corners within 127; row-fold: "
             "an NHWC conv with C x stride_w = 8, S x C = 16, 32 or 64 and unit column dilation)",
             s.where, cfg.str());
  L->loader = rowfold   ? TmaLoader::RowFold
              : im2col  ? TmaLoader::Im2col
              : spatial ? TmaLoader::PixelBlocks
              : cfg.tma ? TmaLoader::GemmRows
                        : TmaLoader::None;
  L->mainloop = !wg          ? Mainloop::MmaSync
                : !warp_spec ? Mainloop::WgmmaCpAsync
                : cfg.tma    ? Mainloop::WgmmaTma
                             : Mainloop::WgmmaWarpSpecialized;
  L->arch_specific = wg;
  L->threads = cfg.threads();
  L->loader_threads = warp_spec ? 128 : L->threads;
  L->epilogue_threads = (cfg.bm / 64) * 128;
  L->sync_stores = L->mainloop == Mainloop::WgmmaWarpSpecialized && !(s.a_async && s.b_async);
}

// The M tile's output-pixel block (spatial and row-folded TMA) and the row-folded A's rows.
void choose_pixel_blocks(const ContractionShape& s, ContractionLayout* L) {
  const bool spatial = L->loader == TmaLoader::PixelBlocks;
  const bool rowfold = L->loader == TmaLoader::RowFold;
  L->pixel_blocks = spatial || rowfold;
  if (!L->pixel_blocks) return;
  const auto [bh, bw] =
      spatial ? spatial_pixel_tile(s.ow, L->cfg.bm) : rowfold_pixel_tile(s.ow, L->cfg.bm);
  L->pixel_rows = bh;
  L->pixel_cols = bw;
  L->pixel_tiles_h = (s.oh + bh - 1) / bh;
  L->pixel_tiles_w = (s.ow + bw - 1) / bw;
  if (!rowfold) return;
  L->rowfold_chunks = static_cast<int>(s.s * s.c / 8);
  L->rowfold_sub_rows = (bw + L->rowfold_chunks - 1 + 7) / 8 * 8;
}

// The row-folded kernel's shared memory, as KcWgmmaWs lays it out (the kernel asserts it).
int rowfold_smem(const ContractionLayout& L) {
  const ContractionConfig& cfg = L.cfg;
  const int a_load = 8 / L.rowfold_chunks * L.pixel_rows * L.rowfold_sub_rows * 8;
  const int stage = (a_load + 511) / 512 * 512 + cfg.bn * 64;
  return stage * cfg.stages * 2 + 1024 + 2 * cfg.stages * 8;
}

// The epilogue's tile in shared memory: a TMA kernel whose M tiles are GEMM rows (plain GEMM
// boxes or im2col, not pixel blocks) keeps one BM x BN 16-bit tile after the stages, in the TMA
// boxes' layout, for a residual operand laid out like the output (loaded by the producer with
// the first k tile, so that the epilogue does not wait on its DRAM reads after the mainloop) and
// for the single 16-bit output (stored by one thread with TMA: whole 128-byte rows, asynchronous,
// where the per-fragment stores write 16 bytes of each of 8 rows per warp instruction). Only
// where the tile does not cost a CTA per SM.
void choose_epilogue_tile(const ContractionShape& s, ContractionLayout* L) {
  const ContractionConfig& cfg = L->cfg;
  L->stage_bytes =
      (int64_t{cfg.stages} * (cfg.bm + cfg.bn) * cfg.bk * 2 + 16 * cfg.stages + 1023) / 1024 * 1024;
  L->tile_bytes = int64_t{cfg.bm} * cfg.bn * 2;
  const int64_t with_tile = 1024 + L->stage_bytes + L->tile_bytes + 8;
  const bool fits = ctas_per_sm(with_tile) >= std::max<int64_t>(1, ctas_per_sm(cfg.smem_bytes()));
  L->tile_eligible = L->mainloop == Mainloop::WgmmaTma && !L->pixel_blocks && cfg.split_k == 1 &&
                     s.n >= 0 && s.n % 8 == 0 && cfg.bn % 64 == 0;
  const bool tile = L->tile_eligible && s.pairs && fits;
  L->residual = tile && s.prefetch_allowed ? s.residual : -1;
  L->tma_store = tile && s.tma_store_allowed ? s.tile_output : -1;
  L->smem_bytes = L->tile_in_smem()                 ? static_cast<int>(with_tile)
                  : L->loader == TmaLoader::RowFold ? rowfold_smem(*L)
                                                    : cfg.smem_bytes();
}

}  // namespace

ContractionLayout contraction_layout(const ContractionShape& s, const ContractionConfig& cfg,
                                     int sm) {
  ContractionLayout L;
  L.cfg = cfg;
  // Split-K (grid.z = splits) takes convs and unbatched matmuls; a batched matmul's grid.z is
  // its batch and it runs unsplit.
  if (s.batched) L.cfg.split_k = 1;
  L.cfg.split_k = std::max(1, L.cfg.split_k);
  choose_mainloop(s, &L);
  KILN_CHECK(!L.arch_specific || sm == 90, "{}: config {} is sm_90a code, the target is sm_{}",
             s.where, L.cfg.str(), sm);
  choose_pixel_blocks(s, &L);
  // The grid order: N tiles fastest where there are a few of them (static N), else M tiles.
  L.tiles_n = s.n >= 0 ? (s.n + L.cfg.bn - 1) / L.cfg.bn : 0;
  L.n_fast = L.tiles_n > 1 && L.tiles_n <= 8;
  L.cols_exact = s.n >= 0 && s.n % L.cfg.bn == 0;
  L.pair_stores = s.pairs;
  choose_epilogue_tile(s, &L);
  return L;
}

}  // namespace kiln
