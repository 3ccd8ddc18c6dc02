// Attention chains for the fused kernel (engine/planner/attention_pattern.hpp): the two matmuls
// and their operands; the steps between the scores and the softmax are in attention_scores.cpp.
#include "engine/planner/attention_pattern.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "engine/ir/graph_queries.hpp"
#include "engine/ir/op_table.hpp"
#include "engine/planner/attention_operands.hpp"

namespace kiln {
namespace {

// The only consumer of an intermediate that is not a graph output, else -1.
int private_consumer(const Graph& g, int t) {
  if (is_graph_output(g, t)) return -1;
  std::vector<int> c = consumers_of(g, t);
  return c.size() == 1 ? c[0] : -1;
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

// Whether every tensor the chain's operand ops make is read by the chain alone (Q, K and V may
// share ops: torchvision's one QKV transpose), so none of them has to exist; `written` (the
// result the kernel writes) excepted, and none is a tensor the kernel reads (q used as v too).
bool reads_stay_inside(const Graph& g, const AttentionChain& c, int written,
                       const std::vector<int>& reads) {
  std::vector<int> inside = c.operand_views;
  inside.push_back(c.qk);
  inside.push_back(c.pv);
  for (int n : c.operand_views)
    for (int t : g.nodes()[n].outputs) {
      if (t == written) continue;
      if (is_graph_output(g, t) || std::find(reads.begin(), reads.end(), t) != reads.end())
        return false;
      for (int r : consumers_of(g, t))
        if (std::find(inside.begin(), inside.end(), r) == inside.end()) return false;
    }
  return true;
}

// `c` with the operands' movement ops (each once) as its operand views.
AttentionChain chain_views(AttentionChain c, std::initializer_list<const Operand*> ops) {
  c.operand_views.clear();
  for (const Operand* x : ops)
    for (int n : x->nodes)
      if (std::find(c.operand_views.begin(), c.operand_views.end(), n) == c.operand_views.end())
        c.operand_views.push_back(n);
  return c;
}

}  // namespace

std::vector<int> AttentionChain::nodes() const {
  std::vector<int> n{qk};
  for (int x : operand_views) n.push_back(x);
  for (int x : band_nodes) n.push_back(x);
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
  if (m2.op != OpKind::Matmul || m2.inputs.size() != 2 || m2.attr_int("transpose_a") != 0)
    return std::nullopt;
  // O = P @ V, or its transpose O^T = V' @ P^T with V' = V^T ([..., D, Tk]: the attention block
  // of VQGAN / LDM-style UNets, whose O^T is the channels of the block's output).
  const bool o_rows = m2.inputs[0] == sm.outputs[0];
  if (!o_rows && !(m2.inputs[1] == sm.outputs[0] && m2.attr_int("transpose_b") != 0))
    return std::nullopt;
  c.pv = next;
  c.v = o_rows ? m2.inputs[1] : m2.inputs[0];
  c.v_rows = o_rows && m2.attr_int("transpose_b") == 0;
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
      !((c.v_rows ? vd[r - 2] : vd[r - 1]) == tk) || !(od[o_rows ? r - 1 : r - 2] == d) ||
      !(od[o_rows ? r - 2 : r - 1] == qd.shape[r - 2]) || !(scores[r - 1] == tk))
    return std::nullopt;
  std::optional<Operand> qo = read_operand(g, c.q, true), ko = read_operand(g, c.k, true),
                         vo = read_operand(g, c.v, false), oo = write_result(g, c.o);
  if (!qo || !ko || !vo || !oo) return std::nullopt;
  // The operands' movement ops join the group, so none of their tensors may be read elsewhere.
  auto inside = [&] {
    c = chain_views(c, {&*qo, &*ko, &*vo, &*oo});
    return reads_stay_inside(g, c, oo->read, {qo->read, ko->read, vo->read});
  };
  if (!inside()) {
    // A chain reaches a tensor read outside the attention: each operand's private chain alone.
    qo = read_operand(g, c.q, true, true);
    ko = read_operand(g, c.k, true, true);
    vo = read_operand(g, c.v, false, true);
    if (!qo || !ko || !vo || !inside()) return std::nullopt;
  }
  auto qs = operand_strides(g, *qo, c.q, r - 1, batch, false);
  auto ks = operand_strides(g, *ko, c.k, c.k_rows ? r - 1 : r - 2, batch, true);
  auto vs = operand_strides(g, *vo, c.v, c.v_rows ? r - 1 : r - 2, batch, true);
  auto os = operand_strides(g, *oo, c.o, o_rows ? r - 1 : r - 2, batch, false);
  if (!qs || !ks || !vs || !os) return std::nullopt;
  c.q_strides = *qs;
  c.k_strides = *ks;
  c.v_strides = *vs;
  c.o_strides = *os;
  c.operand_scale = qo->scale * ko->scale;
  c.batch = batch;
  c.q_len = qd.shape[r - 2];
  c.k_len = tk;
  c.q = qo->read;
  c.k = ko->read;
  c.v = vo->read;
  c.o = oo->read;
  c.q_offset = qo->offset;
  c.k_offset = ko->offset;
  c.v_offset = vo->offset;
  return c;
}

}  // namespace kiln
