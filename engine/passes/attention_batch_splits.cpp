// Attention computed in the batch shape of its mask (engine/passes/passes.hpp:
// split_attention_batches).
//
// Swin's shifted windows add a per-window mask to the scores: the scores [N W, H, S, S] are
// reshaped to [N, W, H, S, S], the mask [1, W, 1, S, S] added, and reshaped back before the
// softmax. The reshapes break the attention chain the planner fuses, so the shifted blocks wrote
// their scores to memory (a matmul, the bias and mask adds, a softmax and a matmul, and copies of
// q, k and v). Split before the first matmul instead (q, k and v reshaped to [N, W, ...], views),
// the chain is an attention over two batch dims whose mask broadcasts over N; its output is
// reshaped back.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "engine/ir/graph_queries.hpp"
#include "engine/ir/op_table.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

// The input of elementwise node `n` that carries the chain (its output's shape, an intermediate),
// when exactly one does and every other one broadcasts over the chain's first dim.
int chain_input(const Graph& g, const Node& n) {
  const Shape& os = g.tensor(n.outputs[0]).desc.shape;
  int chain = -1;
  for (int t : n.inputs) {
    const Shape& s = g.tensor(t).desc.shape;
    if (s == os && g.tensor(t).producer >= 0) {
      if (chain >= 0) return -1;
      chain = t;
    } else if (s.size() == os.size() && !(s[0].is_static() && s[0].value() == 1)) {
      return -1;
    }
  }
  return chain;
}

struct Match {
  int split = -1, mm = -1, mm2 = -1, softmax = -1;
  std::vector<int> up, down;  // elementwise nodes between the matmul and the split, the split and
                              // the merge (in order)
  Dim d0, d1;                 // the split of the first dim
};

// The attention chain around reshape node `r` that splits the scores' first dim.
std::optional<Match> match(const Graph& g, int r) {
  const Node& split = g.nodes()[r];
  if (split.op != OpKind::Reshape) return std::nullopt;
  const Shape& is = g.tensor(split.inputs[0]).desc.shape;
  const Shape& os = g.tensor(split.outputs[0]).desc.shape;
  if (is.size() < 3 || os.size() != is.size() + 1 || !(os[0] * os[1] == is[0])) return std::nullopt;
  for (size_t i = 1; i < is.size(); ++i)
    if (!(os[i + 1] == is[i])) return std::nullopt;
  Match m;
  m.split = r;
  m.d0 = os[0];
  m.d1 = os[1];
  // Up: elementwise ops back to the scores' matmul.
  int t = split.inputs[0];
  for (;;) {
    if (!read_by_one(g, t)) return std::nullopt;
    const int p = g.tensor(t).producer;
    if (p < 0) return std::nullopt;
    const Node& pn = g.nodes()[p];
    if (pn.op == OpKind::Matmul) {
      m.mm = p;
      break;
    }
    if (!is_elementwise(pn) || m.up.size() > 4) return std::nullopt;
    m.up.insert(m.up.begin(), p);
    t = chain_input(g, pn);
    if (t < 0) return std::nullopt;
  }
  // Down: elementwise ops to the reshape merging the two dims back.
  int u = split.outputs[0];
  int merge = -1;
  for (;;) {
    if (!read_by_one(g, u)) return std::nullopt;
    const int c = consumers_of(g, u)[0];
    const Node& cn = g.nodes()[c];
    if (cn.op == OpKind::Reshape) {
      merge = c;
      break;
    }
    if (!is_elementwise(cn) || m.down.size() > 4) return std::nullopt;
    for (int in : cn.inputs)  // the chain may enter once only
      if (in != u && g.tensor(in).producer >= 0 && g.tensor(in).desc.shape == os)
        return std::nullopt;
    m.down.push_back(c);
    u = cn.outputs[0];
  }
  const int merged = g.nodes()[merge].outputs[0];
  if (!(g.tensor(merged).desc.shape == is) || !read_by_one(g, merged)) return std::nullopt;
  m.softmax = consumers_of(g, merged)[0];
  const Node& sm = g.nodes()[m.softmax];
  const int64_t axis = sm.op == OpKind::Softmax ? sm.attr_int("axis") : 0;
  if (sm.op != OpKind::Softmax || (axis != -1 && axis != static_cast<int64_t>(is.size()) - 1) ||
      !read_by_one(g, sm.outputs[0]))
    return std::nullopt;
  m.mm2 = consumers_of(g, sm.outputs[0])[0];
  const Node& pv = g.nodes()[m.mm2];
  // (its result is replaced: not a graph output, the caller's buffer)
  if (pv.op != OpKind::Matmul || pv.inputs.size() != 2 || pv.inputs[0] != sm.outputs[0] ||
      pv.attr_int("transpose_a") != 0 || is_graph_output(g, pv.outputs[0]))
    return std::nullopt;
  const Node& qk = g.nodes()[m.mm];
  if (qk.inputs.size() != 2) return std::nullopt;
  for (int op : {qk.inputs[0], qk.inputs[1], pv.inputs[1]})  // q, k, v over the whole batch
    if (g.tensor(op).desc.rank() != static_cast<int>(is.size()) ||
        !(g.tensor(op).desc.shape[0] == is[0]))
      return std::nullopt;
  return m;
}

