// conv2d / conv_transpose2d / matmul problems from a Contraction group: the anchor's dims and
// attributes, the batch dims a matmul can fold into GEMM rows, and the bytes and FLOPs the roofline
// reports.
#include <set>

#include "codegen/contraction_common.hpp"
#include "engine/base/check.hpp"

namespace kiln::contraction {
namespace {

std::string group_where(const Graph& g, const FusionGroup& grp) {
  std::string s = fmt::format("group {} (", grp.id);
  for (size_t i = 0; i < grp.nodes.size(); ++i)
    s += (i ? " " : "") + g.nodes().at(grp.nodes[i]).name;
  return s + ")";
}

}  // namespace

Problem describe(const Graph& g, const FusionGroup& grp) {
  Problem p;
  p.graph = &g;
  p.group = &grp;
  p.where = group_where(g, grp);
  KILN_ASSERT(grp.anchor >= 0 && grp.anchor < static_cast<int>(g.nodes().size()),
              "contraction group {} has no anchor", grp.id);
  const Node& n = g.nodes()[grp.anchor];
  p.anchor = &n;
  KILN_ASSERT(n.op == OpKind::Conv2d || n.op == OpKind::Matmul || n.op == OpKind::ConvTranspose2d,
              "anchor {} is not a contraction", n.name);
  p.is_conv = n.op == OpKind::Conv2d;
  p.is_conv_transpose = n.op == OpKind::ConvTranspose2d;
  p.x = n.inputs[0];
  p.w = n.inputs[1];
  p.bias = n.inputs.size() > 2 ? n.inputs[2] : -1;
  p.y = n.outputs[0];
  const TensorDesc& xd = g.tensor(p.x).desc;
  const TensorDesc& wd = g.tensor(p.w).desc;
  const TensorDesc& yd = g.tensor(p.y).desc;
  p.dtype = xd.dtype;
  if (conv_like(p)) {
    ConvProblem& c = p.conv;
    c.n = xd.shape[0];
    c.h = xd.shape[2];
    c.w = xd.shape[3];
    c.oh = yd.shape[2];
    c.ow = yd.shape[3];
    c.c = xd.shape[1].value();
    c.k = p.is_conv ? wd.shape[0].value() : yd.shape[1].value();
    c.r = wd.shape[2].value();
    c.s = wd.shape[3].value();
    c.groups = n.attr_int("groups");
    const auto& st = n.attr_ints("stride");
    const auto& dl = n.attr_ints("dilation");
    const auto& pd = n.attr_ints("padding");
    c.stride_h = st.at(0);
    c.stride_w = st.size() > 1 ? st[1] : st[0];
    c.dil_h = dl.at(0);
    c.dil_w = dl.size() > 1 ? dl[1] : dl[0];
    c.pad_t = pd.at(0);
    c.pad_l = pd.size() > 1 ? pd[1] : pd[0];
  } else {
    MatmulProblem& m = p.mm;
    m.ta = n.attr_int("transpose_a") != 0;
    m.tb = n.attr_int("transpose_b") != 0;
    size_t ra = xd.shape.size(), rb = wd.shape.size();
    m.m = m.ta ? xd.shape[ra - 1] : xd.shape[ra - 2];
    m.k = m.ta ? xd.shape[ra - 2] : xd.shape[ra - 1];
    m.n = m.tb ? wd.shape[rb - 2] : wd.shape[rb - 1];
    m.batch.assign(yd.shape.begin(), yd.shape.end() - 2);
  }
  return p;
}

Problem fold_matmul_batch(const Problem& p) {
  if (conv_like(p) || p.mm.batch.empty() || p.mm.ta || !p.mm.fold.empty()) return p;
  const Graph& g = *p.graph;
  const TensorDesc& xd = g.tensor(p.x).desc;
  const TensorDesc& wd = g.tensor(p.w).desc;
  const TensorDesc& yd = g.tensor(p.y).desc;
  // A's rows are GEMM rows at one stride when A is row-major; the output may be strided (a
  // transpose stored in place, a concat input): the epilogue addresses it through the folded
  // row's coordinates (epilogue_coords), never as rows of one stride.
  const bool y_ok = yd.layout == Layout::NCHW || yd.layout == Layout::Strided;
  if (wd.shape.size() != 2 || xd.layout != Layout::NCHW || !y_ok ||
      xd.shape.size() != yd.shape.size())
    return p;
  for (size_t i = 0; i < p.mm.batch.size(); ++i)
    if (!(xd.shape[i] == yd.shape[i])) return p;  // A broadcast along a batch dim
  Problem f = p;
  f.mm.fold = p.mm.batch;
  f.mm.batch.clear();
  f.mm.m_inner = p.mm.m;
  for (const Dim& d : f.mm.fold) f.mm.m = f.mm.m * d;
  return f;
}

Dim bytes_moved(const Problem& p) {
  const Graph& g = *p.graph;
  Dim b(0);
  std::set<int> seen;
  auto add = [&](int t) {
    if (!seen.insert(t).second) return;
    const TensorDesc& d = g.tensor(t).desc;
    b = b + shape_numel(d.shape) * Dim(static_cast<int64_t>(dtype_size(d.dtype)));
  };
  for (int t : p.group->inputs) add(t);
  for (int t : p.group->outputs) add(t);
  return b;
}

Dim flops(const Problem& p) {
  const Graph& g = *p.graph;
  Dim out = shape_numel(g.tensor(p.y).desc.shape);
  if (p.is_conv) return out * Dim(2 * p.conv.r * p.conv.s * (p.conv.c / p.conv.groups));
  // Each input value meets every tap of its group's filters once.
  if (p.is_conv_transpose)
    return shape_numel(g.tensor(p.x).desc.shape) *
           Dim(2 * p.conv.r * p.conv.s * (p.conv.k / p.conv.groups));
  return out * Dim(2) * p.mm.k;
}

}  // namespace kiln::contraction
