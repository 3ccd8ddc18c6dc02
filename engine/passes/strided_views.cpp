// Shared rules of the strided views (engine/passes/strided_views.hpp).
#include "engine/passes/strided_views.hpp"

#include "engine/base/check.hpp"
#include "engine/ir/graph_queries.hpp"
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

}  // namespace

Layout layout_of_strides(const std::vector<int64_t>& strides, const Shape& shape) {
  if (matches(strides, shape, Layout::NCHW)) return Layout::NCHW;
  if (shape.size() == 4 && matches(strides, shape, Layout::NHWC)) return Layout::NHWC;
  return Layout::Strided;
}

bool all_readers_strided(const Graph& g, int t) {
  if (is_graph_output(g, t)) return false;
  const std::vector<int> cs = consumers_of(g, t);
  if (cs.empty()) return false;
  for (int c : cs)
    if (op_info(g.nodes()[c].op).role != FusionRole::Elementwise) return false;
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
