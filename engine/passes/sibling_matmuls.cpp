// Sibling projections as one matmul (engine/passes/passes.hpp: merge_sibling_matmuls).
#include <map>
#include <tuple>

#include "engine/ir/graph_queries.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

// Whether `t` reaches only matmuls, through reshapes, transposes and slices: an attention's
// operands, which the fused kernel reads through such chains in place (a slice of the merged
// result another kernel had to read would cost a copy).
bool reaches_matmuls(const Graph& g, int t) {
  if (is_graph_output(g, t)) return false;
  const std::vector<int> cs = consumers_of(g, t);
  if (cs.empty()) return false;
  for (int c : cs) {
    const Node& cn = g.nodes()[c];
    if (cn.op == OpKind::Matmul) continue;
    if (cn.op != OpKind::Reshape && cn.op != OpKind::Transpose && cn.op != OpKind::Slice)
      return false;
    if (!reaches_matmuls(g, cn.outputs[0])) return false;
  }
  return true;
}

// Matmul node `n` as a projection that can merge: A not transposed, B a constant [K, N] (N-major
// or, transposed, [N, K]) of static dims, a constant bias or none, and a 16-bit result that only
// reaches matmuls (an attention's q, k, v; an epilogue would lose its fusion on a slice of the
// merged result).
bool projection(const Graph& g, const Node& n) {
  if (n.op != OpKind::Matmul || n.attr_int("transpose_a") != 0) return false;
  const TensorDesc& bd = g.tensor(n.inputs[1]).desc;
  if (!has_constant_data(g, n.inputs[1]) || bd.rank() != 2 || !bd.shape[0].is_static() ||
      !bd.shape[1].is_static())
    return false;
  if (n.inputs.size() > 2 && !has_constant_data(g, n.inputs[2])) return false;
  const DType dt = g.tensor(n.outputs[0]).desc.dtype;
  return (dt == DType::F16 || dt == DType::BF16) && reaches_matmuls(g, n.outputs[0]);
}

// The projections of one input, grouped by what must agree for one matmul.
using Key = std::tuple<int, int64_t, DType, DType>;  // A, transpose_b, B's dtype, the result's

std::map<Key, std::vector<int>> sibling_groups(const Graph& g) {
  std::map<Key, std::vector<int>> groups;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (!projection(g, n)) continue;
    const Key k{n.inputs[0], n.attr_int("transpose_b"), g.tensor(n.inputs[1]).desc.dtype,
                g.tensor(n.outputs[0]).desc.dtype};
    groups[k].push_back(static_cast<int>(i));
  }
  for (auto it = groups.begin(); it != groups.end();) {
    bool same_k = it->second.size() > 1;
    const bool tb = std::get<1>(it->first) != 0;
    for (int i : it->second) {
      const Shape& bs = g.tensor(g.nodes()[i].inputs[1]).desc.shape;
      const Shape& b0 = g.tensor(g.nodes()[it->second[0]].inputs[1]).desc.shape;
      same_k = same_k && bs[tb ? 1 : 0] == b0[tb ? 1 : 0];
    }
    it = same_k ? std::next(it) : groups.erase(it);
  }
  return groups;
}

