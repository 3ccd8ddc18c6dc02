// The warp-specialized sm_90a wgmma kernel fed by TMA (contraction_wgmma.cuh: KcWgmmaWs<.., TMA>):
// one producer thread issues whole boxes per stage (the loader the layout names), the consumer
// warpgroups wait on the stages' mbarriers and run wgmma; the epilogue may read a prefetched
// residual tile and store the output tile by TMA (contraction_epilogue_tile.cuh).
#include "codegen/contraction/tensor_core.hpp"
#include "engine/base/check.hpp"

namespace kiln::contraction {

void emit_wgmma_tma(TcKernel& k) {
  const ContractionLayout& L = k.L;
  const ContractionConfig& cfg = L.cfg;
  const bool b_kmajor = k.v.bop.kmajor;
  k.device.raw(wgmma_instruction(cfg.bn, k.p.dtype == DType::BF16, b_kmajor));
  if (L.loader == TmaLoader::RowFold) {
    k.device.line("typedef KcWgmmaWs<{}, {}, {}, true, false, true, {}, {}> G;", cfg.bm, cfg.bn,
                  cfg.stages, L.rowfold_chunks, L.pixel_cols);
    k.device.line("static_assert(G::A_SUB_ROWS == {} && G::SMEM_BYTES == {}, \"row-fold layout\");",
                  L.rowfold_sub_rows, L.smem_bytes);
  } else {
    k.device.line("typedef KcWgmmaWs<{}, {}, {}, {}, false, true> G;", cfg.bm, cfg.bn, cfg.stages,
                  b_kmajor ? "true" : "false");
  }
  emit_tile_origin(k);
  emit_tile_decode(k);
  switch (L.loader) {
    case TmaLoader::RowFold:
      emit_rowfold_loader(k);
      break;
    case TmaLoader::Im2col:
      emit_im2col_loader(k);
      break;
    case TmaLoader::PixelBlocks:
      emit_pixel_blocks_loader(k);
      break;
    case TmaLoader::GemmRows:
      emit_gemm_rows_loaders(k);
      break;
    case TmaLoader::None:
      KILN_ASSERT(false, "{}: a TMA kernel without a TMA loader", k.p.where);
  }
  emit_k_range(k);
  emit_mainloop_call(k);
  emit_epilogue(k);
}

}  // namespace kiln::contraction
