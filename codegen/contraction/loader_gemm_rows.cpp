// TMA over plain GEMM operands (an unbatched matmul with A not transposed, or batch dims folded
// into its rows; a 1x1 stride-1 conv): A as 2-D boxes of BM rows x 64 k (128-byte swizzle: the
// layout the wgmma descriptors read), B as BN K-major rows or 64 x 64 boxes per 64-column slab.
#include "codegen/contraction/tensor_core.hpp"

namespace kiln::contraction {

void emit_gemm_rows_loaders(TcKernel& k) {
  Writer& b = k.body;
  const Dim kdim = k.p.is_conv ? Dim(k.p.conv.c) : k.p.mm.k;
  const std::string ma = k.a.tensor_map_2d(k.p.x, k.v.gm, kdim, kdim, k.L.cfg.bm, 64);
  b.open("auto load_a = [&](unsigned short* s, int kt, unsigned bar) {{");
  b.line("kc_tma_load_2d(kc_smem_u32(s), &{}, kt * 64, (int)m0, bar);", ma);
  b.close("};");
  if (k.v.bop.kmajor) {  // conv filter [K, C] / transposed B [N, K]: one box of BN rows
    emit_tma_b_rows_loader(k, kdim);
    return;
  }
  // B [K, N]: one 64 x 64 box per 64-column slab
  const std::string mb = k.a.tensor_map_2d(k.p.w, kdim, k.v.gn, k.v.gn, 64, 64);
  b.open("auto load_b = [&](unsigned short* s, int kt, unsigned bar) {{");
  b.line("#pragma unroll");
  b.line("for (int j = 0; j < {}; ++j)", k.L.cfg.bn / 64);
  b.line("  kc_tma_load_2d(kc_smem_u32(s + j * 64 * 64), &{}, (int)n0 + j * 64, kt * 64, bar);",
         mb);
  emit_residual_prefetch(k);
  b.close("};");
}

}  // namespace kiln::contraction
