// Which tensor-core paths a conv2d / matmul problem's operands allow: mma.sync, wgmma (A
// K-major), and the TMA loads (plain GEMM boxes, pixel blocks, im2col, row-folded).
#include "codegen/contraction/tensor_core.hpp"

namespace kiln::contraction {

bool mma_supported(const Problem& p) {
  if (p.dtype != DType::F16 && p.dtype != DType::BF16) return false;
  const Graph& g = *p.graph;
  if (p.is_conv) {
    if (p.conv.groups != 1) return false;
    if (g.tensor(p.x).desc.layout != Layout::NHWC) return false;
    return true;
  }
  return true;
}

bool wgmma_supported(const Problem& p) {
  if (!mma_supported(p)) return false;
  // A must be K-major (conv: always; matmul: not transposed).
  return p.is_conv || !p.mm.ta;
}

bool tma_supported(const Problem& p) {
  if (!wgmma_supported(p) || (p.dtype != DType::F16 && p.dtype != DType::BF16)) return false;
  const Graph& g = *p.graph;
  const TensorDesc& xd = g.tensor(p.x).desc;
  const TensorDesc& wd = g.tensor(p.w).desc;
  if (p.is_conv) {  // a 1x1 stride-1 conv over dense NHWC is a GEMM of [N*H*W, C] x [K, C]^T
    const ConvProblem& c = p.conv;
    return c.r == 1 && c.s == 1 && c.stride_h == 1 && c.stride_w == 1 && c.pad_t == 0 &&
           c.pad_l == 0 && c.groups == 1 && c.c % 8 == 0 && xd.layout == Layout::NHWC &&
           wd.layout == Layout::NHWC && c.oh == c.h && c.ow == c.w;
  }
  // An unbatched matmul of dense row-major operands (or batch dims folded into M), A not
  // transposed; rows 16-byte aligned.
  const MatmulProblem& m = p.mm;
  if (m.ta || (xd.shape.size() != 2 && m.fold.empty()) || wd.shape.size() != 2) return false;
  if (xd.layout != Layout::NCHW || wd.layout != Layout::NCHW) return false;
  if (!m.k.is_static() || m.k.value() % 8 != 0) return false;
  return m.tb || (m.n.is_static() && m.n.value() % 8 == 0);
}

// The im2col bounding box's upper corner along one spatial dim (offset from the last input
// element): the window of the last output position starts at (out - 1) * stride - pad.
int64_t im2col_upper(int64_t in, int64_t out, int64_t stride, int64_t pad) {
  return (out - 1) * stride - pad - (in - 1);
}

bool tma_spatial_supported(const Problem& p) {
  if (!p.is_conv || !wgmma_supported(p) || (p.dtype != DType::F16 && p.dtype != DType::BF16))
    return false;
  const Graph& g = *p.graph;
  const ConvProblem& c = p.conv;
  return c.groups == 1 && c.c % 64 == 0 && c.stride_h <= 8 && c.stride_w <= 8 && c.h.is_static() &&
         c.w.is_static() && c.oh.is_static() && c.ow.is_static() &&
         g.tensor(p.x).desc.layout == Layout::NHWC && g.tensor(p.w).desc.layout == Layout::NHWC;
}

bool tma_im2col_supported(const Problem& p) {
  if (!tma_spatial_supported(p)) return false;
  const ConvProblem& c = p.conv;
  // The 4-D map's bounding-box corners are signed 8-bit, the tap offsets 16-bit.
  auto corner = [](int64_t v) { return v >= -128 && v <= 127; };
  return corner(-c.pad_l) && corner(-c.pad_t) &&
         corner(im2col_upper(c.w.value(), c.ow.value(), c.stride_w, c.pad_l)) &&
         corner(im2col_upper(c.h.value(), c.oh.value(), c.stride_h, c.pad_t)) &&
         (c.s - 1) * c.dil_w < 65536 && (c.r - 1) * c.dil_h < 65536;
}

bool tma_rowfold_supported(const Problem& p) {
  if (!p.is_conv || !wgmma_supported(p) || (p.dtype != DType::F16 && p.dtype != DType::BF16))
    return false;
  const Graph& g = *p.graph;
  const ConvProblem& c = p.conv;
  const int64_t row = c.s * c.c;  // one filter row's elements: whole 16-byte chunks
  return c.groups == 1 && c.c * c.stride_w == 8 && c.dil_w == 1 &&
         (row == 16 || row == 32 || row == 64) && c.pad_l * c.c % 8 == 0 && c.h.is_static() &&
         c.w.is_static() && c.oh.is_static() && c.ow.is_static() && c.w.value() * c.c % 8 == 0 &&
         g.tensor(p.x).desc.layout == Layout::NHWC && g.tensor(p.w).desc.layout == Layout::NHWC;
}

}  // namespace kiln::contraction
