// The steps between an attention chain's scores and its softmax (attention_pattern.hpp): a
// scale, an additive mask, a where, each at most once, in any order; masks that are bands of
// the diagonal (causal, sliding windows).
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "engine/ir/graph_queries.hpp"
#include "engine/ir/op_table.hpp"
#include "engine/planner/attention_pattern.hpp"

namespace kiln {
namespace {

// Masked logits at or below this are exp-underflow zeros next to any real score, so a masked
// key may be skipped rather than computed.
constexpr double kMaskedBelow = -1e4;

int private_consumer(const Graph& g, int t) {
  if (is_graph_output(g, t)) return -1;
  std::vector<int> c = consumers_of(g, t);
  return c.size() == 1 ? c[0] : -1;
}

std::optional<double> scalar_constant(const Graph& g, int t) {
  const TensorInfo& ti = g.tensor(t);
  if (ti.role != TensorRole::Constant || !ti.data || shape_numel(ti.desc.shape) != Dim(1))
    return std::nullopt;
  return ti.data->to_f64().at(0);
}

// The values of a constant tensor, when `t` is one.
std::optional<std::vector<double>> constant_values(const Graph& g, int t) {
  const TensorInfo& ti = g.tensor(t);
  if (ti.role != TensorRole::Constant || !ti.data) return std::nullopt;
  return ti.data->to_f64();
}

// The value every element of `t` holds: a constant filled with one value, or an expand of one.
std::optional<double> uniform_value(const Graph& g, int t) {
  const TensorInfo& ti = g.tensor(t);
  if (ti.producer >= 0 && g.nodes()[ti.producer].op == OpKind::Expand)
    t = g.nodes()[ti.producer].inputs[0];  // one expand (never a walk of the input's depth)
  std::optional<std::vector<double>> v = constant_values(g, t);
  if (!v || v->empty()) return std::nullopt;
  for (double x : *v)
    if (!(x == v->front()) && !(std::isnan(x) && std::isnan(v->front()))) return std::nullopt;
  return v->front();
}

// A band of the diagonal: key j is kept for query i when lo <= j - i (when lo is set) and
// j - i <= hi (when hi is set). Causal masks set hi, sliding windows lo as well.
struct Band {
  std::optional<int64_t> lo, hi;
};

// Keys kept by both bands.
Band intersect(const Band& a, const Band& b) {
  Band r = a;
  if (b.lo) r.lo = r.lo ? std::max(*r.lo, *b.lo) : *b.lo;
  if (b.hi) r.hi = r.hi ? std::min(*r.hi, *b.hi) : *b.hi;
  return r;
}

// The band of `keep` when every [rows, cols] slice of it is one (and it masks something).
std::optional<Band> band_of(const std::vector<bool>& keep, int64_t rows, int64_t cols) {
  if (rows < 2 || cols < 2 || keep.empty() || keep.size() % (rows * cols) != 0) return std::nullopt;
  // The edges from the first slice's rows whose kept keys stop before the last key (hi) or
  // start after the first (lo); rows that keep nothing give no edge.
  Band b;
  for (int64_t i = 0; i < rows; ++i) {
    int64_t first = 0;
    while (first < cols && !keep[i * cols + first]) ++first;
    if (first == cols) continue;
    int64_t last = first;
    while (last + 1 < cols && keep[i * cols + last + 1]) ++last;
    if (last + 1 < cols && !b.hi) b.hi = last - i;
    if (first > 0) b.lo = first - i;  // the last such row: the others may be clipped by hi
  }
  if (!b.lo && !b.hi) return std::nullopt;  // nothing masked (or everything): not a band
  for (size_t s = 0; s < keep.size(); s += rows * cols)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const bool in = (!b.lo || j - i >= *b.lo) && (!b.hi || j - i <= *b.hi);
        if (keep[s + i * cols + j] != in) return std::nullopt;
      }
  return b;
}

// The band a trilu of a uniform value keeps: kept where the trilu keeps its input (`kept_inside`,
// a condition kept where true), or masked there (a mask).
Band trilu_band(const Node& n, bool kept_inside) {
  const bool upper = n.attr_int("upper") != 0;
  const int64_t k = n.attr_int("k");
  Band b;
  if (upper == kept_inside)
    b.lo = upper ? k : k + 1;  // kept where j - i >= k, or masked where j - i <= k
  else
    b.hi = upper ? k - 1 : k;  // masked where j - i >= k, or kept where j - i <= k
  return b;
}

// Bands nest through and / or / add of two operands at most this deep (hostile graphs).
constexpr int kBandDepth = 4;

std::optional<Band> condition_band(const Graph& g, int cond, bool keep_if_true, int depth);

// The band of additive mask `m` (0 where kept, at most kMaskedBelow where masked): a constant,
// where(cond, 0, fill) or the reverse, trilu of a uniform masked value, or the sum of two.
std::optional<Band> add_mask_band(const Graph& g, int m, int depth) {
  const TensorInfo& ti = g.tensor(m);
  const Shape& s = ti.desc.shape;
  if (s.size() < 2 || depth > kBandDepth) return std::nullopt;
  if (std::optional<std::vector<double>> v = constant_values(g, m)) {
    if (!s[s.size() - 2].is_static() || !s.back().is_static()) return std::nullopt;
    const int64_t rows = s[s.size() - 2].value(), cols = s.back().value();
    std::vector<bool> keep(v->size());
    for (size_t i = 0; i < v->size(); ++i) {
      if ((*v)[i] != 0.0 && !((*v)[i] <= kMaskedBelow)) return std::nullopt;
      keep[i] = (*v)[i] == 0.0;
    }
    return band_of(keep, rows, cols);
  }
  if (ti.producer < 0) return std::nullopt;
  const Node& n = g.nodes()[ti.producer];
  if (n.op == OpKind::Where && n.inputs.size() == 3) {  // where(cond, 0, -inf) or the reverse
    std::optional<double> a = scalar_constant(g, n.inputs[1]), b = scalar_constant(g, n.inputs[2]);
    if (!a || !b) return std::nullopt;
    if (*a == 0.0 && *b <= kMaskedBelow) return condition_band(g, n.inputs[0], true, depth + 1);
    if (*b == 0.0 && *a <= kMaskedBelow) return condition_band(g, n.inputs[0], false, depth + 1);
    return std::nullopt;
  }
  if (n.op == OpKind::Add && n.inputs.size() == 2) {  // masked where either is
    std::optional<Band> a = add_mask_band(g, n.inputs[0], depth + 1);
    std::optional<Band> b = a ? add_mask_band(g, n.inputs[1], depth + 1) : std::nullopt;
    if (!b) return std::nullopt;
    return intersect(*a, *b);
  }
  if (n.op != OpKind::Trilu || n.inputs.size() != 1) return std::nullopt;
  std::optional<double> fill = uniform_value(g, n.inputs[0]);
  if (!fill || !(*fill <= kMaskedBelow)) return std::nullopt;
  return trilu_band(n, false);
}

// The band of where-condition `cond` (keeping the scores where it is `keep_if_true`): a
// constant, trilu of all-true, `and` of two kept conditions, `or` of two masked ones.
std::optional<Band> condition_band(const Graph& g, int cond, bool keep_if_true, int depth) {
  if (depth > kBandDepth) return std::nullopt;
  // eq(x, 0) and not(x) invert x's truth, a cast keeps it (torch's is_causal export:
  // where(eq(trilu(expand(1)), 0), -inf, 0)); a cast to or from bool keeps it; a few of them at
  // most, walked in a loop.
  for (int hop = 0; hop < 4; ++hop) {
    const int p = g.tensor(cond).producer;
    if (p < 0) break;
    const Node& n = g.nodes()[p];
    int next = -1;
    bool invert = false;
    const bool bool_cast = n.op == OpKind::Cast && n.inputs.size() == 1 &&
                           (g.tensor(n.inputs[0]).desc.dtype == DType::Bool ||
                            g.tensor(n.outputs[0]).desc.dtype == DType::Bool);
    if ((n.op == OpKind::Not && n.inputs.size() == 1) || bool_cast) {
      next = n.inputs[0];
      invert = n.op == OpKind::Not;
    } else if (n.op == OpKind::Eq && n.inputs.size() == 2) {
      for (int i : {0, 1})
        if (std::optional<double> z = scalar_constant(g, n.inputs[i]); z && *z == 0.0) {
          next = n.inputs[1 - i];
          invert = true;
        }
    }
    if (next < 0) break;
    cond = next;
    keep_if_true = keep_if_true != invert;
  }
  const TensorInfo& ti = g.tensor(cond);
  const Shape& s = ti.desc.shape;
  if (s.size() < 2) return std::nullopt;
  if (std::optional<std::vector<double>> v = constant_values(g, cond)) {
    if (!s[s.size() - 2].is_static() || !s.back().is_static()) return std::nullopt;
    std::vector<bool> keep(v->size());
    for (size_t i = 0; i < v->size(); ++i) keep[i] = ((*v)[i] != 0.0) == keep_if_true;
    return band_of(keep, s[s.size() - 2].value(), s.back().value());
  }
  if (ti.producer < 0) return std::nullopt;
  const Node& n = g.nodes()[ti.producer];
  // Kept where both are true, or masked where either is: the intersection of two bands.
  if (n.inputs.size() == 2 &&
      ((n.op == OpKind::And && keep_if_true) || (n.op == OpKind::Or && !keep_if_true))) {
    std::optional<Band> a = condition_band(g, n.inputs[0], keep_if_true, depth + 1);
    std::optional<Band> b =
        a ? condition_band(g, n.inputs[1], keep_if_true, depth + 1) : std::nullopt;
    if (!b) return std::nullopt;
    return intersect(*a, *b);
  }
  if (n.op != OpKind::Trilu || n.inputs.size() != 1) return std::nullopt;
  std::optional<double> all = uniform_value(g, n.inputs[0]);
  if (!all || *all == 0.0) return std::nullopt;
  return trilu_band(n, keep_if_true);
}

// Nodes computing tensor `mask` only for step node `step` (at most kBandNodes of them, found by
// walking its producers): every output private to `step` or to another such node.
constexpr size_t kBandNodes = 64;

std::vector<int> private_producers(const Graph& g, int mask, int step) {
  std::set<int> reach;
  std::vector<int> stack{mask};
  while (!stack.empty() && reach.size() < kBandNodes) {
    const int p = g.tensor(stack.back()).producer;
    stack.pop_back();
    if (p < 0 || !reach.insert(p).second) continue;
    for (int t : g.nodes()[p].inputs) stack.push_back(t);
  }
  // Consumers come after their producers (node order is topological): decide from the last.
  std::set<int> own{step};
  for (auto it = reach.rbegin(); it != reach.rend(); ++it) {
    bool mine = true;
    for (int t : g.nodes()[*it].outputs) {
      if (is_graph_output(g, t)) mine = false;
      for (int c : consumers_of(g, t)) mine &= own.count(c) > 0;
    }
    if (mine) own.insert(*it);
  }
  own.erase(step);
  return {own.begin(), own.end()};
}

bool has_step(const AttentionChain& c, ScoreStep::Kind k) {
  for (const ScoreStep& s : c.steps)
    if (s.kind == k) return true;
  return false;
}

// Node `n` as a step on scores tensor `t`, when it is one the kernel takes.
std::optional<ScoreStep> score_step(const Graph& g, const Node& n, int ni, int t,
                                    const Shape& scores) {
  ScoreStep st;
  st.node = ni;
  if ((n.op == OpKind::Div || n.op == OpKind::Mul) && n.inputs.size() == 2) {
    std::optional<double> cv;
    if (n.inputs[0] == t) cv = scalar_constant(g, n.inputs[1]);
    if (!cv && n.op == OpKind::Mul && n.inputs[1] == t) cv = scalar_constant(g, n.inputs[0]);
    if (!cv || *cv == 0.0 || !std::isfinite(*cv)) return std::nullopt;
    st.kind = ScoreStep::Kind::Scale;
    st.value = n.op == OpKind::Div ? 1.0 / *cv : *cv;
    return st;
  }
  if (n.op == OpKind::Add && n.inputs.size() == 2 && (n.inputs[0] == t) != (n.inputs[1] == t)) {
    st.kind = ScoreStep::Kind::AddMask;
    st.tensor = n.inputs[0] == t ? n.inputs[1] : n.inputs[0];
    if (!is_float(g.tensor(st.tensor).desc.dtype)) return std::nullopt;
  } else if (n.op == OpKind::Where && n.inputs.size() == 3 &&
             (n.inputs[1] == t) != (n.inputs[2] == t) && n.inputs[0] != t) {
    st.kind = ScoreStep::Kind::Where;
    st.tensor = n.inputs[0];
    st.keep_if_true = n.inputs[1] == t;
    std::optional<double> fill = scalar_constant(g, n.inputs[st.keep_if_true ? 2 : 1]);
    if (!fill || std::isnan(*fill) || g.tensor(st.tensor).desc.dtype != DType::Bool)
      return std::nullopt;
    st.value = *fill;
  } else {
    return std::nullopt;
  }
  std::optional<std::vector<Dim>> bs = broadcast_strides(g, st.tensor, scores);
  if (!bs) return std::nullopt;
  st.strides = *bs;
  return st;
}

}  // namespace

