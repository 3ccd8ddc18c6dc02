// Gathers whose result is only rearranged along the gathered axis (engine/passes/passes.hpp:
// gathers_through_permutes).
#include <numeric>
#include <optional>

#include "engine/ir/gather_ops.hpp"
#include "engine/ir/graph_queries.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

// A gather of constant 1-D indices, then reshapes and transposes (each read only by the next)
// that keep the dims before and after the gathered axis and rearrange its positions: the
// positions' order at the last transpose of that run (`end`, the tensor to replace).
struct Permuted {
  int gather = -1, end = -1;
  int64_t axis = 0;
  std::vector<int64_t> order;  // end's positions: which gathered position each one is
};

// The middle dims of `s` when it is pre + middle + post (the middle static), else nullopt.
std::optional<std::vector<int64_t>> middle_of(const Shape& s, const Shape& pre, const Shape& post,
                                              int64_t positions) {
  if (s.size() < pre.size() + post.size() + 1) return std::nullopt;
  for (size_t i = 0; i < pre.size(); ++i)
    if (!(s[i] == pre[i])) return std::nullopt;
  for (size_t i = 0; i < post.size(); ++i)
    if (!(s[s.size() - post.size() + i] == post[i])) return std::nullopt;
  std::vector<int64_t> mid;
  int64_t n = 1;
  for (size_t i = pre.size(); i < s.size() - post.size(); ++i) {
    if (!s[i].is_static()) return std::nullopt;
    mid.push_back(s[i].value());
    n *= s[i].value();
  }
  if (n != positions) return std::nullopt;
  return mid;
}

// `order` (row-major over `mid`) transposed by `perm` of the middle dims.
std::vector<int64_t> transpose_order(const std::vector<int64_t>& order,
                                     const std::vector<int64_t>& mid,
                                     const std::vector<int64_t>& perm) {
  const size_t r = mid.size();
  std::vector<int64_t> in_stride(r, 1), out_dims(r);
  for (size_t i = r - 1; i > 0; --i) in_stride[i - 1] = in_stride[i] * mid[i];
  for (size_t i = 0; i < r; ++i) out_dims[i] = mid[perm[i]];
  std::vector<int64_t> out(order.size()), idx(r, 0);
  for (size_t j = 0; j < order.size(); ++j) {
    int64_t src = 0;
    for (size_t i = 0; i < r; ++i) src += idx[i] * in_stride[perm[i]];
    out[j] = order[src];
    for (size_t i = r; i-- > 0;) {
      if (++idx[i] < out_dims[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

std::optional<Permuted> permuted_gather(const Graph& g, int gi) {
  const Node& gn = g.nodes()[gi];
  if (gn.op != OpKind::Gather) return std::nullopt;
  const TensorInfo& it = g.tensor(gn.inputs[1]);
  if (it.role != TensorRole::Constant || !it.data || it.desc.rank() != 1) return std::nullopt;
  const Shape& gs = g.tensor(gn.outputs[0]).desc.shape;
  const int64_t axis = gather_axis(gn, g.tensor(gn.inputs[0]).desc.rank());
  if (!gs[axis].is_static()) return std::nullopt;
  const Shape pre(gs.begin(), gs.begin() + axis), post(gs.begin() + axis + 1, gs.end());
  const int64_t positions = gs[axis].value();
  Permuted p{gi, -1, axis, std::vector<int64_t>(static_cast<size_t>(positions))};
  std::iota(p.order.begin(), p.order.end(), 0);
  std::vector<int64_t> mid = {positions}, order = p.order;
  int t = gn.outputs[0];
  for (;;) {
    const std::vector<int> cs = consumers_of(g, t);
    if (cs.size() != 1 || is_graph_output(g, t)) break;
    const Node& c = g.nodes()[cs[0]];
    if (c.op != OpKind::Reshape && c.op != OpKind::Transpose) break;
    const auto next = middle_of(g.tensor(c.outputs[0]).desc.shape, pre, post, positions);
    if (!next) break;
    if (c.op == OpKind::Transpose) {
      // The dims before and after the gathered axis stay where they are.
      const auto& perm = c.attr_ints("perm");
      std::vector<int64_t> mperm;
      bool keeps_outer = true;
      for (size_t i = 0; i < perm.size(); ++i) {
        if (i < pre.size() || i >= perm.size() - post.size())
          keeps_outer = keeps_outer && perm[i] == static_cast<int64_t>(i);
        else
          mperm.push_back(perm[i] - static_cast<int64_t>(pre.size()));
      }
      if (!keeps_outer) break;
      order = transpose_order(order, mid, mperm);
      p.end = c.outputs[0];
      p.order = order;
    }
    mid = *next;
    t = c.outputs[0];
  }
  if (p.end < 0) return std::nullopt;
  return p;
}

// The gather of `p` with its indices in the end's order, reshaped to the end's shape; the new
// nodes go where the end's producer is. Returns their number.
int rewrite(Graph& g, const Permuted& p) {
  const Node& gn = g.nodes()[p.gather];
  const std::vector<int64_t> idx = g.tensor(gn.inputs[1]).data->to_i64();
  std::vector<int64_t> composed(p.order.size());
  for (size_t j = 0; j < p.order.size(); ++j) composed[j] = idx[static_cast<size_t>(p.order[j])];
  const int at = g.tensor(p.end).producer;
  const std::string name = g.nodes()[at].name;
  const Shape end_shape = g.tensor(p.end).desc.shape;
  const int data = gn.inputs[0];
  const int64_t axis = p.axis;
  const size_t before = g.nodes().size();
  Tensor k = index_constant(g, name + "_positions", composed);
  const std::string gname = fresh_name(g, name + ".gather");
  Tensor y =
      g.add_node("gather", {Tensor{data}, k}, {{"axis", AttrValue(axis)}}, gname, {gname})[0];
  const std::string rname = fresh_name(g, name + ".shape");
  Tensor r = g.add_node("reshape", {y}, {{"shape", end_shape}}, rname, {rname})[0];
  const int added = static_cast<int>(g.nodes().size() - before);
  for (int i = 0; i < added; ++i) move_last_node_to(g, at + 1);
  replace_uses(g, p.end, r.id);
  return added;
}

}  // namespace

bool has_permuted_gather(const Graph& g) {
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (permuted_gather(g, static_cast<int>(i))) return true;
  return false;
}

int gathers_through_permutes(Graph& g, std::vector<std::string>* rewritten) {
  int count = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const auto p = permuted_gather(g, static_cast<int>(i));
    if (!p) continue;
    if (rewritten) rewritten->push_back(g.nodes()[g.tensor(p->end).producer].name);
    rewrite(g, *p);
    ++count;
  }
  if (count > 0) g.prune();
  return count;
}

}  // namespace kiln
