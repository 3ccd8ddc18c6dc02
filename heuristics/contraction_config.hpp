// Tile choice for conv2d / matmul kernels: from the GEMM view (M, N, K), the dtype, the target
// arch and the device's SM count and shared memory. A config always exists: problems the tensor
// core path cannot take get the direct SIMT kernel.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/types.hpp"

namespace kiln {

struct ContractionProblemInfo {
  int64_t m = 0, n = 0, k = 0;  // GEMM view; symbolic dims estimated (see m_is_estimate)
  int64_t batch = 1;            // independent GEMMs (batched matmul)
  bool m_is_estimate = false;   // M depends on a symbol (the batch size)
  DType dtype = DType::F16;
  int sm = 90;         // compute capability
  int sm_count = 132;  // SMs on the target
  int smem_optin = 232448;
  bool mma_ok = true;   // the tensor-core path supports the layout / group count
  bool simt_ok = true;  // the tiled SIMT path supports it (groups == 1)
  // The grouped / depthwise NHWC kernel takes it (heuristics/grouped_conv_layout.hpp).
  bool grouped_ok = false;
  // The sm_90a wgmma path is allowed (target is exactly sm_90 and accepts arch-specific code)
  // and supports the operands (A K-major).
  bool wgmma_ok = false;
  // The wgmma path can load the operands with TMA (the warp-specialized kernel, one producer
  // thread): as a plain GEMM (unbatched matmul, 1x1 stride-1 conv), or as a spatially tiled conv
  // (static output size oh x ow over `images` images; M tiles are pixel blocks of one image).
  bool tma_gemm = false;
  bool tma_spatial = false;
  int64_t images = 0, oh = 0, ow = 0;
  // With tma_spatial: the conv can also load A with im2col-mode TMA (GEMM rows = consecutive
  // output pixels across rows and images: no partial pixel blocks), the rule where allowed.
  bool tma_im2col = false;
  // The conv's A can be row-folded (a filter row is a few 16-byte chunks of consecutive input
  // pixels, one output column per chunk: the RGB stem padded to 4 channels and 8 filter columns),
  // loaded as whole input rows by TMA: the rule where allowed.
  bool tma_rowfold = false;
};

struct ContractionConfig {
  // Direct: one thread per output (the fallback). Grouped: the grouped / depthwise NHWC conv
  // kernel (several channels and pixels per thread, f32 math). Simt: tiled 128x128x8 f32-math
  // kernel. Mma: tensor cores via mma.sync (f16/bf16, sm_80+). Wgmma: sm_90a warpgroup MMA
  // (wm = 64 rows per warpgroup, wn = bn, bk = 64).
  enum class Kind { Direct, Simt, Mma, Wgmma, Grouped } kind = Kind::Direct;
  int bm = 0, bn = 0, bk = 0;  // block tile
  int wm = 0, wn = 0;          // warp tile
  int stages = 0;
  int split_k = 1;
  // Wgmma only: a producer warpgroup issues the loads, the BM / 64 consumer warpgroups only
  // wait on mbarriers and run wgmma (no CTA barrier in the mainloop). Not with split-K.
  bool ws = false;
  // With ws: the producer is one thread issuing TMA box loads (plain GEMM operands only: an
  // unbatched matmul with A not transposed, or a 1x1 stride-1 conv; 16-byte aligned rows).
  bool tma = false;
  // With tma on a conv that is not a plain GEMM: A arrives by im2col-mode TMA (BM consecutive
  // output pixels per load, one load per filter tap and 64 channels) instead of one 4-D box per
  // pixel block of one image (the spatial tiling).
  bool im2col = false;
  // With tma on a conv whose A can be row-folded (ContractionProblemInfo::tma_rowfold).
  bool rowfold = false;
  int threads() const {
    if (kind == Kind::Wgmma) return bm / 64 * 128 + (ws ? 128 : 0);
    return kind == Kind::Mma ? (bm / wm) * (bn / wn) * 32 : 256;
  }
  int smem_bytes() const {
    if (kind == Kind::Wgmma)  // + 1024-B alignment (+ the stage mbarriers)
      return (bm + bn) * bk * 2 * stages + 1024 + (ws ? 16 * stages : 0);
    return kind == Kind::Mma ? (bm + bn) * bk * 2 * stages : 0;
  }
  // "t128x128x32_s4" / "wg128x256x64_s4" / "wg128x256x64_s4_ws" / "..._tma" / "..._i2c" (TMA,
  // im2col) / "..._rf" (TMA, row-folded A) / "simt" / "grouped" / "direct"
  std::string str() const;
};

ContractionConfig choose_contraction_config(const ContractionProblemInfo& p);
// An sm_90a wgmma tile BM x BN x 64: 64 rows per warpgroup, the whole BN per warpgroup.
ContractionConfig wgmma_tile(int bm, int bn, int stages, int split_k = 1);
// The same tile, warp-specialized with TMA loads (im2col: a conv's A by im2col-mode TMA).
ContractionConfig wgmma_tma_tile(int bm, int bn, int stages, bool im2col = false);
// The same tile with a row-folded A (a smaller A region than smem_bytes() reserves).
ContractionConfig wgmma_rowfold_tile(int bm, int bn, int stages);
// The output-pixel block (rows x columns of one image) of a spatially tiled TMA conv CTA.
std::pair<int, int> spatial_pixel_tile(int64_t ow, int bm);
// The best mma.sync config alone (the fallback when wgmma is not allowed or not wanted).
ContractionConfig choose_mma_config(const ContractionProblemInfo& p);
// The best wgmma config; kind stays Direct when p.wgmma_ok is false.
ContractionConfig choose_wgmma_config(const ContractionProblemInfo& p);

// What autotuning measures: the rules' choice first, then the other valid configs of the same
// path (wgmma tiles x pipeline depths, split-K for a concrete single-GEMM M; or the mma.sync
// tiles), each fitting shared memory, no duplicates, at most `max`. Direct / SIMT problems have
// one candidate (nothing to tune).
std::vector<ContractionConfig> contraction_candidates(const ContractionProblemInfo& p,
                                                      size_t max = 16);
bool operator==(const ContractionConfig& a, const ContractionConfig& b);

}  // namespace kiln
