// The sm_90a wgmma kernel fed by cp.async (codegen/device/contraction_wgmma.cuh: KcWgmma): every
// thread issues the copies of a multistage pipeline, BM / 64 warpgroups run wgmma on 64 rows x BN
// each; split-K reduces the partial tiles before the epilogue.
#include "codegen/contraction/tensor_core.hpp"

namespace kiln::contraction {

void emit_wgmma_cpasync(TcKernel& k) {
  const ContractionConfig& cfg = k.L.cfg;
  const bool b_kmajor = k.v.bop.kmajor;
  k.device.raw(wgmma_instruction(cfg.bn, k.p.dtype == DType::BF16, b_kmajor));
  k.device.line("typedef KcWgmma<{}, {}, {}, {}> G;", cfg.bm, cfg.bn, cfg.stages,
                b_kmajor ? "true" : "false");
  emit_tile_origin(k);
  emit_tile_decode(k);
  emit_cp_async_loaders(k, "tid", "threadIdx.x");
  emit_k_range(k);
  emit_mainloop_call(k);
  emit_split_k_reduction(k);
  emit_epilogue(k);
}

}  // namespace kiln::contraction
