// The mma.sync kernel (sm_80+, codegen/device/contraction_mma.cuh: KcGemm): every thread issues
// the cp.async copies of a multistage pipeline and runs m16n8k16 on its warp tile; split-K
// reduces the partial tiles before the epilogue.
#include "codegen/contraction/tensor_core.hpp"

namespace kiln::contraction {

void emit_mma_sync(TcKernel& k) {
  const ContractionConfig& cfg = k.L.cfg;
  auto tf = [](bool v) { return v ? "true" : "false"; };
  k.device.line("typedef KcGemm<{}, {}, {}, {}, {}, {}, {}, {}, {}> G;", cfg.bm, cfg.bn, cfg.bk,
                cfg.wm, cfg.wn, cfg.stages, tf(k.v.aop.kmajor), tf(k.v.bop.kmajor),
                tf(k.p.dtype == DType::BF16));
  emit_tile_origin(k);
  emit_tile_decode(k);
  emit_cp_async_loaders(k, "tid", "threadIdx.x");
  emit_k_range(k);
  emit_mainloop_call(k);
  emit_split_k_reduction(k);
  emit_epilogue(k);
}

}  // namespace kiln::contraction
