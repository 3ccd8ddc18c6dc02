// The layout of a conv2d / matmul tensor-core kernel: everything the emitters need decided before
// they print (the mainloop, how A arrives, the threads, the M tile's pixel block, the grid order,
// split-K, the shared-memory regions, the epilogue's residual prefetch and TMA store). A pure
// function of a small problem description and the chosen config; codegen/contraction/ prints what
// it says and never decides again.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "heuristics/contraction_config.hpp"

namespace kiln {

// What the layout needs to know of a problem (codegen/contraction/ fills it in from the graph).
struct ContractionShape {
  std::string where;  // "group 3 (conv1 relu)" for messages
  bool is_conv = false;
  bool batched = false;      // a matmul whose batch dims stay the grid's z (not folded into M)
  int64_t n = -1;            // GEMM N (a conv's K) when static, else -1
  int64_t oh = -1, ow = -1;  // a conv's output size when static, else -1
  int64_t c = 0, s = 0;      // a conv's input channels and filter columns
  // Which paths the operands allow (codegen/contraction_common.hpp: wgmma_supported,
  // tma_supported, tma_spatial_supported, tma_im2col_supported, tma_rowfold_supported).
  bool wgmma = false;
  bool tma_gemm = false;     // A and B as 2-D boxes of plain GEMM operands
  bool tma_spatial = false;  // a conv's A as 4-D boxes of pixel blocks of one image
  bool tma_im2col = false;   // ... or by im2col-mode TMA over GEMM rows
  bool tma_rowfold = false;  // a conv's A as whole input rows per filter row
  // The cp.async loaders copy only whole 8- or 16-byte chunks of A / of B (else some elements
  // are gathered and stored to shared memory synchronously).
  bool a_async = true, b_async = true;
  // Every output stores a pair of adjacent columns as one word (outputs_pair_storable).
  bool pairs = false;
  // Tensor ids, -1 where none: the first 16-bit epilogue operand laid out like the anchor output
  // (a residual), and the group's single output where it is 16-bit and laid out likewise.
  int residual = -1, tile_output = -1;
  // KILN_SCHEDULE: contraction.prefetch=2 / contraction.tmastore=2 switch these off.
  bool prefetch_allowed = true, tma_store_allowed = true;
};

enum class ContractionMainloop {
  MmaSync,               // mma.sync m16n8k16, every thread issues cp.async (KcGemm)
  WgmmaCpAsync,          // wgmma, every thread issues cp.async (KcWgmma)
  WgmmaWarpSpecialized,  // wgmma, a producer warpgroup issues cp.async (KcWgmmaWs)
  WgmmaTma,              // wgmma, one producer thread issues TMA boxes (KcWgmmaWs, TMA)
};
// How the TMA kernel loads A (B is always 2-D boxes of the filter or the B matrix).
enum class TmaLoader {
  None,         // not a TMA kernel
  GemmRows,     // 2-D boxes of BM GEMM rows (a matmul's A, a 1x1 stride-1 conv's input)
  PixelBlocks,  // a 4-D box per filter tap of a block of output pixels of one image
  Im2col,       // im2col-mode TMA over BM consecutive output pixels per filter tap
  RowFold,      // one box of an input row per filter row (contraction_wgmma.cuh)
};

struct ContractionLayout {
  ContractionMainloop mainloop = ContractionMainloop::MmaSync;
  TmaLoader loader = TmaLoader::None;
  ContractionConfig cfg;       // as it runs: split_k >= 1, and 1 for a batched matmul
  bool arch_specific = false;  // sm_90a code (wgmma)
  int threads = 0;             // per CTA
  int loader_threads = 0;      // threads issuing the cp.async loads (all, or the producer's)
  int epilogue_threads = 0;    // the consumer warpgroups' threads (wgmma), for named barriers
  bool sync_stores = false;    // KcWgmmaWs<SYNC_STORES>: see ContractionShape::a_async
  // M tiles are blocks of pixel_rows x pixel_cols output pixels of one image (spatial and
  // row-folded TMA), pixel_tiles_h x pixel_tiles_w blocks per image; else BM GEMM rows.
  bool pixel_blocks = false;
  int pixel_rows = 0, pixel_cols = 0;
  int64_t pixel_tiles_h = 0, pixel_tiles_w = 0;
  // The grid: N tiles fastest in a 1-D grid where N is static and has a few tiles (n_fast), else
  // (M tiles, N tiles, batch or split-K count).
  int64_t tiles_n = 0;  // 0 where N is symbolic
  bool n_fast = false;
  bool cols_exact = false;   // the tiles divide N: no column check in the epilogue
  bool pair_stores = false;  // the epilogue stores column pairs (ContractionShape::pairs)
  // Row-folded A: 16-byte chunks per filter row, 16-byte rows per slot and tile row.
  int rowfold_chunks = 0, rowfold_sub_rows = 0;
  // Shared memory, from the 1024-aligned start: the stages and their barriers (rounded up to
  // 1 KB), then the epilogue's BM x BN 16-bit tile (tile_bytes) and its barrier.
  int64_t stage_bytes = 0, tile_bytes = 0;
  // The kernel could hold the epilogue tile (TMA with M tiles of GEMM rows: plain GEMM boxes or
  // im2col; unsplit, a static N of whole 16-byte rows, BN a multiple of 64): whether it does
  // also takes the outputs and the fit.
  bool tile_eligible = false;
  int residual = -1;   // the tensor whose tile the producer prefetches by TMA, or -1
  int tma_store = -1;  // the output stored from the tile by TMA, or -1
  bool tile_in_smem() const { return residual >= 0 || tma_store >= 0; }
  int smem_bytes = 0;  // the launch's dynamic shared memory
};

// The layout of `cfg` (Kind::Mma or Kind::Wgmma) on `shape`; a TMA config whose operands do not
// allow it is a user error, a wgmma one the operands cannot take an internal one.
ContractionLayout contraction_layout(const ContractionShape& shape, const ContractionConfig& cfg,
                                     int sm);
// The output-pixel block (rows x columns of one image) of a row-folded conv CTA of BM pixels.
std::pair<int, int> rowfold_pixel_tile(int64_t ow, int bm);
// CTAs of `smem` bytes of dynamic shared memory that fit one sm_90 SM (228 KB, 1 KB reserved per
// CTA).
int64_t ctas_per_sm(int64_t smem);

}  // namespace kiln
