// Constant folding (engine/api/fold_constants.hpp).
#include "engine/api/fold_constants.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>
#include <vector>

#include "engine/ir/graph_queries.hpp"
#include "engine/ir/op_table.hpp"
#include "engine/passes/graph_edit.hpp"
#include "kiln/reference.hpp"

namespace kiln {
namespace {

// A folded result has at most this many elements (a mask or a bias table, never an activation:
// a graph of constants expanded to a large map stays a kernel).
constexpr int64_t kMaxElements = int64_t{1} << 20;
// A folded contraction makes at most this many multiply-adds (the reference makes them in f64 on
// the host).
constexpr int64_t kMaxMacs = int64_t{1} << 28;

int64_t static_numel(const TensorDesc& d) {
  const Dim n = shape_numel(d.shape);
  return n.is_static() ? n.value() : -1;
}

// A folded constant is at most this many folds from the graph's own constants: its data is made
// by recursion through the chain (a hostile chain of constant ops must not exhaust the stack).
constexpr int kMaxDepth = 64;

// Whether node `n` (its inputs `ins`, already folded where they were) computes constants only
// within the bounds.
bool foldable(const Graph& g, const Node& n, const std::vector<int>& ins) {
  std::vector<int64_t> in;
  for (int t : ins) {
    const TensorInfo& ti = g.tensor(t);
    if (ti.role != TensorRole::Constant || !ti.data.has_value()) return false;
    in.push_back(static_numel(ti.desc));
    if (in.back() < 0) return false;
  }
  for (int t : n.outputs) {
    const int64_t e = static_numel(g.tensor(t).desc);
    if (e < 0 || e > kMaxElements || is_graph_output(g, t)) return false;
  }
  if (op_info(n.op).category == OpCategory::Contraction && in.size() >= 2) {
    // Each output element takes numel(weights) / (output columns) multiply-adds (a matmul's K
    // times its batch, a conv's C / groups x R x S), the columns being a matmul result's last
    // dim, a conv's channels.
    const TensorDesc& y = g.tensor(n.outputs[0]).desc;
    const Dim& cols = n.op == OpKind::Matmul ? y.shape.back() : y.shape.at(1);
    const int64_t per = in[1] / std::max<int64_t>(cols.value(), 1);
    if (per > 0 && static_numel(y) > kMaxMacs / per) return false;
  }
  return true;
}

// The data of output `k` of node `n` (its inputs' data made first): the node alone, run by the
// reference, as row-major logical values.
HostTensor evaluate(const std::string& graph, const std::vector<TensorInfo>& inputs, const Node& n,
                    size_t k) {
  Graph sub(graph + ", folding constants");
  std::vector<Tensor> ins;
  for (const TensorInfo& ti : inputs) ins.push_back(sub.constant(ti.name, ti.desc, *ti.data));
  const std::vector<Tensor> outs = sub.add_node(op_name(n.op), ins, n.attrs, n.name);
  sub.output(outs.at(k));
  std::map<std::string, HostTensor> r = run_reference(sub, {});
  return r.begin()->second.relayout(Layout::NCHW);
}

}  // namespace

std::shared_ptr<const Graph> fold_constants(std::shared_ptr<const Graph> g, std::string* note) {
  std::shared_ptr<Graph> out;
  std::vector<std::string> folded;
  // Folded tensor -> its constant, and each such constant's depth. Readers are rewired once at
  // the end: one pass over the nodes, whatever the number of folds.
  std::unordered_map<int, int> to, depth;
  auto resolved = [&](int t) {
    auto it = to.find(t);
    return it == to.end() ? t : it->second;
  };
  for (size_t i = 0; i < g->nodes().size(); ++i) {
    const Graph& cur = out ? *out : *g;
    std::vector<int> ins;
    int d = 1;
    for (int t : cur.nodes()[i].inputs) {
      ins.push_back(resolved(t));
      if (auto it = depth.find(ins.back()); it != depth.end()) d = std::max(d, it->second + 1);
    }
    if (d > kMaxDepth || !foldable(cur, cur.nodes()[i], ins)) continue;
    if (!out) out = std::make_shared<Graph>(*g);
    const Node n = out->nodes()[i];
    std::vector<TensorInfo> inputs;
    for (int t : ins) inputs.push_back(out->tensor(t));
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      TensorDesc desc = out->tensor(n.outputs[k]).desc;
      if (desc.layout == Layout::Strided) desc.layout = Layout::NCHW;
      const std::string name = fresh_name(*out, out->tensor(n.outputs[k]).name + "_folded");
      const Tensor c = out->constant_deferred(
          name, desc, [graph = g->name(), inputs, n, k] { return evaluate(graph, inputs, n, k); });
      to[n.outputs[k]] = c.id;
      depth[c.id] = d;
    }
    folded.push_back(n.name);
  }
  if (!out) return g;
  for (Node& n : out->mutable_nodes())
    for (int& t : n.inputs) t = resolved(t);
  out->prune();
  if (note) {  // the first names (a graph of thousands of constant ops keeps a short note)
    const size_t shown = std::min<size_t>(folded.size(), 200);
    *note = fmt::format("constant subgraphs folded ({} nodes): {}{}", folded.size(),
                        fmt::join(folded.begin(), folded.begin() + shown, ", "),
                        shown < folded.size() ? fmt::format(", and {} more", folded.size() - shown)
                                              : std::string());
  }
  return out;
}

}  // namespace kiln
