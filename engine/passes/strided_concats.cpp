// Concats of strided slices that take each element of one tensor once (engine/passes/passes.hpp:
// strided_concats_as_transposes).
#include <algorithm>
#include <numeric>
#include <optional>

#include "engine/ir/graph_queries.hpp"
#include "engine/ir/movement_ops.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

// A tensor as the elements start + i step of `root` along every axis (a chain of slices).
struct Sampling {
  int root = -1;
  std::vector<int64_t> start, step;
};

// The slices from `t` up to the first tensor no slice makes, composed; only where every slice
// has positive steps over static sliced dims, and `t` has more than one of them.
std::optional<Sampling> sampling_of(const Graph& g, int t) {
  std::vector<int> chain;
  int cur = t;
  for (int p = g.tensor(cur).producer; p >= 0 && g.nodes()[p].op == OpKind::Slice;
       p = g.tensor(cur).producer) {
    chain.push_back(p);
    cur = g.nodes()[p].inputs[0];
  }
  if (chain.empty()) return std::nullopt;
  const int rank = g.tensor(cur).desc.rank();
  Sampling s{cur, std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 1)};
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const Node& n = g.nodes()[*it];
    const TensorDesc& id = g.tensor(n.inputs[0]).desc;
    std::vector<int64_t> dims(rank, 1);
    for (int64_t ax : slice_axis_list(n, rank, n.name)) {
      if (!id.shape[ax].is_static()) return std::nullopt;
      dims[ax] = id.shape[ax].value();
    }
    const std::vector<SliceAxis> sa = slice_axes(n, dims);
    for (int d = 0; d < rank; ++d) {
      if (sa[d].step < 1) return std::nullopt;
      s.start[d] += sa[d].start * s.step[d];
      s.step[d] *= sa[d].step;
    }
  }
  return s;
}

// Whether `t` (sampled as `s`) holds root elements start, start + step, .. to the end along
// every axis with start < step (all of them where the step is 1).
bool whole_sampling(const Graph& g, int t, const Sampling& s) {
  const Shape& rs = g.tensor(s.root).desc.shape;
  const Shape& ts = g.tensor(t).desc.shape;
  for (size_t d = 0; d < rs.size(); ++d) {
    if (s.step[d] == 1) {
      if (s.start[d] != 0 || !(ts[d] == rs[d])) return false;
      continue;
    }
    if (!rs[d].is_static() || rs[d].value() % s.step[d] != 0 || s.start[d] >= s.step[d] ||
        !(ts[d] == Dim(rs[d].value() / s.step[d])))
      return false;
  }
  return true;
}

struct Merge {
  int root = -1;
  int64_t axis = 0;
  std::vector<int> order;  // the strided axes, the one whose start varies slowest first
  std::vector<int64_t> step;
};

// Concat node `n` as a merge of strided samplings of one row-major tensor: input i is the
// sampling whose starts, read in mixed radix over `order` (the last axis fastest), are i.
std::optional<Merge> merge_of(const Graph& g, const Node& n) {
  if (n.op != OpKind::Concat || n.inputs.size() < 2 || is_graph_output(g, n.outputs[0]))
    return std::nullopt;
  std::vector<Sampling> ss;
  for (int in : n.inputs) {
    auto s = sampling_of(g, in);
    if (!s || !whole_sampling(g, in, *s)) return std::nullopt;
    if (!ss.empty() && (s->root != ss[0].root || s->step != ss[0].step)) return std::nullopt;
    ss.push_back(*s);
  }
  const TensorDesc& rd = g.tensor(ss[0].root).desc;
  if (rd.layout != Layout::NCHW || rd.dtype != g.tensor(n.outputs[0]).desc.dtype)
    return std::nullopt;
  Merge m{ss[0].root, n.attr_int("axis"), {}, ss[0].step};
  if (m.axis < 0) m.axis += rd.rank();
  int64_t combos = 1;
  for (int d = 0; d < rd.rank(); ++d)
    if (m.step[d] > 1) {
      if (d == m.axis) return std::nullopt;
      m.order.push_back(d);
      combos *= m.step[d];
    }
  if (m.order.empty() || m.order.size() > 4 || combos != static_cast<int64_t>(ss.size()))
    return std::nullopt;
  std::sort(m.order.begin(), m.order.end());
  do {
    bool ok = true;
    for (size_t i = 0; i < ss.size() && ok; ++i) {
      int64_t v = 0;
      for (int d : m.order) v = v * m.step[d] + ss[i].start[d];
      ok = v == static_cast<int64_t>(i);
    }
    if (ok) return m;
  } while (std::next_permutation(m.order.begin(), m.order.end()));
  return std::nullopt;
}

// Replaces concat node `ci` by reshape (each strided axis split into [extent / step, step]),
// transpose (the step axes, in merge order, before the concat axis) and reshape to its shape; the
// new nodes go right after it. Returns their number.
int to_transpose(Graph& g, int ci, const Merge& m) {
  const std::string name = g.nodes()[ci].name;
  const int out = g.nodes()[ci].outputs[0];
  const Shape out_shape = g.tensor(out).desc.shape;
  const Shape rs = g.tensor(m.root).desc.shape;
  const int rank = static_cast<int>(rs.size());
  Shape split;
  std::vector<int64_t> outer(rank), factor(rank, -1);
  for (int d = 0; d < rank; ++d) {
    outer[d] = static_cast<int64_t>(split.size());
    if (m.step[d] == 1) {
      split.push_back(rs[d]);
      continue;
    }
    split.push_back(Dim(rs[d].value() / m.step[d]));
    factor[d] = static_cast<int64_t>(split.size());
    split.push_back(Dim(m.step[d]));
  }
  std::vector<int64_t> perm;
  for (int d = 0; d < rank; ++d) {
    if (d == m.axis)
      for (int s : m.order) perm.push_back(factor[s]);
    perm.push_back(outer[d]);
  }
  const size_t before = g.nodes().size();
  const std::string sn = fresh_name(g, name + ".split");
  Tensor a = g.add_node("reshape", {Tensor{m.root}}, {{"shape", split}}, sn, {sn})[0];
  const std::string tn = fresh_name(g, name + ".perm");
  Tensor b = g.add_node("transpose", {a}, {{"perm", perm}}, tn, {tn})[0];
  const std::string on = fresh_name(g, name + ".merged");
  Tensor y = g.add_node("reshape", {b}, {{"shape", out_shape}}, on, {on})[0];
  const int added = static_cast<int>(g.nodes().size() - before);
  for (int i = 0; i < added; ++i) move_last_node_to(g, ci + 1);
  replace_uses(g, out, y.id);
  return added;
}

}  // namespace

bool has_strided_concat(const Graph& g) {
  for (const Node& n : g.nodes())
    if (merge_of(g, n)) return true;
  return false;
}

int strided_concats_as_transposes(Graph& g, std::vector<std::string>* rewritten) {
  int count = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const auto m = merge_of(g, g.nodes()[i]);
    if (!m) continue;
    if (rewritten) rewritten->push_back(g.nodes()[i].name);
    i += static_cast<size_t>(to_transpose(g, static_cast<int>(i), *m));
    ++count;
  }
  if (count > 0) g.prune();
  return count;
}

}  // namespace kiln
