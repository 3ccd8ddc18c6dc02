// Attention chains for the fused kernel (engine/attention_pattern.hpp).
#include "engine/planner/attention_pattern.hpp"

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

std::optional<double> scalar_constant(const Graph& g, int t) {
  const TensorInfo& ti = g.tensor(t);
  if (ti.role != TensorRole::Constant || !ti.data || shape_numel(ti.desc.shape) != Dim(1))
    return std::nullopt;
  return ti.data->to_f64().at(0);
}

// Static strides of `t` as [batch..., row, D] with D contiguous; `d_dim` is where D is among the
// last two dims (rank - 1 or rank - 2), the other of the two is the row dim.
std::optional<std::vector<int64_t>> operand_strides(const Graph& g, int t, size_t d_dim) {
  std::optional<std::vector<int64_t>> st = static_strides(g.tensor(t).desc);
  if (!st) return std::nullopt;
  const size_t r = st->size();
  if ((*st)[d_dim] != 1) return std::nullopt;
  std::vector<int64_t> out(st->begin(), st->end() - 2);
  out.push_back((*st)[d_dim == r - 1 ? r - 2 : r - 1]);
  for (int64_t s : out)
    if (s % 8 != 0) return std::nullopt;
  return out;
}

}  // namespace

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
  if (!d.is_static() || d.value() % 32 != 0 || d.value() < 32 || d.value() > 128)
    return std::nullopt;
  c.head_dim = d.value();

  int t = m1.outputs[0];
  int next = private_consumer(g, t);
  if (next < 0) return std::nullopt;
  if (nodes[next].op == OpKind::Div || nodes[next].op == OpKind::Mul) {
    const Node& sn = nodes[next];
    std::optional<double> cv;
    if (sn.inputs.size() == 2 && sn.inputs[0] == t) cv = scalar_constant(g, sn.inputs[1]);
    if (!cv && sn.op == OpKind::Mul && sn.inputs.size() == 2 && sn.inputs[1] == t)
      cv = scalar_constant(g, sn.inputs[0]);
    if (!cv || *cv == 0.0) return std::nullopt;
    c.scale = next;
    c.scale_value = sn.op == OpKind::Div ? 1.0 / *cv : *cv;
    t = sn.outputs[0];
    next = private_consumer(g, t);
    if (next < 0) return std::nullopt;
  }
  const Node& sm = nodes[next];
  if (sm.op != OpKind::Softmax) return std::nullopt;
  int64_t axis = sm.attr_int("axis");
  if (axis != -1 && axis != static_cast<int64_t>(r) - 1) return std::nullopt;
  c.softmax = next;
  next = private_consumer(g, sm.outputs[0]);
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
    for (size_t i = 0; i + 2 < r; ++i)
      if (!(xd.shape[i] == qd.shape[i])) return std::nullopt;  // no broadcast batch dims
  }
  const Shape& kd = g.tensor(c.k).desc.shape;
  const Shape& vd = g.tensor(c.v).desc.shape;
  const Shape& od = g.tensor(c.o).desc.shape;
  const Dim& tk = c.k_rows ? kd[r - 2] : kd[r - 1];
  if (!((c.k_rows ? kd[r - 1] : kd[r - 2]) == d) || !((c.v_rows ? vd[r - 1] : vd[r - 2]) == d) ||
      !((c.v_rows ? vd[r - 2] : vd[r - 1]) == tk) || !(od[r - 1] == d) ||
      !(od[r - 2] == qd.shape[r - 2]))
    return std::nullopt;
  auto qs = operand_strides(g, c.q, r - 1);
  auto ks = operand_strides(g, c.k, c.k_rows ? r - 1 : r - 2);
  auto vs = operand_strides(g, c.v, c.v_rows ? r - 1 : r - 2);
  auto os = operand_strides(g, c.o, r - 1);
  if (!qs || !ks || !vs || !os) return std::nullopt;
  c.q_strides = *qs;
  c.k_strides = *ks;
  c.v_strides = *vs;
  c.o_strides = *os;
  return c;
}

}  // namespace kiln
