// L2 normalizations over the last dim as row norms (engine/passes/passes.hpp:
// l2_normalizations_as_rmsnorms).
#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "engine/ir/graph_queries.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

// The largest clamp bound taken: then |x| / sqrt(|x|^2 + eps^2) differs from |x| / max(|x|, eps)
// by under 1.5e-6 relative for every nonzero f16 row (|x| >= 2^-24), and both give 0 for a zero
// row.
constexpr double kMaxEps = 1e-10;

// The producer of `t` when it is op `op` and `t` feeds nothing else (the chain's next node).
int private_producer(const Graph& g, int t, OpKind op) {
  const int p = g.tensor(t).producer;
  return p >= 0 && g.nodes()[p].op == op && read_by_one(g, t) ? p : -1;
}

// div(x, [expand](clamp([cast](reduce_l2(x)), eps))): the rows and the clamp's lower bound.
struct L2Norm {
  int x = -1;
  double eps = 0;
};

// Div node `di` as an f16 l2 normalization over the last dim.
std::optional<L2Norm> match(const Graph& g, int di) {
  const Node& d = g.nodes()[di];
  if (d.op != OpKind::Div || d.inputs.size() != 2) return std::nullopt;
  L2Norm m;
  m.x = d.inputs[0];
  const TensorDesc& xd = g.tensor(m.x).desc;
  if (xd.dtype != DType::F16 || xd.rank() < 1 || !xd.shape.back().is_static() ||
      g.tensor(d.outputs[0]).desc.dtype != DType::F16 ||
      !(g.tensor(d.outputs[0]).desc.shape == xd.shape))
    return std::nullopt;
  int t = d.inputs[1];
  if (int p = private_producer(g, t, OpKind::Expand); p >= 0) t = g.nodes()[p].inputs[0];
  const int ci = private_producer(g, t, OpKind::Clamp);
  if (ci < 0) return std::nullopt;
  const Node& c = g.nodes()[ci];
  m.eps = c.attr_float("min");
  if (!(m.eps > 0 && m.eps <= kMaxEps) || !(c.attr_float("max") == INFINITY)) return std::nullopt;
  t = c.inputs[0];
  if (int p = private_producer(g, t, OpKind::Cast); p >= 0) {
    const DType from = g.tensor(g.nodes()[p].inputs[0]).desc.dtype;
    if (from != DType::F16 && from != DType::F32) return std::nullopt;
    t = g.nodes()[p].inputs[0];
  }
  const int ri = private_producer(g, t, OpKind::ReduceL2);
  if (ri < 0 || g.nodes()[ri].inputs[0] != m.x || g.nodes()[ri].attr_int("keepdims") != 1)
    return std::nullopt;
  const std::vector<int64_t>& axes = g.nodes()[ri].attr_ints("axes");
  const int64_t r = xd.rank();
  if (axes.size() != 1 || (axes[0] != -1 && axes[0] != r - 1)) return std::nullopt;
  return m;
}

}  // namespace

bool has_l2_normalization(const Graph& g) {
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (match(g, static_cast<int>(i))) return true;
  return false;
}

int l2_normalizations_as_rmsnorms(Graph& g, std::vector<std::string>* rewritten) {
  int count = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    std::optional<L2Norm> m = match(g, static_cast<int>(i));
    if (!m) continue;
    const Node d = g.nodes()[i];
    const int64_t dim = g.tensor(m->x).desc.shape.back().value();
    // x / sqrt(mean(x^2) + eps^2 / D) / sqrt(D) = x / sqrt(|x|^2 + eps^2); the factor
    // 1 / sqrt(D) an f32 scalar (exact enough where an f16 one would not be), the row norm's
    // epilogue.
    const std::string name = fresh_name(g, d.name + ".l2norm");
    const Tensor n = g.add_node(
        "rmsnorm", {Tensor{m->x}},
        {{"axis", AttrValue(int64_t{-1})}, {"eps", AttrValue(m->eps * m->eps / double(dim))}}, name,
        {name})[0];
    move_last_node_to(g, static_cast<int>(i) + 1);
    TensorDesc sd{DType::F32, {}, Layout::NCHW, {}};
    const Tensor c =
        g.constant(fresh_name(g, d.name + ".l2_factor"), sd,
                   HostTensor::from_f64(DType::F32, {}, {1.0 / std::sqrt(double(dim))}));
    const std::string yn = fresh_name(g, d.name + ".l2");
    const Tensor y = g.add_node("mul", {n, c}, {}, yn, {yn})[0];
    move_last_node_to(g, static_cast<int>(i) + 2);
    replace_uses(g, d.outputs[0], y.id);
    if (rewritten) rewritten->push_back(d.name);
    ++count;
  }
  if (count > 0) g.prune();
  return count;
}

}  // namespace kiln