class Builder {
 public:
  Builder(Graph& g, std::string stem) : g_(g), stem_(std::move(stem)) {}
  Tensor add(const std::string& op, const std::vector<Tensor>& ins, const Attrs& attrs) {
    const std::string nm = fresh_name(g_, fmt::format("{}.{}", stem_, op));
    ++count_;
    return g_.add_node(op, ins, attrs, nm, {nm})[0];
  }
  // `t` [d0 d1, rest..] as [d0, d1, rest..]; a private elementwise op by scalars making it (the
  // scale of q) is rebuilt over the split input instead, so that the attention matcher still
  // finds it. (An op by a tensor, Swin V2's per-head scale, stays where it is: in the epilogue of
  // the kernel before it.)
  Tensor split(int t, const Dim& d0, const Dim& d1) {
    const int p = g_.tensor(t).producer;
    if (p >= 0 && read_by_one(g_, t) && is_elementwise(g_.nodes()[p]) && by_scalars(p)) {
      const Node pn = g_.nodes()[p];
      const int c = chain_input(g_, pn);
      if (c >= 0) return redo(pn, c, split_plain(c, d0, d1));
    }
    return split_plain(t, d0, d1);
  }
  // Elementwise node `n` again, its chain input `from` replaced by `to`.
  Tensor redo(const Node& n, int from, Tensor to) {
    std::vector<Tensor> ins;
    for (int t : n.inputs) ins.push_back(t == from ? to : Tensor{t});
    return add(op_name(n.op), ins, n.attrs);
  }
  int count() const { return count_; }

 private:
  // Whether node `p`'s inputs other than its chain input are scalars.
  bool by_scalars(int p) const {
    const Node& n = g_.nodes()[p];
    const int c = chain_input(g_, n);
    for (int t : n.inputs)
      if (t != c && !(shape_numel(g_.tensor(t).desc.shape) == Dim(1))) return false;
    return true;
  }
  Tensor split_plain(int t, const Dim& d0, const Dim& d1) {
    Shape s = g_.tensor(t).desc.shape;
    s.erase(s.begin());
    s.insert(s.begin(), {d0, d1});
    return add("reshape", {Tensor{t}}, {{"shape", s}});
  }
  Graph& g_;
  std::string stem_;
  int count_ = 0;
};

// The constant operand of `add` node `n` (its other input the chain), or -1.
int added_constant(const Graph& g, const Node& n) {
  if (n.op != OpKind::Add || n.inputs.size() != 2) return -1;
  for (int t : n.inputs)
    if (g.tensor(t).role == TensorRole::Constant && g.tensor(t).data.has_value()) return t;
  return -1;
}

