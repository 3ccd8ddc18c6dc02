// The steps between an attention chain's scores and its softmax (attention_pattern.hpp): a
// scale, an additive mask, a where, each at most once, in any order; masks that are causal.
#include <cmath>

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

// The offset o when, in every [rows, cols] slice of `keep`, element (i, j) is kept exactly when
// j <= i + o (a causal mask; o may be negative: the first rows see no key).
std::optional<int64_t> causal_offset(const std::vector<bool>& keep, int64_t rows, int64_t cols) {
  if (rows < 2 || cols < 2 || keep.empty() || keep.size() % (rows * cols) != 0) return std::nullopt;
  std::optional<int64_t> o;  // from the first row that does not keep every key
  for (int64_t i = 0; i < rows && !o; ++i) {
    int64_t kept = 0;
    while (kept < cols && keep[i * cols + kept]) ++kept;
    if (kept < cols) o = kept - 1 - i;
  }
  if (!o) return std::nullopt;  // nothing masked: not a mask at all
  for (size_t s = 0; s < keep.size(); s += rows * cols)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        if (keep[s + i * cols + j] != (j <= i + *o)) return std::nullopt;
  return o;
}

std::optional<int64_t> causal_condition(const Graph& g, int cond, bool keep_if_true);

// The causal offset of additive mask `m` (0 where kept, at most kMaskedBelow where masked): a
// constant, or trilu(upper) of a uniform masked value.
std::optional<int64_t> causal_add_mask(const Graph& g, int m) {
  const TensorInfo& ti = g.tensor(m);
  const Shape& s = ti.desc.shape;
  if (s.size() < 2) return std::nullopt;
  if (std::optional<std::vector<double>> v = constant_values(g, m)) {
    if (!s[s.size() - 2].is_static() || !s.back().is_static()) return std::nullopt;
    const int64_t rows = s[s.size() - 2].value(), cols = s.back().value();
    std::vector<bool> keep(v->size());
    for (size_t i = 0; i < v->size(); ++i) {
      if ((*v)[i] != 0.0 && !((*v)[i] <= kMaskedBelow)) return std::nullopt;
      keep[i] = (*v)[i] == 0.0;
    }
    return causal_offset(keep, rows, cols);
  }
  if (ti.producer < 0) return std::nullopt;
  const Node& n = g.nodes()[ti.producer];
  if (n.op == OpKind::Where && n.inputs.size() == 3) {  // where(cond, 0, -inf) or the reverse
    std::optional<double> a = scalar_constant(g, n.inputs[1]), b = scalar_constant(g, n.inputs[2]);
    if (!a || !b) return std::nullopt;
    if (*a == 0.0 && *b <= kMaskedBelow) return causal_condition(g, n.inputs[0], true);
    if (*b == 0.0 && *a <= kMaskedBelow) return causal_condition(g, n.inputs[0], false);
    return std::nullopt;
  }
  if (n.op != OpKind::Trilu || n.inputs.size() != 1 || n.attr_int("upper") == 0)
    return std::nullopt;
  std::optional<double> fill = uniform_value(g, n.inputs[0]);
  if (!fill || !(*fill <= kMaskedBelow)) return std::nullopt;
  return n.attr_int("k") - 1;  // masked where j - i >= k
}

// The causal offset of where-condition `cond` (keeping the scores where it is `keep_if_true`):
// a constant, or trilu of all-true (lower when kept where true, upper when masked where true).
std::optional<int64_t> causal_condition(const Graph& g, int cond, bool keep_if_true) {
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
    return causal_offset(keep, s[s.size() - 2].value(), s.back().value());
  }
  if (ti.producer < 0) return std::nullopt;
  const Node& n = g.nodes()[ti.producer];
  if (n.op != OpKind::Trilu || n.inputs.size() != 1) return std::nullopt;
  std::optional<double> all = uniform_value(g, n.inputs[0]);
  if (!all || *all == 0.0) return std::nullopt;
  const bool upper = n.attr_int("upper") != 0;
  const int64_t k = n.attr_int("k");
  if (!upper && keep_if_true) return k;      // kept where j - i <= k
  if (upper && !keep_if_true) return k - 1;  // masked where j - i >= k
  return std::nullopt;
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
    std::optional<int64_t> off;
    if (!c.causal && st->kind == ScoreStep::Kind::AddMask) off = causal_add_mask(g, st->tensor);
    if (!c.causal && st->kind == ScoreStep::Kind::Where && st->value <= kMaskedBelow)
      off = causal_condition(g, st->tensor, st->keep_if_true);
    if (off) {
      c.causal = true;
      c.causal_offset = *off;
      st->tensor = -1;  // computed from the indices, never read
      st->strides.clear();
    }
    c.steps.push_back(*st);
    t = n.outputs[0];
  }
}

}  // namespace kiln
