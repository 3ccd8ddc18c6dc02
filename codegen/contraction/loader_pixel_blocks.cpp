// TMA of a conv tiled by blocks of output pixels of one image (KcWgmmaWs, the spatial form): k
// tile kt is filter tap (r, s) x 64 channels, A a [BH][BW][64] box of the NHWC input at the
// tap's offset (traversal stride = conv stride); taps outside the image read zeros (padding).
#include "codegen/contraction/tensor_core.hpp"

namespace kiln::contraction {

void emit_pixel_blocks_loader(TcKernel& k) {
  const ConvProblem& c = k.p.conv;
  const int bh = k.L.pixel_rows, bw = k.L.pixel_cols;
  const std::string ma = k.a.tensor_map(
      k.p.x, {Dim(c.c), c.w, c.h, c.n}, {Dim(c.c), Dim(c.c) * c.w, Dim(c.c) * c.w * c.h},
      {64, static_cast<int>(bw * c.stride_w), static_cast<int>(bh * c.stride_h), 1},
      {1, static_cast<int>(c.stride_w), static_cast<int>(c.stride_h), 1});
  emit_tap_loader(k, fmt::format("kc_tma_load_4d(kc_smem_u32(s), &{}, cb * 64, (int)sp_ow0 * {} - "
                                 "{} + sx * {}, (int)sp_oh0 * {} - {} + r * {}, (int)sp_n, bar);",
                                 ma, c.stride_w, c.pad_l, c.dil_w, c.stride_h, c.pad_t, c.dil_h));
  emit_tma_b_rows_loader(k, Dim(c.r * c.s * c.c));  // filter KRSC: row k is (r, s, c)
}

}  // namespace kiln::contraction