// Every op around the split adds a constant (Swin: the relative position bias before the split,
// the window mask after it): their sum, one constant of the broadcast shape in `rank` dims, so
// that the chain adds one mask (the fused kernel takes one). Else -1.
int summed_constants(Graph& g, const Match& m, size_t rank, const std::string& stem) {
  std::vector<int> cs;
  for (const std::vector<int>* ops : {&m.up, &m.down})
    for (int i : *ops) {
      const int c = added_constant(g, g.nodes()[i]);
      if (c < 0) return -1;
      cs.push_back(c);
    }
  if (cs.size() < 2) return -1;
  std::vector<int64_t> shape(rank, 1);
  std::vector<std::vector<int64_t>> shapes;
  for (int c : cs) {
    const Shape& cd = g.tensor(c).desc.shape;
    if (cd.size() > rank) return -1;
    std::vector<int64_t> s(rank - cd.size(), 1);
    for (const Dim& d : cd) {
      if (!d.is_static()) return -1;
      s.push_back(d.value());
    }
    for (size_t i = 0; i < rank; ++i) {
      if (s[i] != 1 && shape[i] != 1 && s[i] != shape[i]) return -1;
      shape[i] = std::max(shape[i], s[i]);
    }
    shapes.push_back(s);
  }
  std::vector<LazyHostTensor> data;
  for (int c : cs) data.push_back(g.tensor(c).data);
  const DType dt = g.tensor(cs[0]).desc.dtype;
  TensorDesc d{dt, Shape(shape.begin(), shape.end()), Layout::NCHW, {}};
  return g
      .constant_deferred(fresh_name(g, stem + "_masks"), d,
                         [data, shapes, shape, dt] {
                           int64_t n = 1;
                           for (int64_t v : shape) n *= v;
                           std::vector<double> sum(static_cast<size_t>(n), 0.0);
                           for (size_t k = 0; k < data.size(); ++k) {
                             const std::vector<double> v = data[k]->to_f64();
                             for (int64_t e = 0; e < n; ++e) {
                               int64_t rem = e, src = 0, stride = 1;
                               for (size_t i = shape.size(); i-- > 0;) {
                                 const int64_t c = rem % shape[i];
                                 rem /= shape[i];
                                 if (shapes[k][i] != 1) src += c * stride;
                                 stride *= shapes[k][i];
                               }
                               sum[static_cast<size_t>(e)] += v[static_cast<size_t>(src)];
                             }
                           }
                           return HostTensor::from_f64(dt, shape, sum);
                         })
      .id;
}

void rewrite(Graph& g, const Match& m) {
  const Node qk = g.nodes()[m.mm], pv = g.nodes()[m.mm2];
  const int out = pv.outputs[0];
  const Shape out_shape = g.tensor(out).desc.shape;
  Builder b(g, qk.name);
  Tensor t = b.add("matmul", {b.split(qk.inputs[0], m.d0, m.d1), b.split(qk.inputs[1], m.d0, m.d1)},
                   qk.attrs);
  const int masks = summed_constants(g, m, out_shape.size() + 1, qk.name);
  if (masks >= 0) {
    t = b.add("add", {t, Tensor{masks}}, {});
  } else {
    int prev = qk.outputs[0];
    for (int i : m.up) {
      const Node n = g.nodes()[i];
      t = b.redo(n, prev, t);
      prev = n.outputs[0];
    }
    prev = g.nodes()[m.split].outputs[0];  // the chain goes on from the split's output
    for (int i : m.down) {
      const Node n = g.nodes()[i];
      t = b.redo(n, prev, t);
      prev = n.outputs[0];
    }
  }
  t = b.add("softmax", {t}, {{"axis", AttrValue(int64_t{-1})}});
  t = b.add("matmul", {t, b.split(pv.inputs[1], m.d0, m.d1)}, pv.attrs);
  t = b.add("reshape", {t}, {{"shape", out_shape}});
  for (int i = 0; i < b.count(); ++i) move_last_node_to(g, m.mm2 + 1);
  replace_uses(g, out, t.id);
}

}  // namespace

bool has_reshape_and_softmax(const Graph& g) {
  bool r = false, s = false;
  for (const Node& n : g.nodes()) {
    r = r || n.op == OpKind::Reshape;
    s = s || n.op == OpKind::Softmax;
  }
  return r && s;
}

int split_attention_batches(Graph& g, std::vector<std::string>* rewritten) {
  int count = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const auto m = match(g, static_cast<int>(i));
    if (!m) continue;
    if (rewritten) rewritten->push_back(g.nodes()[m->mm].name);
    rewrite(g, *m);
    g.prune();  // the old chain, some of it before node i: the scan starts again
    i = static_cast<size_t>(-1);
    ++count;
  }
  return count;
}

}  // namespace kiln
