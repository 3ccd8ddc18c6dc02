// Shared rules of the strided views (engine/passes/strided_views.hpp).
#include "engine/passes/strided_views.hpp"

#include <optional>

#include "engine/base/check.hpp"
#include "engine/ir/graph_queries.hpp"
#include "engine/ir/movement_ops.hpp"
#include "engine/ir/op_table.hpp"

namespace kiln {

namespace {

bool matches(const std::vector<int64_t>& strides, const Shape& shape, Layout l) {
  TensorDesc d;
  d.shape = shape;
  d.layout = l;
  auto want = static_strides(d);
  if (!want || want->size() != strides.size()) return false;
  for (size_t i = 0; i < strides.size(); ++i)
    if (!(shape[i].is_static() && shape[i].value() == 1) && strides[i] != (*want)[i]) return false;
  return true;
}

// Whether row-statistics node `c` (layernorm, rmsnorm, softmax) reads `t` laid out with
// `strides` as whole dense rows: `t` is its data operand alone, the normalized dims trail and are
// dense, and every row starts 16 bytes aligned, so that the row-norm kernel reads it by 16-byte
// vectors from each row's start (codegen/rownorm).
bool row_norm_reads_rows(const Graph& g, const Node& c, int t,
                         const std::vector<int64_t>& strides) {
  if (strides.empty()) return false;
  if (op_info(c.op).role != FusionRole::RowStatistics || c.inputs[0] != t) return false;
  for (size_t k = 1; k < c.inputs.size(); ++k)
    if (c.inputs[k] == t) return false;
  const TensorDesc& d = g.tensor(t).desc;
  const int r = d.rank();
  if (strides.size() != static_cast<size_t>(r) || r == 0) return false;
  int64_t ax = c.attr_int("axis");
  if (ax < 0) ax += r;
  const bool one_axis = c.op == OpKind::Softmax || c.op == OpKind::LogSoftmax;
  if (ax < 0 || ax >= r || (one_axis && ax != r - 1)) return false;
  int64_t dense = 1;
  for (int k = r - 1; k >= ax; --k) {
    if (!d.shape[k].is_static()) return false;
    if (d.shape[k].value() != 1 && strides[k] != dense) return false;
    dense *= d.shape[k].value();
  }
  const int64_t es = dtype_size(d.dtype);
  for (int k = 0; k < ax; ++k)
    if (strides[k] * es % kViewAlignBytes != 0) return false;
  return true;
}

}  // namespace

Layout layout_of_strides(const std::vector<int64_t>& strides, const Shape& shape) {
  if (matches(strides, shape, Layout::NCHW)) return Layout::NCHW;
  if (shape.size() == 4 && matches(strides, shape, Layout::NHWC)) return Layout::NHWC;
  return Layout::Strided;
}

bool reader_takes_strides(const Graph& g, const Node& c, int t,
                          const std::vector<int64_t>& strides) {
  return op_info(c.op).role == FusionRole::Elementwise || row_norm_reads_rows(g, c, t, strides);
}

bool matmul_reads_operand(const Node& c, int t, const std::vector<int64_t>& strides) {
  if (c.op != OpKind::Matmul || strides.empty() || strides.back() != 1) return false;
  if (c.inputs[0] != t && c.inputs[1] != t) return false;
  return !(c.inputs.size() > 2 && c.inputs[2] == t);
}

bool all_readers_strided(const Graph& g, int t, const std::vector<int64_t>& strides) {
  if (is_graph_output(g, t)) return false;
  const std::vector<int> cs = consumers_of(g, t);
  if (cs.empty()) return false;
  for (int c : cs)
    if (!reader_takes_strides(g, g.nodes()[c], t, strides)) return false;
  return true;
}

// The output of slice or expand node `n` as strides (and an element offset) over the input's
// memory, if it is one: a slice with positive steps moves its start and scales its strides; an
// expand reads a broadcast dim (or a new leading one) at stride 0.
bool slice_view_strides(const Graph& g, const Node& n, const std::vector<int64_t>& in_strides,
                        std::vector<int64_t>* strides, int64_t* offset) {
  const TensorDesc& id = g.tensor(n.inputs[0]).desc;
  const TensorDesc& od = g.tensor(n.outputs[0]).desc;
  *offset = 0;
  if (n.op == OpKind::Slice) {
    std::vector<int64_t> dims(id.rank(), 1);
    for (int64_t ax : slice_axis_list(n, id.rank(), n.name)) {
      if (!id.shape[ax].is_static()) return false;
      dims[ax] = id.shape[ax].value();
    }
    const std::vector<SliceAxis> sa = slice_axes(n, dims);
    *strides = in_strides;
    for (size_t d = 0; d < sa.size(); ++d) {
      if (sa[d].step < 1) return false;
      *offset += sa[d].start * in_strides[d];
      (*strides)[d] *= sa[d].step;
    }
    return true;
  }
  const int ro = od.rank(), ri = id.rank();
  strides->assign(ro, 0);
  for (int d = 0; d < ro; ++d) {
    const int s = d - (ro - ri);
    if (s < 0) continue;
    const bool broadcast = id.shape[s].is_static() && id.shape[s].value() == 1 &&
                           !(od.shape[d].is_static() && od.shape[d].value() == 1);
    (*strides)[d] = broadcast ? 0 : in_strides[s];
  }
  return true;
}

std::optional<std::vector<int64_t>> reshape_view_strides(const Shape& from,
                                                         const std::vector<int64_t>& from_strides,
                                                         const Shape& to) {
  auto one = [](const Dim& d) { return d.is_static() && d.value() == 1; };
  // Whether a is known to hold fewer elements than b (a static count against a symbolic one
  // counts as fewer: symbolic dims are the outer ones, a batch).
  auto fewer = [](const Dim& a, const Dim& b) {
    if (a.is_static() && b.is_static()) return a.value() < b.value();
    return a.is_static();
  };
  std::vector<int64_t> out(to.size(), 0);
  int i = static_cast<int>(from.size()) - 1, o = static_cast<int>(to.size()) - 1;
  auto skip = [&](int& k, const Shape& s) {
    while (k >= 0 && one(s[k])) --k;
  };
  skip(i, from);
  skip(o, to);
  // From the innermost dims out: each run of `from` dims contiguous with each other is split
  // into `to` dims of the same element count.
  while (o >= 0) {
    if (i < 0) return std::nullopt;
    Dim have = from[i], want = to[o];
    const int64_t base = from_strides[i];
    out[o] = base;
    while (!(have == want)) {
      if (fewer(want, have)) {
        if (!want.is_static()) return std::nullopt;
        const int64_t step = base * want.value();
        --o;
        skip(o, to);
        if (o < 0) return std::nullopt;
        out[o] = step;
        want = want * to[o];
      } else if (fewer(have, want)) {
        if (!have.is_static()) return std::nullopt;
        const int inner = i;
        --i;
        skip(i, from);
        if (i < 0 || from_strides[i] != from_strides[inner] * from[inner].value()) {
          return std::nullopt;
        }
        have = have * from[i];
      } else {
        return std::nullopt;
      }
    }
    --i;
    --o;
    skip(i, from);
    skip(o, to);
  }
  skip(i, from);
  if (i >= 0) return std::nullopt;
  // A unit dim takes the stride of the dims inside it (any stride would do).
  int64_t inner = 1;
  for (size_t k = to.size(); k-- > 0;) {
    if (one(to[k]))
      out[k] = inner;
    else
      inner = out[k] * (to[k].is_static() ? to[k].value() : 1);
  }
  return out;
}

bool readers_take_strided(const Graph& g, int t, const std::vector<int64_t>& strides,
                          bool rows_only, int depth) {
  if (is_graph_output(g, t)) return false;
  const std::vector<int> cs = consumers_of(g, t);
  if (cs.empty()) return false;
  const int64_t es = static_cast<int64_t>(dtype_size(g.tensor(t).desc.dtype));
  for (int c : cs) {
    const Node& n = g.nodes()[c];
    if (row_norm_reads_rows(g, n, t, strides) || matmul_reads_operand(n, t, strides)) continue;
    if (!rows_only && op_info(n.op).role == FusionRole::Elementwise) continue;
    if (depth >= 4 || n.inputs[0] != t || !may_become_view(g, n.outputs[0])) return false;
    std::vector<int64_t> next;
    int64_t off = 0;
    if (n.op == OpKind::Slice) {
      if (!slice_view_strides(g, n, strides, &next, &off) || !offset_aligned(Dim(off), 1, es))
        return false;
    } else if (n.op == OpKind::Reshape) {
      auto r =
          reshape_view_strides(g.tensor(t).desc.shape, strides, g.tensor(n.outputs[0]).desc.shape);
      if (!r) return false;
      next = *r;
    } else {
      return false;
    }
    if (!readers_take_strided(g, n.outputs[0], next, rows_only, depth + 1)) return false;
  }
  return true;
}

bool writer_stores_strided(const Graph& g, int p) {
  if (p < 0) return false;
  const OpKind op = g.nodes()[p].op;
  const OpInfo& info = op_info(op);
  // global_avgpool runs the reduction kernel, whose split schedules store otherwise.
  return info.role == FusionRole::Elementwise || info.category == OpCategory::Contraction ||
         (info.category == OpCategory::Window && op != OpKind::GlobalAvgpool);
}

bool offset_aligned(const Dim& start, int64_t stride, int64_t es) {
  const int64_t unit = stride * es;
  if (start.is_static()) return (start.value() * unit) % kViewAlignBytes == 0;
  return unit % kViewAlignBytes == 0;
}

void make_view(Graph& g, int view, int root, const std::vector<int64_t>& strides,
               const Dim& offset) {
  TensorInfo& t = g.mutable_tensors()[view];
  KILN_ASSERT(t.view_of < 0 && root != view, "tensor {} is already a view", t.name);
  t.view_of = root;
  t.view_offset = offset;
  t.desc.layout = strides.empty() ? Layout::NCHW : layout_of_strides(strides, t.desc.shape);
  t.desc.strides = t.desc.layout == Layout::Strided ? strides : std::vector<int64_t>{};
}

bool may_become_view(const Graph& g, int t) {
  const TensorInfo& ti = g.tensor(t);
  if (ti.role != TensorRole::Intermediate || ti.view_of >= 0 || is_graph_output(g, t)) return false;
  for (const TensorInfo& o : g.tensors())
    if (o.view_of == t) return false;
  return true;
}

bool is_view_root(const Graph& g, int t) {
  const TensorInfo& ti = g.tensor(t);
  if (ti.role != TensorRole::Intermediate || ti.view_of >= 0 || is_graph_output(g, t)) return false;
  for (const TensorInfo& o : g.tensors())
    if (o.view_of == t) return true;
  return false;
}

bool is_strided_view(const Graph& g, int t) {
  const TensorInfo& ti = g.tensor(t);
  return ti.view_of >= 0 && ti.desc.layout == Layout::Strided;
}

}  // namespace kiln
