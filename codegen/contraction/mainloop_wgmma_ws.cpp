// The warp-specialized sm_90a wgmma kernel fed by cp.async (contraction_wgmma.cuh: KcWgmmaWs):
// the producer warpgroup's 128 threads (ltid) issue the copies and hand stages over through
// mbarriers; the consumer warpgroups only wait and run wgmma (no CTA barrier in the mainloop).
#include "codegen/contraction/tensor_core.hpp"

namespace kiln::contraction {

void emit_wgmma_warp_specialized(TcKernel& k) {
  const ContractionConfig& cfg = k.L.cfg;
  const bool b_kmajor = k.v.bop.kmajor;
  k.device.raw(wgmma_instruction(cfg.bn, k.p.dtype == DType::BF16, b_kmajor));
  k.device.line("typedef KcWgmmaWs<{}, {}, {}, {}, {}> G;", cfg.bm, cfg.bn, cfg.stages,
                b_kmajor ? "true" : "false", k.L.sync_stores ? "true" : "false");
  emit_tile_origin(k);
  k.body.line("const int ltid = G::producer_tid();");
  emit_tile_decode(k);
  emit_cp_async_loaders(k, "ltid", "ltid");
  emit_k_range(k);
  emit_mainloop_call(k);
  emit_epilogue(k);
}

}  // namespace kiln::contraction
