// A conv2d (implicit GEMM over NHWC activations) or matmul (batched, transposes) as the GEMM the
// tensor-core kernels run, and the facts of it that the layout reads.
#include <set>

#include "codegen/contraction/tensor_core.hpp"

namespace kiln::contraction {
namespace {

bool static_multiple(const Dim& d, int64_t m) {
  return d.is_static() && d.value() % m == 0;
}

void conv_view(const Problem& p, GemmView* v) {
  const ConvProblem& c = p.conv;
  const TensorDesc& wd = p.graph->tensor(p.w).desc;
  v->gm = c.n * c.oh * c.ow;
  v->gn = Dim(c.k);
  v->kred = fmt::format("{}", c.r * c.s * c.c);
  v->conv_a_vec = c.c % 8 == 0 && v->xst[1] == "1LL";
  v->conv_a_half = !v->conv_a_vec && c.c % 4 == 0 && v->xst[1] == "1LL";
  StridedOperand& b = v->bop;
  b.ptr = v->ws;
  b.base = "0";
  b.smn = v->wst[0];
  b.mn_ext = fmt::format("{}", c.k);
  b.k_ext = v->kred;
  b.kmajor = true;
  if (wd.layout == Layout::NHWC) {  // KRSC: (r, s, c) is one contiguous run
    b.sk = "1";
    b.vec = c.c % 8 == 0;
    b.half = !b.vec && c.c % 4 == 0;
  } else {
    b.conv_filter_kcrs = true;
    b.c = c.c;
    b.s = c.s;
    b.ws1 = v->wst[1];
    b.ws2 = v->wst[2];
    b.ws3 = v->wst[3];
  }
  v->name = fmt::format("conv_{}_nhwc_{}x{}", dtype_name(p.dtype), c.r, c.s);
  if (c.stride_h != 1 || c.stride_w != 1)
    v->name += (c.stride_h == c.stride_w ? fmt::format("_s{}", c.stride_h)
                                         : fmt::format("_s{}x{}", c.stride_h, c.stride_w));
  if (v->conv_a_half)
    v->name += "_c4";
  else if (!v->conv_a_vec)
    v->name += "_cscalar";
}

// 16-byte chunks along the operand's contiguous dim are whole and aligned: that dim's stride 1,
// every other stride a static multiple of 8, the contiguous extent a multiple of 8 (so a chunk is
// all in or all out).
bool vec_ok(const MatmulProblem& m, const TensorDesc& d, const StridedOperand& o,
            const Dim& mn_dim) {
  const std::string& contig = o.kmajor ? o.sk : o.smn;
  if (contig != "1LL") return false;
  if (!static_multiple(o.kmajor ? m.k : mn_dim, 8)) return false;
  if (d.layout == Layout::Strided) {
    for (size_t i = 0; i < d.strides.size(); ++i)
      if (d.strides[i] != 1 && d.strides[i] % 8 != 0) return false;
    return true;
  }
  // Row-major / NHWC: every stride is a product including the innermost physical extent.
  size_t r = d.shape.size();
  size_t inner = (d.layout == Layout::NHWC && r >= 3) ? 1 : r - 1;
  return static_multiple(d.shape[inner], 8);
}

void matmul_view(const Problem& p, ArgList& a, GemmView* v) {
  const MatmulProblem& m = p.mm;
  const TensorDesc& xd = p.graph->tensor(p.x).desc;
  const TensorDesc& wd = p.graph->tensor(p.w).desc;
  v->gm = m.m;
  v->gn = m.n;
  for (const Dim& d : m.batch) v->gbatch = v->gbatch * d;
  v->kred = a.dim(m.k);
  size_t ra = xd.shape.size(), rb = wd.shape.size(), nb = m.batch.size();
  auto base = [&](const TensorDesc& d, const std::vector<std::string>& st) {
    if (!m.fold.empty()) return std::string("0");  // A's batch dims are GEMM rows, B has none
    size_t ob = d.shape.size() - 2;
    std::string off;
    for (size_t i = 0; i < ob; ++i) {
      if (d.shape[i].is_static() && d.shape[i].value() == 1) continue;
      off += fmt::format("{}b{} * {}", off.empty() ? "" : " + ", nb - ob + i, st[i]);
    }
    return off.empty() ? std::string("0") : off;
  };
  // A: (m, k); contiguous along k unless transposed.
  StridedOperand& ao = v->aop;
  ao.ptr = v->xs;
  ao.base = base(xd, v->xst);
  ao.smn = m.ta ? v->xst[ra - 1] : v->xst[ra - 2];
  ao.sk = m.ta ? v->xst[ra - 2] : v->xst[ra - 1];
  ao.mn_ext = a.dim(m.m);
  ao.k_ext = v->kred;
  ao.kmajor = !m.ta;
  // B: (n, k); contiguous along k only when transposed.
  StridedOperand& bo = v->bop;
  bo.ptr = v->ws;
  bo.base = base(wd, v->wst);
  bo.smn = m.tb ? v->wst[rb - 2] : v->wst[rb - 1];
  bo.sk = m.tb ? v->wst[rb - 1] : v->wst[rb - 2];
  bo.mn_ext = a.dim(m.n);
  bo.k_ext = v->kred;
  bo.kmajor = m.tb;
  ao.vec = vec_ok(m, xd, ao, m.m);
  bo.vec = vec_ok(m, wd, bo, m.n);
  v->name = fmt::format("matmul_{}{}{}", dtype_name(p.dtype), m.ta ? "_ta" : "", m.tb ? "_tb" : "");
  if (nb) v->name += "_batched";
}

// A 16-bit tensor laid out like the anchor output (its tile is the output tile's).
bool like_output(const Problem& p, ArgList& a, int t) {
  const TensorDesc& td = p.graph->tensor(t).desc;
  const TensorDesc& yd = p.graph->tensor(p.y).desc;
  // The epilogue tile's TMA maps take a dense row stride: strided views (a concat input in its
  // place) are stored and read through their strides instead.
  return td.shape == yd.shape && td.layout == yd.layout && td.layout != Layout::Strided &&
         (td.dtype == DType::F16 || td.dtype == DType::BF16) &&
         stride_code(a, td) == stride_code(a, yd);
}

// The first epilogue operand laid out like the output (not computed in the group, not the bias).
int residual_operand(const Problem& p, ArgList& a) {
  const Graph& g = *p.graph;
  std::set<int> made{p.y};
  for (int ni : p.group->nodes)
    for (int t : g.nodes().at(ni).outputs) made.insert(t);
  for (int ni : p.group->nodes) {
    if (ni == p.group->anchor) continue;
    for (int t : g.nodes().at(ni).inputs)
      if (!made.count(t) && t != p.bias && like_output(p, a, t)) return t;
  }
  return -1;
}

}  // namespace

GemmView gemm_view(const Problem& p, ArgList& a) {
  const Graph& g = *p.graph;
  GemmView v;
  v.xs = a.tensor(g, p.x, true);
  v.ws = a.tensor(g, p.w, true);
  v.xst = stride_code(a, g.tensor(p.x).desc);
  v.wst = stride_code(a, g.tensor(p.w).desc);
  if (p.is_conv)
    conv_view(p, &v);
  else
    matmul_view(p, a, &v);
  return v;
}

ContractionShape layout_shape(const Problem& p, const GemmView& v, ArgList scratch) {
  ContractionShape s;
  s.where = p.where;
  s.is_conv = p.is_conv;
  s.batched = !p.is_conv && !p.mm.batch.empty();
  s.n = v.gn.is_static() ? v.gn.value() : -1;
  if (p.is_conv) {
    s.c = p.conv.c;
    s.s = p.conv.s;
    s.oh = p.conv.oh.is_static() ? p.conv.oh.value() : -1;
    s.ow = p.conv.ow.is_static() ? p.conv.ow.value() : -1;
  }
  s.wgmma = wgmma_supported(p);
  s.tma_gemm = tma_supported(p);
  s.tma_spatial = tma_spatial_supported(p);
  s.tma_im2col = tma_im2col_supported(p);
  s.tma_rowfold = tma_rowfold_supported(p);
  s.a_async = p.is_conv ? v.conv_a_vec || v.conv_a_half : v.aop.vec;
  s.b_async = v.bop.vec || v.bop.half;
  s.pairs = outputs_pair_storable(p, scratch);
  s.residual = residual_operand(p, scratch);
  if (p.group->outputs.size() == 1 && like_output(p, scratch, p.group->outputs[0]))
    s.tile_output = p.group->outputs[0];
  s.prefetch_allowed = p.prefetch_residual;
  s.tma_store_allowed = p.tma_store;
  return s;
}

}  // namespace kiln::contraction