std::optional<std::vector<Dim>> broadcast_strides(const Graph& g, int t, const Shape& shape) {
  const TensorDesc& td = g.tensor(t).desc;
  std::optional<std::vector<Dim>> st = dim_strides(td);
  if (!st || td.shape.size() > shape.size()) return std::nullopt;
  const size_t lead = shape.size() - td.shape.size();
  std::vector<Dim> out(shape.size(), Dim(0));
  for (size_t i = lead; i < shape.size(); ++i) {
    const Dim& d = td.shape[i - lead];
    if (d == shape[i])
      out[i] = shape[i] == Dim(1) ? Dim(0) : (*st)[i - lead];
    else if (!(d == Dim(1)))
      return std::nullopt;
  }
  return out;
}

int match_score_steps(const Graph& g, int& t, const Shape& scores, AttentionChain& c) {
  const DType dt = g.tensor(t).desc.dtype;
  for (;;) {
    const int ni = private_consumer(g, t);
    if (ni < 0) return -1;
    const Node& n = g.nodes()[ni];
    if (n.op == OpKind::Softmax) return ni;
    if (n.outputs.size() != 1) return -1;
    const TensorDesc& od = g.tensor(n.outputs[0]).desc;
    if (od.dtype != dt || od.shape != scores) return -1;  // a mask never widens the scores
    std::optional<ScoreStep> st = score_step(g, n, ni, t, scores);
    if (!st || has_step(c, st->kind)) return -1;
    if (st->kind == ScoreStep::Kind::Scale) c.scale_value = st->value;
    std::optional<Band> band;
    const bool banded = c.causal || c.window;  // one band a chain
    if (!banded && st->kind == ScoreStep::Kind::AddMask) band = add_mask_band(g, st->tensor, 0);
    if (!banded && st->kind == ScoreStep::Kind::Where && st->value <= kMaskedBelow)
      band = condition_band(g, st->tensor, st->keep_if_true, 0);
    if (band) {
      c.causal = band->hi.has_value();
      c.causal_offset = band->hi.value_or(0);
      c.window = band->lo.has_value();
      c.window_offset = band->lo.value_or(0);
      c.band_nodes = private_producers(g, st->tensor, ni);
      st->tensor = -1;  // computed from the indices, never read
      st->strides.clear();
    }
    c.steps.push_back(*st);
    t = n.outputs[0];
  }
}

}  // namespace kiln
