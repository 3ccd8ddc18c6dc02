// Row-folded TMA of a conv (contraction_wgmma.cuh: one output column per 16 bytes of input,
// whole 16-byte chunks per filter row: the RGB stem padded to 4 channels and 8 filter columns).
// k tile kt is filter rows kt * A_SLOTS ..; for each slot and tile row, one box of A_SUB_ROWS
// 16-byte chunks of the input row (the map: chunks of 8 values along W x C, rows, images; no
// swizzle). Chunks and rows outside the image read as zero (the padding), and so do filter rows
// past R, whose filter values are zero too. B: the KRSC filter, one row = S x C contiguous values.
#include "codegen/contraction/tensor_core.hpp"

namespace kiln::contraction {

void emit_rowfold_loader(TcKernel& k) {
  Writer& b = k.body;
  const ConvProblem& c = k.p.conv;
  const Dim chunks(c.w.value() * c.c / 8);
  const std::string ma = k.a.tensor_map(k.p.x, {Dim(8), chunks, c.h, c.n},
                                        {Dim(8), Dim(c.c) * c.w, Dim(c.c) * c.w * c.h},
                                        {8, k.L.rowfold_sub_rows, 1, 1}, {1, 1, 1, 1}, 0);
  b.open("auto load_a = [&](unsigned short* s, int kt, unsigned bar) {{");
  b.line("#pragma unroll");
  b.open("for (int j = 0; j < G::A_SLOTS; ++j) {{");
  b.line("const int r = kt * G::A_SLOTS + j;");
  b.line("#pragma unroll");
  b.line("for (int i = 0; i < G::A_BH; ++i)");
  b.line(
      "  kc_tma_load_4d(kc_smem_u32(s + (j * G::A_BH + i) * G::A_SUB_ROWS * 8), &{}, 0, "
      "(int)sp_ow0 - {}, (int)(sp_oh0 + i) * {} - {} + r * {}, (int)sp_n, bar);",
      ma, c.pad_l * c.c / 8, c.stride_h, c.pad_t, c.dil_h);
  b.close();
  b.close("};");
  emit_tma_b_rows_loader(k, Dim(c.r * c.s * c.c));
}

}  // namespace kiln::contraction
