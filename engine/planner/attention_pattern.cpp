// Attention chains for the fused kernel (engine/planner/attention_pattern.hpp): the two matmuls
// and their operands; the steps between the scores and the softmax are in attention_scores.cpp.
#include "engine/planner/attention_pattern.hpp"

#include <cmath>

#include "engine/ir/graph_queries.hpp"
#include "engine/ir/op_table.hpp"

namespace kiln {
namespace {

// The only consumer of an intermediate that is not a graph output, else -1.
int private_consumer(const Graph& g, int t) {
  if (is_graph_output(g, t)) return -1;
  std::vector<int> c = consumers_of(g, t);
  return c.size() == 1 ? c[0] : -1;
}

// Element strides of a tensor with, for each, a static factor it is known to be a multiple of.
struct Strides {
  std::vector<Dim> st;
  std::vector<int64_t> factor;
};

std::optional<Strides> strides_of(const TensorDesc& d) {
  std::optional<std::vector<Dim>> st = dim_strides(d);
  if (!st) return std::nullopt;
  Strides s{*st, std::vector<int64_t>(st->size(), 1)};
  for (size_t i = 0; i < st->size(); ++i) {
    if ((*st)[i].is_static()) {
      s.factor[i] = (*st)[i].value();
    } else {  // symbolic strides are row-major: the product of the static dims inside
      for (size_t j = i + 1; j < d.shape.size(); ++j)
        if (d.shape[j].is_static()) s.factor[i] *= d.shape[j].value();
    }
  }
  return s;
}

// The tensor the kernel reads for operand `t` and its strides over t's dims: t itself, or, when
// t is the result of a private transpose that stayed a copy (the view pass takes static strides
// only, so head splits of symbolic-length tensors are copies), the transpose's input read
// through the permuted strides, so that copy never runs. `view` is then the transpose node.
struct Operand {
  int read = -1, view = -1;
  Strides s;
  int mul = -1;        // a private mul by a scalar constant on the operand (torch's SDPA export
  double scale = 1.0;  // scales Q and K by sqrt(1 / sqrt(D)) each), folded into the scores
};

std::optional<double> scalar_constant(const Graph& g, int t) {
  const TensorInfo& ti = g.tensor(t);
  if (ti.role != TensorRole::Constant || !ti.data || shape_numel(ti.desc.shape) != Dim(1))
    return std::nullopt;
  return ti.data->to_f64().at(0);
}

std::optional<Operand> operand_in_place(const Graph& g, int t) {
  const TensorInfo& ti = g.tensor(t);
  if (ti.desc.layout != Layout::Strided && ti.producer >= 0 &&
      g.nodes()[ti.producer].op == OpKind::Transpose && private_consumer(g, t) >= 0) {
    const Node& tr = g.nodes()[ti.producer];
    std::optional<Strides> in = strides_of(g.tensor(tr.inputs[0]).desc);
    const std::vector<int64_t>& perm = tr.attr_ints("perm");
    if (in && perm.size() == in->st.size()) {
      Operand o{tr.inputs[0], ti.producer, Strides{}};
      for (int64_t p : perm) {
        o.s.st.push_back(in->st[p]);
        o.s.factor.push_back(in->factor[p]);
      }
      return o;
    }
  }
  std::optional<Strides> s = strides_of(ti.desc);
  if (!s) return std::nullopt;
  return Operand{t, -1, *s};
}

// Operand `t` as operand_in_place reads it, after a private mul by a scalar constant when
// `may_scale` (Q and K: the factor moves to the scores).
std::optional<Operand> operand_of(const Graph& g, int t, bool may_scale) {
  int mul = -1;
  double scale = 1.0;
  if (const int p = g.tensor(t).producer;
      may_scale && p >= 0 && g.nodes()[p].op == OpKind::Mul && private_consumer(g, t) >= 0) {
    const Node& m = g.nodes()[p];
    for (int i = 0; i < 2 && m.inputs.size() == 2; ++i) {
      std::optional<double> c = scalar_constant(g, m.inputs[1 - i]);
      if (mul < 0 && c && std::isfinite(*c) && *c != 0.0 &&
          g.tensor(m.inputs[i]).desc.dtype == g.tensor(t).desc.dtype &&
          g.tensor(m.inputs[i]).desc.shape == g.tensor(t).desc.shape) {
        mul = p;
        scale = *c;
        t = m.inputs[i];
      }
    }
  }
  std::optional<Operand> o = operand_in_place(g, t);
  if (!o) return std::nullopt;
  o->mul = mul;
  o->scale = scale;
  return o;
}

// Strides of `t` as [batch..., row] with D contiguous; `d_dim` is where D is among the last two
// dims (rank - 1 or rank - 2), the other of the two is the row dim. `batch`: the batch dims of
// the chain (Q's); a dim of `t` of size 1 where the batch dim is not broadcasts (stride 0) when
// `may_broadcast`, else every batch dim must equal the chain's. Every stride read is a multiple
// of 8 elements (16-byte rows for cp.async).
std::optional<std::vector<Dim>> operand_strides(const Graph& g, const Operand& op, int t,
                                                size_t d_dim, const Shape& batch,
                                                bool may_broadcast) {
  const TensorDesc& td = g.tensor(t).desc;
  const Strides& s = op.s;
  const size_t r = s.st.size();
  if (!(s.st[d_dim] == Dim(1))) return std::nullopt;
  std::vector<Dim> out;
  for (size_t i = 0; i + 2 < r; ++i) {
    if (td.shape[i] == batch[i]) {
      if (s.factor[i] % 8 != 0) return std::nullopt;
      out.push_back(s.st[i]);
    } else if (may_broadcast && td.shape[i] == Dim(1)) {
      out.push_back(Dim(0));
    } else {
      return std::nullopt;
    }
  }
  const size_t row = d_dim == r - 1 ? r - 2 : r - 1;
  if (s.factor[row] % 8 != 0) return std::nullopt;
  out.push_back(s.st[row]);
  return out;
}

}  // namespace

std::vector<int> AttentionChain::nodes() const {
  std::vector<int> n{qk};
  for (int x : operand_views) n.push_back(x);
  for (const ScoreStep& s : steps) n.push_back(s.node);
  n.push_back(softmax);
  n.push_back(pv);
  return n;
}

bool AttentionChain::kv_broadcast() const {
  for (size_t i = 0; i + 1 < k_strides.size(); ++i)
    if ((k_strides[i] == Dim(0)) != (q_strides[i] == Dim(0)) ||
        (v_strides[i] == Dim(0)) != (q_strides[i] == Dim(0)))
      return true;
  return false;
}

std::optional<std::vector<Dim>> dim_strides(const TensorDesc& d) {
  const size_t r = d.shape.size();
  std::vector<Dim> out(r, Dim(1));
  if (d.layout == Layout::Strided) {
    for (size_t i = 0; i < r; ++i) out[i] = Dim(d.strides[i]);
  } else if (d.layout == Layout::NCHW || r < 3) {  // row-major
    for (size_t i = r; i-- > 1;) out[i - 1] = out[i] * d.shape[i];
  } else {  // channels-last: only static strides
    std::optional<std::vector<int64_t>> st = static_strides(d);
    if (!st) return std::nullopt;
    for (size_t i = 0; i < r; ++i) out[i] = Dim((*st)[i]);
  }
  return out;
}

std::optional<AttentionChain> match_attention(const Graph& g, int qk) {
  const auto& nodes = g.nodes();
  const Node& m1 = nodes[qk];
  if (m1.op != OpKind::Matmul || m1.inputs.size() != 2 || m1.attr_int("transpose_a") != 0)
    return std::nullopt;
  AttentionChain c;
  c.qk = qk;
  c.q = m1.inputs[0];
  c.k = m1.inputs[1];
  c.k_rows = m1.attr_int("transpose_b") != 0;
  const TensorDesc& qd = g.tensor(c.q).desc;
  const DType dt = qd.dtype;
  if (dt != DType::F16 && dt != DType::BF16) return std::nullopt;
  const size_t r = qd.shape.size();
  if (r < 3 || g.tensor(c.k).desc.shape.size() != r) return std::nullopt;
  const Dim& d = qd.shape[r - 1];
  if (!d.is_static() || d.value() % 8 != 0 || d.value() < 8 || d.value() > 256) return std::nullopt;
  c.head_dim = d.value();
  const Shape batch(qd.shape.begin(), qd.shape.end() - 2);

  int t = m1.outputs[0];
  const Shape scores = g.tensor(t).desc.shape;
  if (scores.size() != r) return std::nullopt;
  for (size_t i = 0; i + 2 < r; ++i)
    if (!(scores[i] == batch[i])) return std::nullopt;  // K / V broadcast into Q's batch only
  const int smi = match_score_steps(g, t, scores, c);
  if (smi < 0) return std::nullopt;
  const Node& sm = nodes[smi];
  if (sm.op != OpKind::Softmax) return std::nullopt;
  int64_t axis = sm.attr_int("axis");
  if (axis != -1 && axis != static_cast<int64_t>(r) - 1) return std::nullopt;
  c.softmax = smi;
  int next = private_consumer(g, sm.outputs[0]);
  if (next < 0) return std::nullopt;
  const Node& m2 = nodes[next];
  if (m2.op != OpKind::Matmul || m2.inputs.size() != 2 || m2.inputs[0] != sm.outputs[0] ||
      m2.attr_int("transpose_a") != 0)
    return std::nullopt;
  c.pv = next;
  c.v = m2.inputs[1];
  c.v_rows = m2.attr_int("transpose_b") == 0;
  c.o = m2.outputs[0];

  for (int x : {c.k, c.v, c.o}) {
    const TensorDesc& xd = g.tensor(x).desc;
    if (xd.dtype != dt || xd.shape.size() != r) return std::nullopt;
  }
  const Shape& kd = g.tensor(c.k).desc.shape;
  const Shape& vd = g.tensor(c.v).desc.shape;
  const Shape& od = g.tensor(c.o).desc.shape;
  const Dim& tk = c.k_rows ? kd[r - 2] : kd[r - 1];
  if (!((c.k_rows ? kd[r - 1] : kd[r - 2]) == d) || !((c.v_rows ? vd[r - 1] : vd[r - 2]) == d) ||
      !((c.v_rows ? vd[r - 2] : vd[r - 1]) == tk) || !(od[r - 1] == d) ||
      !(od[r - 2] == qd.shape[r - 2]) || !(scores[r - 1] == tk))
    return std::nullopt;
  std::optional<Operand> qo = operand_of(g, c.q, true), ko = operand_of(g, c.k, true),
                         vo = operand_of(g, c.v, false), oo = operand_in_place(g, c.o);
  if (!qo || !ko || !vo || !oo || oo->view >= 0) return std::nullopt;  // O: written in place
  auto qs = operand_strides(g, *qo, c.q, r - 1, batch, false);
  auto ks = operand_strides(g, *ko, c.k, c.k_rows ? r - 1 : r - 2, batch, true);
  auto vs = operand_strides(g, *vo, c.v, c.v_rows ? r - 1 : r - 2, batch, true);
  auto os = operand_strides(g, *oo, c.o, r - 1, batch, false);
  if (!qs || !ks || !vs || !os) return std::nullopt;
  c.q_strides = *qs;
  c.k_strides = *ks;
  c.v_strides = *vs;
  c.o_strides = *os;
  for (const Operand* x : {&*qo, &*ko, &*vo}) {
    if (x->mul >= 0) c.operand_views.push_back(x->mul);
    if (x->view >= 0) c.operand_views.push_back(x->view);
  }
  c.operand_scale = qo->scale * ko->scale;
  c.batch = batch;
  c.q_len = qd.shape[r - 2];
  c.k_len = tk;
  c.q = qo->read;
  c.k = ko->read;
  c.v = vo->read;
  return c;
}

}  // namespace kiln
