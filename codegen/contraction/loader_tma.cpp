// What the TMA loaders share: B as boxes of BN K-major rows (a conv's KRSC filter, a transposed
// matmul B), the residual tile's prefetch with the first k tile, and the frame of a conv's A
// loaded per filter tap. One producer thread calls `load_a(s, kt, bar)` / `load_b(s, kt, bar)`
// for each stage (KcWgmmaWs<.., TMA>); rows and k past the ends arrive as zeros.
#include "codegen/contraction/tensor_core.hpp"

namespace kiln::contraction {

void emit_residual_prefetch(TcKernel& k) {
  if (k.L.residual < 0) return;
  // contraction_epilogue_tile.cuh: BN / 64 boxes of BM x 64 (128-byte swizzle, as the operand
  // tiles), completing on the tile's own barrier.
  k.body.line("if (kt == 0) kc_tile_load<{}, {}>(kc_rtile, &kc_rmap, m0, n0, kc_rbar);", k.L.cfg.bm,
              k.L.cfg.bn);
}

void emit_tma_b_rows_loader(TcKernel& k, const Dim& kdim) {
  Writer& b = k.body;
  const std::string mb = k.a.tensor_map_2d(k.p.w, k.v.gn, kdim, kdim, k.L.cfg.bn, 64);
  b.open("auto load_b = [&](unsigned short* s, int kt, unsigned bar) {{");
  b.line("kc_tma_load_2d(kc_smem_u32(s), &{}, kt * 64, (int)n0, bar);", mb);
  emit_residual_prefetch(k);
  b.close("};");
}

void emit_tap_loader(TcKernel& k, const std::string& load) {
  Writer& b = k.body;
  const ConvProblem& c = k.p.conv;
  const int64_t cb = c.c / 64;
  b.open("auto load_a = [&](unsigned short* s, int kt, unsigned bar) {{");
  b.line("const int rs = kt / {}, cb = kt - rs * {};", cb, cb);
  b.line("const int r = rs / {}, sx = rs - r * {};", c.s, c.s);
  b.put(load);
  b.close("};");
}

}  // namespace kiln::contraction
