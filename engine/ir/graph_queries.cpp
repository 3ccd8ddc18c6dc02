// Structural graph queries (engine/graph_queries.hpp).
#include "engine/ir/graph_queries.hpp"

#include <algorithm>

#include "engine/ir/op_table.hpp"

namespace kiln {

std::vector<int> consumers_of(const Graph& g, int t) {
  std::vector<int> out;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const std::vector<int>& in = g.nodes()[i].inputs;
    if (std::find(in.begin(), in.end(), t) != in.end()) out.push_back(static_cast<int>(i));
  }
  return out;
}

bool is_graph_output(const Graph& g, int t) {
  return std::find(g.outputs().begin(), g.outputs().end(), t) != g.outputs().end();
}

int memory_root(const Graph& g, int t) {
  const int v = g.tensor(t).view_of;
  return v >= 0 ? v : t;
}

std::optional<std::vector<int64_t>> static_strides(const TensorDesc& d) {
  if (d.layout == Layout::Strided) return d.strides;
  const size_t r = d.shape.size();
  std::vector<int64_t> shape(r, 1);
  for (size_t i = 1; i < r; ++i) {
    if (!d.shape[i].is_static()) return std::nullopt;
    shape[i] = d.shape[i].value();
  }
  return layout_strides(shape, d.layout);
}

bool read_by_one(const Graph& g, int t) {
  return g.tensor(t).role == TensorRole::Intermediate && !is_graph_output(g, t) &&
         consumers_of(g, t).size() == 1;
}

bool is_elementwise(const Node& n) {
  return op_info(n.op).role == FusionRole::Elementwise && n.outputs.size() == 1;
}

bool from_contraction_epilogue(const Graph& g, int t, std::optional<OpKind> op) {
  for (int depth = 0; depth < 16; ++depth) {
    const int p = g.tensor(t).producer;
    if (p < 0) return false;
    const Node& n = g.nodes()[p];
    if (op_info(n.op).category == OpCategory::Contraction) return !op || n.op == *op;
    if (!is_elementwise(n)) return false;
    int next = -1;  // the input made by the contraction (through its epilogue)
    for (int in : n.inputs)
      if (read_by_one(g, in) && g.tensor(in).producer >= 0 &&
          (op_info(g.nodes()[g.tensor(in).producer].op).category == OpCategory::Contraction ||
           is_elementwise(g.nodes()[g.tensor(in).producer])))
        next = next < 0 ? in : -2;
    if (next < 0) return false;  // none, or two candidates
    t = next;
  }
  return false;
}

bool strides_dense(const std::vector<int64_t>& strides, const Shape& shape, Layout layout) {
  TensorDesc d;
  d.shape = shape;
  d.layout = layout;
  const auto want = static_strides(d);
  if (!want || want->size() != strides.size()) return false;
  for (size_t i = 0; i < strides.size(); ++i)
    if (!(shape[i].is_static() && shape[i].value() == 1) && strides[i] != (*want)[i]) return false;
  return true;
}

bool all_consumers_take_nhwc(const Graph& g, int t) {
  for (int c : consumers_of(g, t)) {
    const Node& n = g.nodes()[c];
    const OpInfo& info = op_info(n.op);
    if (info.role == FusionRole::Elementwise || info.category == OpCategory::Window) continue;
    if (n.op == OpKind::Conv2d && n.inputs[0] == t) continue;
    // A transpose to [N, H, W, C]: the memory read in its order (a view).
    if (n.op == OpKind::Transpose && n.attr_ints("perm") == std::vector<int64_t>{0, 2, 3, 1})
      continue;
    return false;
  }
  return true;
}

bool has_constant_data(const Graph& g, int t) {
  const TensorInfo& ti = g.tensor(t);
  return ti.role == TensorRole::Constant && ti.data.has_value();
}

}  // namespace kiln
