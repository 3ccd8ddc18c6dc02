// Per-batch scales of matmul results moved onto the left operand (engine/passes/passes.hpp:
// scales_before_matmuls).
#include "engine/ir/graph_queries.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

bool is_one(const Dim& d) {
  return d.is_static() && d.value() == 1;
}

// The matmul whose result mul node `mi` alone reads and scales by a factor that is one value per
// batch index (its last two dims of size 1, more than one element): the matmul's node, or -1;
// `*factor` gets the factor's tensor.
int batch_scaled_matmul(const Graph& g, int mi, int* factor) {
  const Node& m = g.nodes()[mi];
  // (a graph output keeps its tensor: the rewrite would leave it to the old nodes)
  if (m.op != OpKind::Mul || m.inputs.size() != 2 || is_graph_output(g, m.outputs[0])) return -1;
  for (int side = 0; side < 2; ++side) {
    const int y = m.inputs[side], s = m.inputs[1 - side];
    const int p = g.tensor(y).producer;
    if (p < 0 || g.nodes()[p].op != OpKind::Matmul || !read_by_one(g, y)) continue;
    const Node& mm = g.nodes()[p];
    if (mm.inputs.size() != 2 || mm.attr_int("transpose_a") != 0) continue;
    const TensorDesc& yd = g.tensor(y).desc;
    const TensorDesc& sd = g.tensor(s).desc;
    const TensorDesc& ad = g.tensor(mm.inputs[0]).desc;
    const size_t r = yd.shape.size();
    if (r < 3 || sd.shape.size() > r || sd.shape.size() < 2 || ad.shape.size() != r) continue;
    if (!is_one(sd.shape[sd.shape.size() - 1]) || !is_one(sd.shape[sd.shape.size() - 2])) continue;
    if (shape_numel(sd.shape) == Dim(1)) continue;  // a scalar: the attention's own scale step
    bool batch_ok = true;  // A carries the result's batch dims (it is not broadcast by B)
    for (size_t i = 0; i + 2 < r; ++i) batch_ok = batch_ok && ad.shape[i] == yd.shape[i];
    if (!batch_ok || sd.dtype != yd.dtype || yd.dtype != g.tensor(m.outputs[0]).desc.dtype)
      continue;
    *factor = s;
    return p;
  }
  return -1;
}

}  // namespace

bool has_batch_scaled_matmul(const Graph& g) {
  int f = -1;
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (batch_scaled_matmul(g, static_cast<int>(i), &f) >= 0) return true;
  return false;
}

int scales_before_matmuls(Graph& g, std::vector<std::string>* moved) {
  int count = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    int s = -1;
    const int p = batch_scaled_matmul(g, static_cast<int>(i), &s);
    if (p < 0) continue;
    const Node mm = g.nodes()[p];
    const int out = g.nodes()[i].outputs[0];
    const std::string an = fresh_name(g, mm.name + ".scaled_a");
    Tensor a = g.add_node("mul", {Tensor{mm.inputs[0]}, Tensor{s}}, {}, an, {an})[0];
    move_last_node_to(g, static_cast<int>(i) + 1);
    const std::string yn = fresh_name(g, mm.name + ".of_scaled_a");
    Tensor y = g.add_node("matmul", {a, Tensor{mm.inputs[1]}}, mm.attrs, yn, {yn})[0];
    move_last_node_to(g, static_cast<int>(i) + 2);
    replace_uses(g, out, y.id);
    if (moved) moved->push_back(mm.name);
    ++count;
  }
  if (count > 0) g.prune();
  return count;
}

}  // namespace kiln
