// Attention operands read (and the result written) through chains of movement ops
// (attention_operands.hpp). Each dim of a tensor in the chain is a list of (size, stride) parts,
// outer first, over the chain's input in memory: a reshape regroups the parts (splitting one
// where a dim ends inside it: [197, N, 768] -> [197, 12*N, 64] makes 12*N the parts N and 12),
// a transpose permutes the dims, a slice moves the offset and scales a stride. The composition
// is strided when every dim of the operand is one part at the end.
#include "engine/planner/attention_operands.hpp"

#include <algorithm>
#include <cmath>
#include <deque>

#include "engine/ir/graph_queries.hpp"
#include "engine/ir/movement_ops.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/attention_pattern.hpp"

namespace kiln {
namespace {

struct Part {
  Dim size, stride;
  int64_t factor = 1;  // stride is a multiple of it
};
using PartDims = std::vector<std::vector<Part>>;  // per dim, outer first; empty: size 1

struct Map {
  PartDims dims;
  Dim offset{0};
};

bool exact_quotient(const Dim& a, const Dim& b, Dim* q) {
  *q = a / b;
  return *q * b == a;
}

int64_t static_or_1(const Dim& d) {
  return d.is_static() ? d.value() : 1;
}

// The parts of `flat` (outer first) regrouped into dims of `shape`, when each dim's size is a
// product of consecutive parts, a part split where a dim ends inside it.
std::optional<PartDims> regroup(std::deque<Part> flat, const Shape& shape) {
  PartDims out(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    Dim have(1);
    while (!(have == shape[i])) {
      if (flat.empty()) return std::nullopt;
      Part p = flat.front();
      flat.pop_front();
      Dim need, k;
      if (!exact_quotient(shape[i], have, &need)) return std::nullopt;
      if (p.size == need || (exact_quotient(need, p.size, &k) && !(k == Dim(1)))) {
        out[i].push_back(p);  // the part fits whole
        have = have * p.size;
      } else if (exact_quotient(p.size, need, &k)) {  // the dim ends inside the part
        out[i].push_back(Part{need, p.stride * k, p.factor * static_or_1(k)});
        flat.push_front(Part{k, p.stride, p.factor});
        have = shape[i];
      } else {
        return std::nullopt;
      }
    }
  }
  if (!flat.empty()) return std::nullopt;
  return out;
}

std::optional<PartDims> reshape(const PartDims& in, const Shape& shape) {
  std::deque<Part> flat;
  for (const std::vector<Part>& d : in)
    for (const Part& p : d) flat.push_back(p);
  return regroup(std::move(flat), shape);
}

// `m` (the map of transpose node n's input) as the map of its output.
std::optional<Map> transpose(const Graph& g, const Node& n, const Map& m) {
  const std::vector<int64_t>& perm = n.attr_ints("perm");
  if (perm.size() != m.dims.size()) return std::nullopt;
  Map out{PartDims(perm.size()), m.offset};
  for (size_t i = 0; i < perm.size(); ++i) out.dims[i] = m.dims[perm[i]];
  (void)g;
  return out;
}

std::optional<Map> slice(const Graph& g, const Node& n, const Map& m) {
  const TensorDesc& in = g.tensor(n.inputs[0]).desc;
  std::vector<int64_t> dims(in.shape.size(), 1);
  for (int64_t ax : slice_axis_list(n, in.rank(), "attention operand")) {
    if (!in.shape[ax].is_static()) return std::nullopt;
    dims[ax] = in.shape[ax].value();
  }
  const std::vector<SliceAxis> sa = slice_axes(n, dims);
  Map out = m;
  for (size_t ax = 0; ax < sa.size(); ++ax) {
    const SliceAxis& s = sa[ax];
    if (s.start == 0 && s.step == 1 && s.len == dims[ax]) continue;  // not sliced
    if (s.step <= 0 || m.dims[ax].size() != 1) return std::nullopt;
    const Part& p = m.dims[ax][0];
    if ((s.start * p.factor) % 8 != 0) return std::nullopt;  // 16-byte aligned rows
    out.offset = out.offset + p.stride * Dim(s.start);
    out.dims[ax].clear();
    if (s.len > 1)
      out.dims[ax].push_back(Part{Dim(s.len), p.stride * Dim(s.step), p.factor * s.step});
  }
  return out;
}

// The map of tensor `t` as laid out in memory: one part a dim.
std::optional<Map> map_of(const Graph& g, int t) {
  const TensorDesc& d = g.tensor(t).desc;
  std::optional<Strides> s = strides_of(d);
  if (!s) return std::nullopt;
  Map m{PartDims(d.shape.size()), Dim(0)};
  for (size_t i = 0; i < d.shape.size(); ++i)
    if (!(d.shape[i] == Dim(1))) m.dims[i].push_back(Part{d.shape[i], s->st[i], s->factor[i]});
  return m;
}

// Parts of one dim that step through memory as one part would (the outer's stride is the inner's
// span: channels-last H and W flattened into positions) merged into one.
std::vector<Part> merged(const std::vector<Part>& d) {
  std::vector<Part> out;
  for (const Part& p : d) {
    if (!out.empty() && out.back().stride == p.size * p.stride) {
      out.back() = Part{out.back().size * p.size, p.stride, p.factor};
      continue;
    }
    out.push_back(p);
  }
  return out;
}

// The strides of a map whose dims are one part each (after merging).
std::optional<Strides> strided(const Map& m) {
  Strides s;
  for (const std::vector<Part>& dim : m.dims) {
    const std::vector<Part> d = merged(dim);
    if (d.size() > 1) return std::nullopt;
    s.st.push_back(d.empty() ? Dim(0) : d[0].stride);
    s.factor.push_back(d.empty() ? 0 : d[0].factor);
  }
  return s;
}

bool movement(const Node& n) {
  return (n.op == OpKind::Reshape || n.op == OpKind::Transpose || n.op == OpKind::Slice) &&
         n.inputs.size() == 1 && n.outputs.size() == 1;
}

std::optional<double> scalar_constant(const Graph& g, int t) {
  const TensorInfo& ti = g.tensor(t);
  if (ti.role != TensorRole::Constant || !ti.data || shape_numel(ti.desc.shape) != Dim(1))
    return std::nullopt;
  return ti.data->to_f64().at(0);
}

// A private mul of `t` by a finite nonzero scalar constant: its node, factor and other input.
std::optional<Operand> scalar_mul(const Graph& g, int t) {
  const int p = g.tensor(t).producer;
  if (p < 0 || g.nodes()[p].op != OpKind::Mul || is_graph_output(g, t)) return std::nullopt;
  const Node& m = g.nodes()[p];
  for (int i = 0; i < 2 && m.inputs.size() == 2; ++i) {
    std::optional<double> c = scalar_constant(g, m.inputs[1 - i]);
    if (c && std::isfinite(*c) && *c != 0.0 &&
        g.tensor(m.inputs[i]).desc.dtype == g.tensor(t).desc.dtype &&
        g.tensor(m.inputs[i]).desc.shape == g.tensor(t).desc.shape) {
      Operand o;
      o.read = m.inputs[i];
      o.nodes.push_back(p);
      o.scale = *c;
      return o;
    }
  }
  return std::nullopt;
}

}  // namespace

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

std::optional<Operand> read_operand(const Graph& g, int t, bool may_scale, bool private_only) {
  Operand o;
  if (std::optional<Operand> m = may_scale ? scalar_mul(g, t) : std::nullopt)
    o = *m;
  else
    o.read = t;
  // The movement ops below, operand first, and the last of them that stayed a copy.
  std::vector<int> chain;
  int copy = -1;
  for (int cur = o.read; !is_graph_output(g, cur);) {
    const int p = g.tensor(cur).producer;
    if (p < 0 || !movement(g.nodes()[p])) break;
    if (private_only && !chain.empty() && consumers_of(g, cur) != std::vector<int>{chain.back()})
      break;
    chain.push_back(p);
    if (!is_view_node(g, g.nodes()[p])) copy = static_cast<int>(chain.size());
    cur = g.nodes()[p].inputs[0];
  }
  chain.resize(copy < 0 ? 0 : copy);  // views below the last copy are read in place
  const int read = chain.empty() ? o.read : g.nodes()[chain.back()].inputs[0];
  std::optional<Map> m = map_of(g, read);
  for (size_t i = chain.size(); m && i-- > 0;) {
    const Node& n = g.nodes()[chain[i]];
    if (n.op == OpKind::Transpose)
      m = transpose(g, n, *m);
    else if (n.op == OpKind::Slice)
      m = slice(g, n, *m);
    else if (std::optional<PartDims> d = reshape(m->dims, g.tensor(n.outputs[0]).desc.shape))
      m->dims = *d;
    else
      m = std::nullopt;
  }
  if (!m) return std::nullopt;
  std::optional<Strides> s = strided(*m);
  if (!s) return std::nullopt;
  o.read = read;
  o.s = *s;
  o.offset = m->offset;
  o.nodes.insert(o.nodes.end(), chain.begin(), chain.end());
  return o;
}

std::optional<Operand> write_result(const Graph& g, int o) {
  // The reshapes and transposes after O, in order, and the last of them that stayed a copy.
  std::vector<int> chain;
  int copy = -1;
  for (int cur = o; !is_graph_output(g, cur);) {
    const std::vector<int> c = consumers_of(g, cur);
    if (c.size() != 1) break;
    const Node& n = g.nodes()[c[0]];
    if (!movement(n) || n.op == OpKind::Slice) break;  // a slice would leave O partly unwritten
    chain.push_back(c[0]);
    if (!is_view_node(g, n)) copy = static_cast<int>(chain.size());
    cur = n.outputs[0];
  }
  chain.resize(copy < 0 ? 0 : copy);  // views after the last copy read it in place
  const int written = chain.empty() ? o : g.nodes()[chain.back()].outputs[0];
  std::optional<Map> m = map_of(g, written);
  for (size_t i = chain.size(); m && i-- > 0;) {  // from the result back to O: the inverse ops
    const Node& n = g.nodes()[chain[i]];
    if (n.op == OpKind::Transpose) {
      const std::vector<int64_t>& perm = n.attr_ints("perm");
      if (perm.size() != m->dims.size()) return std::nullopt;
      PartDims in(perm.size());
      for (size_t j = 0; j < perm.size(); ++j) in[perm[j]] = m->dims[j];
      m->dims = in;
    } else if (std::optional<PartDims> d = reshape(m->dims, g.tensor(n.inputs[0]).desc.shape)) {
      m->dims = *d;
    } else {
      m = std::nullopt;
    }
  }
  if (!m) return std::nullopt;
  std::optional<Strides> s = strided(*m);
  if (!s) return std::nullopt;
  Operand w;
  w.read = written;
  w.s = *s;
  w.nodes = chain;
  return w;
}

}  // namespace kiln
