// Average pools before narrowing 1x1 convs (engine/passes/passes.hpp: pools_after_convs).
#include "engine/ir/graph_queries.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

// The conv that alone reads avgpool node `pi`'s output: 1x1, stride 1, unpadded, one group,
// fewer output than input channels, a constant bias or none; or -1.
int narrowing_conv_after(const Graph& g, int pi) {
  const Node& p = g.nodes()[pi];
  if (p.op != OpKind::Avgpool2d || is_graph_output(g, p.outputs[0])) return -1;
  const std::vector<int> cs = consumers_of(g, p.outputs[0]);
  if (cs.size() != 1) return -1;
  const Node& c = g.nodes()[cs[0]];
  if (c.op != OpKind::Conv2d || c.inputs[0] != p.outputs[0] || c.inputs[1] == p.outputs[0])
    return -1;
  const Shape& ws = g.tensor(c.inputs[1]).desc.shape;
  if (c.attr_int("groups") != 1 || ws.size() != 4 || !(ws[2] == Dim(1)) || !(ws[3] == Dim(1)))
    return -1;
  for (int64_t s : c.attr_ints("stride"))
    if (s != 1) return -1;
  for (int64_t q : c.attr_ints("padding"))
    if (q != 0) return -1;
  if (!ws[0].is_static() || !ws[1].is_static() || ws[0].value() >= ws[1].value()) return -1;
  if (c.inputs.size() > 2) {
    const TensorInfo& b = g.tensor(c.inputs[2]);
    if (b.role != TensorRole::Constant || !b.data) return -1;
  }
  return cs[0];
}

// conv(pool(x)) + b as pool(conv(x)) + b: the new nodes go after the conv; returns their number.
int swap(Graph& g, int pi, int ci) {
  const Node p = g.nodes()[pi];
  const Node c = g.nodes()[ci];
  const size_t before = g.nodes().size();
  Attrs conv_attrs = c.attrs;
  const std::string cn = fresh_name(g, c.name + ".first");
  Tensor y =
      g.add_node("conv2d", {Tensor{p.inputs[0]}, Tensor{c.inputs[1]}}, conv_attrs, cn, {cn})[0];
  const std::string pn = fresh_name(g, p.name + ".after");
  Tensor z = g.add_node("avgpool2d", {y}, p.attrs, pn, {pn})[0];
  if (c.inputs.size() > 2) {
    const TensorInfo& b = g.tensor(c.inputs[2]);
    const int64_t k = b.desc.shape[0].value();
    TensorDesc bd{b.desc.dtype, {Dim(k), Dim(1), Dim(1)}, Layout::NCHW, {}};
    HostTensor data = HostTensor::from_f64(b.desc.dtype, {k, 1, 1}, b.data->to_f64());
    Tensor bias = g.constant(fresh_name(g, c.name + ".bias_after_pool"), bd, std::move(data));
    const std::string an = fresh_name(g, c.name + ".bias");
    z = g.add_node("add", {z, bias}, {}, an, {an})[0];
  }
  const int added = static_cast<int>(g.nodes().size() - before);
  for (int i = 0; i < added; ++i) move_last_node_to(g, ci + 1);
  replace_uses(g, c.outputs[0], z.id);
  return added;
}

}  // namespace

bool has_pool_before_narrowing_conv(const Graph& g) {
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (narrowing_conv_after(g, static_cast<int>(i)) >= 0) return true;
  return false;
}

int pools_after_convs(Graph& g, std::vector<std::string>* swapped) {
  int count = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const int ci = narrowing_conv_after(g, static_cast<int>(i));
    if (ci < 0) continue;
    if (swapped) swapped->push_back(g.nodes()[ci].name);
    swap(g, static_cast<int>(i), ci);
    ++count;
  }
  if (count > 0) g.prune();
  return count;
}

}  // namespace kiln
