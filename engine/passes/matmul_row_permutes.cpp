// Matmul row permutes (engine/passes/passes.hpp: lift_matmul_row_permutes): torchvision's ViT
// runs its encoder on [N, T, E] tokens but its attention module on [T, N, E] (batch_first=False),
// so the QKV projection reads transpose(x, {1, 0, 2}): a strided A whose batch dim (T) cannot fold
// into the GEMM's rows, which ran as T batched GEMMs of N rows each (at N = 32, a quarter of each
// 128-row tile). A permute of the rows commutes with a matmul whose B has no batch dims:
// matmul(permute(x), B) = permute(matmul(x, B)). So the matmul reads x as it is (one GEMM of all
// N·T rows) and the permute moves to its output, where it is a view or the GEMM's store layout.
#include <fmt/format.h>

#include "engine/ir/graph_queries.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

// The transpose node whose output matmul node `mi` alone reads as A, permuting only the dims
// before K (the last dim stays last) of a dense x, with B 2-D; or -1.
int row_permute(const Graph& g, int mi) {
  const Node& m = g.nodes()[mi];
  if (m.attr_int("transpose_a") != 0 || g.tensor(m.inputs[1]).desc.rank() != 2) return -1;
  const int a = m.inputs[0], ti = g.tensor(a).producer;
  if (ti < 0 || is_graph_output(g, a) || is_graph_output(g, m.outputs[0])) return -1;
  const Node& t = g.nodes()[ti];
  if (t.op != OpKind::Transpose || consumers_of(g, a).size() != 1) return -1;
  const std::vector<int64_t>& perm = t.attr_ints("perm");
  const int x = t.inputs[0];
  const TensorDesc& xd = g.tensor(x).desc;
  if (xd.rank() < 3 || static_cast<int>(perm.size()) != xd.rank() || perm.back() != xd.rank() - 1 ||
      xd.layout != Layout::NCHW || !rows_dense(g, x))
    return -1;
  return ti;
}

// The add that alone reads matmul `mi`'s output and adds a vector along its last dim (the
// projection's bias, which the FX lowering keeps apart from the matmul): it becomes the matmul's
// bias input, so that the permute lifted to the output does not stand between the GEMM and its
// bias (a separate elementwise kernel over the whole [T, N, 3E] result). Returns whether folded.
bool fold_bias(Graph& g, int mi) {
  const Node& m = g.nodes()[mi];
  const int y = m.outputs[0];
  if (m.inputs.size() != 2 || is_graph_output(g, y)) return false;
  const std::vector<int> cs = consumers_of(g, y);
  if (cs.size() != 1 || g.nodes()[cs[0]].op != OpKind::Add) return false;
  const Node& add = g.nodes()[cs[0]];
  if (add.inputs.size() != 2 || add.inputs[0] == add.inputs[1]) return false;
  const int b = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
  const TensorDesc& bd = g.tensor(b).desc;
  const TensorDesc& yd = g.tensor(y).desc;
  const TensorDesc& od = g.tensor(add.outputs[0]).desc;
  if (bd.rank() != 1 || bd.dtype != yd.dtype || !(bd.shape[0] == yd.shape.back()) ||
      od.shape != yd.shape || od.dtype != yd.dtype || od.layout != yd.layout)
    return false;
  const int sum = add.outputs[0];
  if (is_graph_output(g, sum)) return false;
  g.mutable_nodes()[mi].inputs.push_back(b);
  replace_uses(g, sum, y);  // the add, read by nothing now, goes with the prune
  return true;
}

// Matmul `mi` reads transpose `ti`'s input; a transpose with the same perm after it gives its
// readers the result they read before.
void lift(Graph& g, int mi, int ti) {
  const int x = g.nodes()[ti].inputs[0];
  const std::vector<int64_t> perm = g.nodes()[ti].attr_ints("perm");
  const int y = g.nodes()[mi].outputs[0];
  Shape unpermuted = g.tensor(x).desc.shape;
  unpermuted.back() = g.tensor(y).desc.shape.back();
  g.mutable_nodes()[mi].inputs[0] = x;
  g.mutable_tensors()[y].desc.shape = unpermuted;
  const std::string name = fresh_name(g, g.nodes()[mi].name + ".rows");
  const Tensor z = g.add_node("transpose", {Tensor{y}}, {{"perm", perm}}, name, {name})[0];
  move_last_node_to(g, mi + 1);  // right after the matmul, before every reader of y
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (static_cast<int>(i) != mi + 1)
      for (int& in : g.mutable_nodes()[i].inputs)
        if (in == y) in = z.id;
}

}  // namespace

int lift_matmul_row_permutes(Graph& g, std::vector<std::string>* lifted) {
  int count = 0;
  for (size_t mi = 0; mi < g.nodes().size(); ++mi) {
    if (g.nodes()[mi].op != OpKind::Matmul) continue;
    const int ti = row_permute(g, static_cast<int>(mi));
    if (ti < 0) continue;
    if (lifted) lifted->push_back(fmt::format("{} -> {}", g.nodes()[ti].name, g.nodes()[mi].name));
    fold_bias(g, static_cast<int>(mi));
    lift(g, static_cast<int>(mi), ti);
    ++mi;  // past the transpose inserted after the matmul
    ++count;
  }
  if (count) g.prune();
  return count;
}

}  // namespace kiln
