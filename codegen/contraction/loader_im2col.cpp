// im2col-mode TMA of a conv over GEMM rows: k tile kt is filter tap (r, s) x 64 channels, A one
// load of the tile's BM output pixels (consecutive GEMM rows, across output rows and images) at
// the tap's offset from each pixel's window; taps outside the image read zeros (padding).
#include "codegen/contraction/tensor_core.hpp"

namespace kiln::contraction {

void emit_im2col_loader(TcKernel& k) {
  Writer& b = k.body;
  const ConvProblem& c = k.p.conv;
  const int64_t oh = c.oh.value(), ow = c.ow.value();
  const std::string ma = k.a.tensor_map_im2col(
      k.p.x, {Dim(c.c), c.w, c.h, c.n}, {Dim(c.c), Dim(c.c) * c.w, Dim(c.c) * c.w * c.h},
      {1, static_cast<int>(c.stride_w), static_cast<int>(c.stride_h), 1},
      {static_cast<int>(-c.pad_l), static_cast<int>(-c.pad_t),
       static_cast<int>(im2col_upper(c.w.value(), ow, c.stride_w, c.pad_l)),
       static_cast<int>(im2col_upper(c.h.value(), oh, c.stride_h, c.pad_t)), 64, k.L.cfg.bm});
  // The tile's first output pixel (image, row, column) -> its window's top-left pixel.
  b.line("const int i2c_n = (int)(m0 / {});", oh * ow);
  b.line("const int i2c_h = (int)(m0 / {} % {}) * {} - {};", ow, oh, c.stride_h, c.pad_t);
  b.line("const int i2c_w = (int)(m0 % {}) * {} - {};", ow, c.stride_w, c.pad_l);
  emit_tap_loader(k, fmt::format("kc_tma_load_im2col_4d(kc_smem_u32(s), &{}, cb * 64, i2c_w, "
                                 "i2c_h, i2c_n, (unsigned short)(sx * {}), (unsigned short)(r * "
                                 "{}), bar);",
                                 ma, c.dil_w, c.dil_h));
  emit_tma_b_rows_loader(k, Dim(c.r * c.s * c.c));  // filter KRSC: row k is (r, s, c)
}

}  // namespace kiln::contraction
