// Scalar scales of projections folded into their weights (engine/passes/passes.hpp:
// fold_matmul_scales).
#include "engine/ir/graph_queries.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

// The matmul whose result mul node `mi` alone reads and scales by a constant scalar: constant
// weights (and bias), or -1. `*scale` gets the scalar.
int scaled_matmul(const Graph& g, int mi, double* scale) {
  const Node& m = g.nodes()[mi];
  // (a graph output keeps its tensor: the rewrite would leave it to the old nodes)
  if (m.op != OpKind::Mul || m.inputs.size() != 2 || is_graph_output(g, m.outputs[0])) return -1;
  for (int side = 0; side < 2; ++side) {
    const int y = m.inputs[side], s = m.inputs[1 - side];
    if (!has_constant_data(g, s) || shape_numel(g.tensor(s).desc.shape) != Dim(1)) continue;
    const int p = g.tensor(y).producer;
    if (p < 0 || g.nodes()[p].op != OpKind::Matmul || is_graph_output(g, y)) continue;
    if (consumers_of(g, y).size() != 1) continue;
    const Node& mm = g.nodes()[p];
    if (!has_constant_data(g, mm.inputs[1]) ||
        (mm.inputs.size() > 2 && !has_constant_data(g, mm.inputs[2])))
      continue;
    if (g.tensor(y).desc.dtype != g.tensor(m.outputs[0]).desc.dtype) continue;
    *scale = g.tensor(s).data->to_f64()[0];
    return p;
  }
  return -1;
}

// A copy of constant `t` times `scale`.
Tensor scaled_constant(Graph& g, int t, double scale, const std::string& stem) {
  const TensorInfo& ti = g.tensor(t);
  std::vector<double> v = ti.data->to_f64();
  for (double& x : v) x *= scale;
  std::vector<int64_t> shape;
  for (const Dim& d : ti.desc.shape) shape.push_back(d.value());
  TensorDesc d{ti.desc.dtype, ti.desc.shape, Layout::NCHW, {}};
  return g.constant(fresh_name(g, stem), d, HostTensor::from_f64(ti.desc.dtype, shape, v));
}

}  // namespace

bool has_scaled_matmul(const Graph& g) {
  double s = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (scaled_matmul(g, static_cast<int>(i), &s) >= 0) return true;
  return false;
}

int fold_matmul_scales(Graph& g, std::vector<std::string>* folded) {
  int count = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    double scale = 0;
    const int p = scaled_matmul(g, static_cast<int>(i), &scale);
    if (p < 0) continue;
    const Node mm = g.nodes()[p];
    const int out = g.nodes()[i].outputs[0];
    Tensor w = scaled_constant(g, mm.inputs[1], scale, mm.name + ".scaled_w");
    std::vector<Tensor> ins = {Tensor{mm.inputs[0]}, w};
    if (mm.inputs.size() > 2)
      ins.push_back(scaled_constant(g, mm.inputs[2], scale, mm.name + ".scaled_b"));
    const std::string name = fresh_name(g, mm.name + ".scaled");
    Tensor y = g.add_node("matmul", ins, mm.attrs, name, {name})[0];
    move_last_node_to(g, static_cast<int>(i) + 1);
    replace_uses(g, out, y.id);
    if (folded) folded->push_back(mm.name);
    ++count;
  }
  if (count > 0) g.prune();
  return count;
}

}  // namespace kiln
