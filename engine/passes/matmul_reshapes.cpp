// Matmul row reshapes (engine/passes/passes.hpp: lift_matmul_reshapes): exporters write a
// Linear over a sequence as a 2-D Gemm between reshapes, [N, S, K] -> [N*S, K] x [K, M] ->
// [N*S, M] -> [N, S, M]. The reshape after the matmul keeps its elementwise consumers (GPT-2's
// tanh GELU, a residual add) out of the matmul's epilogue, which claims only ops of its output's
// shape, and costs the intermediate a round trip through memory. Here the matmul computes
// [N, S, M] itself from A reshaped to [N, S, K] (a view); the contraction kernel folds the batch
// dims back into GEMM rows, so the GEMM is the same.
#include <fmt/format.h>

#include "engine/ir/graph_queries.hpp"
#include "engine/ir/op_table.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

// The reshape that gives matmul node `mi`'s output other row dims with the same columns ([r0, ..,
// M] -> [d0, .., M], d0 x .. = r0 x ..), reading it alone or through elementwise ops that alone
// read their chain input and whose other operands broadcast along the columns only (a bias add),
// or -1; `through` gets those ops in order.
int row_reshape(const Graph& g, int mi, std::vector<int>* through) {
  const Node& m = g.nodes()[mi];
  int y = m.outputs[0];
  const TensorInfo& yt = g.tensor(y);
  if (yt.desc.rank() < 2 || yt.desc.layout != Layout::NCHW) return -1;
  int r = -1;
  for (int depth = 0; depth < 4 && r < 0; ++depth) {
    if (is_graph_output(g, y)) return -1;
    const std::vector<int> cs = consumers_of(g, y);
    if (cs.size() != 1) return -1;
    const Node& c = g.nodes()[cs[0]];
    if (c.op == OpKind::Reshape) {
      r = cs[0];
      break;
    }
    if (!is_elementwise(c) || !(g.tensor(c.outputs[0]).desc.shape == yt.desc.shape)) return -1;
    for (int t : c.inputs)
      if (t != y && g.tensor(t).desc.rank() > 1) return -1;
    through->push_back(cs[0]);
    y = c.outputs[0];
  }
  if (r < 0) return -1;
  const int z = g.nodes()[r].outputs[0];
  const TensorDesc& zd = g.tensor(z).desc;
  if (zd.rank() < 2 || zd.layout != Layout::NCHW || is_graph_output(g, z)) return -1;
  if (!(zd.shape.back() == yt.desc.shape.back()) || zd.shape == yt.desc.shape) return -1;
  Dim rows(1), yrows(1);
  for (int i = 0; i + 1 < zd.rank(); ++i) rows = rows * zd.shape[i];
  for (int i = 0; i + 1 < yt.desc.rank(); ++i) yrows = yrows * yt.desc.shape[i];
  return rows == yrows ? r : -1;
}

// Matmul node `mi` computes reshape node `ri`'s output shape from A reshaped alike, and so do
// the elementwise ops `through` between them; the reshape's readers read the last of those
// outputs instead (the reshape is then dead).
void lift(Graph& g, int mi, int ri, const std::vector<int>& through) {
  const int a = g.nodes()[mi].inputs[0];
  const int y = g.nodes()[mi].outputs[0];
  const int z = g.nodes()[ri].outputs[0];
  Shape rows_k = g.tensor(z).desc.shape;
  rows_k.back() = g.tensor(a).desc.shape.back();
  const std::string name = fresh_name(g, g.nodes()[mi].name + ".rows");
  const Tensor a3 = g.add_node("reshape", {Tensor{a}}, {{"shape", rows_k}}, name, {name})[0];
  move_last_node_to(g, mi);  // before the matmul, which moves down by one
  Node& m = g.mutable_nodes()[mi + 1];
  m.inputs[0] = a3.id;
  g.mutable_tensors()[y].desc.shape = g.tensor(z).desc.shape;
  int last = y;
  for (int e : through) {  // indices after the matmul moved down by one too
    last = g.nodes()[e + 1].outputs[0];
    g.mutable_tensors()[last].desc.shape = g.tensor(z).desc.shape;
  }
  replace_uses(g, z, last);
}

}  // namespace

bool has_matmul(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Matmul) return true;
  return false;
}

int lift_matmul_reshapes(Graph& g, std::vector<std::string>* lifted) {
  int count = 0;
  for (size_t mi = 0; mi < g.nodes().size(); ++mi) {
    const Node& m = g.nodes()[mi];
    if (m.op != OpKind::Matmul || m.attr_int("transpose_a") != 0) continue;
    const TensorDesc& ad = g.tensor(m.inputs[0]).desc;
    if (ad.rank() < 2 || ad.layout != Layout::NCHW || g.tensor(m.inputs[1]).desc.rank() != 2 ||
        !rows_dense(g, m.inputs[0]))
      continue;
    std::vector<int> through;
    const int ri = row_reshape(g, static_cast<int>(mi), &through);
    if (ri < 0) continue;
    if (lifted) lifted->push_back(fmt::format("{} -> {}", m.name, g.nodes()[ri].name));
    lift(g, static_cast<int>(mi), ri, through);
    ++mi;  // the inserted reshape of A took the matmul's place
    ++count;
  }
  if (count) g.prune();
  return count;
}

}  // namespace kiln