// Merges the matmul nodes `ms` (ascending) into one before the first; their results become
// slices of its result along the last dim. Returns the number of nodes added.
int merge(Graph& g, const std::vector<int>& ms, bool tb) {
  const Node first = g.nodes()[ms[0]];
  const int64_t k = g.tensor(first.inputs[1]).desc.shape[tb ? 1 : 0].value();
  const DType wdt = g.tensor(first.inputs[1]).desc.dtype;
  std::vector<int64_t> widths;
  std::vector<std::vector<double>> ws, bs;
  bool any_bias = false;
  DType bdt = wdt;
  for (int i : ms) {
    const Node& n = g.nodes()[i];
    widths.push_back(g.tensor(n.inputs[1]).desc.shape[tb ? 0 : 1].value());
    ws.push_back(g.tensor(n.inputs[1]).data->to_f64());
    if (n.inputs.size() > 2) {
      any_bias = true;
      bdt = g.tensor(n.inputs[2]).desc.dtype;
      bs.push_back(g.tensor(n.inputs[2]).data->to_f64());
    } else {
      bs.push_back(std::vector<double>(static_cast<size_t>(widths.back()), 0.0));
    }
  }
  int64_t total = 0;
  for (int64_t w : widths) total += w;
  // B' = [K, sum N] (or [sum N, K] transposed): each B's columns (rows) after the ones before.
  std::vector<double> w(static_cast<size_t>(k * total)), b;
  int64_t off = 0;
  for (size_t j = 0; j < ms.size(); ++j) {
    for (int64_t r = 0; r < (tb ? widths[j] : k); ++r)
      for (int64_t c = 0; c < (tb ? k : widths[j]); ++c) {
        const int64_t src = r * (tb ? k : widths[j]) + c;
        const int64_t dst = tb ? (off + r) * k + c : r * total + off + c;
        w[static_cast<size_t>(dst)] = ws[j][static_cast<size_t>(src)];
      }
    b.insert(b.end(), bs[j].begin(), bs[j].end());
    off += widths[j];
  }
  const size_t before = g.nodes().size();
  const std::vector<int64_t> wshape =
      tb ? std::vector<int64_t>{total, k} : std::vector<int64_t>{k, total};
  TensorDesc wd{wdt, {Dim(wshape[0]), Dim(wshape[1])}, Layout::NCHW, {}};
  Tensor wt =
      g.constant(fresh_name(g, first.name + ".merged_w"), wd, HostTensor::from_f64(wdt, wshape, w));
  std::vector<Tensor> ins = {Tensor{first.inputs[0]}, wt};
  if (any_bias) {
    TensorDesc bd{bdt, {Dim(total)}, Layout::NCHW, {}};
    ins.push_back(g.constant(fresh_name(g, first.name + ".merged_b"), bd,
                             HostTensor::from_f64(bdt, {total}, b)));
  }
  const std::string mn = fresh_name(g, first.name + ".merged");
  Tensor y = g.add_node("matmul", ins, first.attrs, mn, {mn})[0];
  const int64_t last = g.tensor(y.id).desc.rank() - 1;
  std::vector<std::pair<int, int>> uses;  // (old result, slice)
  off = 0;
  for (size_t j = 0; j < ms.size(); ++j) {
    const std::string sn = fresh_name(g, g.nodes()[ms[j]].name + ".part");
    Tensor s = g.add_node("slice", {y},
                          {{"starts", std::vector<int64_t>{off}},
                           {"ends", std::vector<int64_t>{off + widths[j]}},
                           {"axes", std::vector<int64_t>{last}},
                           {"steps", std::vector<int64_t>{1}}},
                          sn, {sn})[0];
    uses.emplace_back(g.nodes()[ms[j]].outputs[0], s.id);
    off += widths[j];
  }
  const int added = static_cast<int>(g.nodes().size() - before);
  for (int i = 0; i < added; ++i) move_last_node_to(g, ms[0]);
  for (auto [from, to] : uses) replace_uses(g, from, to);
  return added;
}

}  // namespace

bool has_sibling_matmuls(const Graph& g) {
  return !sibling_groups(g).empty();
}

int merge_sibling_matmuls(Graph& g, std::vector<std::string>* merged) {
  int count = 0;
  // One group per round: merging moves node indices.
  for (;;) {
    const auto groups = sibling_groups(g);
    if (groups.empty()) break;
    const auto& [key, ms] = *groups.begin();
    if (merged) {
      std::string names;
      for (int i : ms) names += (names.empty() ? "" : " + ") + g.nodes()[i].name;
      merged->push_back(names);
    }
    merge(g, ms, std::get<1>(key) != 0);
    g.prune();
    ++count;
  }
  return count;
}

}  // namespace kiln
