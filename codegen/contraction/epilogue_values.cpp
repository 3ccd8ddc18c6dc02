// The fused pointwise epilogue of every conv2d / matmul kernel: the values of the group's nodes
// after the anchor at an output element, its operands' loads (column pairs as one word where
// the layout allows), the outputs' stores, and the output coordinates of a GEMM row.
#include <cctype>

#include "codegen/contraction_common.hpp"
#include "codegen/pointwise_expr.hpp"
#include "engine/base/check.hpp"
#include "engine/ir/op_table.hpp"

namespace kiln::contraction {

namespace {

// A literal stride ("802816LL") that is even.
bool is_even_literal(const std::string& stride) {
  if (stride.size() < 3 || stride.size() > 20 || stride.compare(stride.size() - 2, 2, "LL") != 0)
    return false;
  for (size_t i = 0; i + 2 < stride.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(stride[i]))) return false;
  return std::stoll(stride.substr(0, stride.size() - 2)) % 2 == 0;
}

// One load term: `coord` * `stride` (code).
struct Term {
  size_t coord;
  std::string stride;
};

// The code of an epilogue operand's value: a pair load (its word declared once in pairs->pre)
// where EpiloguePairs allows it, else one scalar load. `col` is the column's index in `coords`.
std::string operand_load(ArgList& args, const Graph& g, int t, const std::vector<Term>& terms,
                         const std::vector<std::string>& coords, size_t col, EpiloguePairs* pairs,
                         const std::string& ind) {
  const TensorDesc& td = g.tensor(t).desc;
  std::string ptr = args.tensor(g, t, true);
  bool pair = pairs && td.dtype != DType::F32;
  bool along_col = false;
  for (const Term& m : terms) {
    if (m.coord == col)
      along_col = m.stride == "1LL";
    else
      pair = pair && is_even_literal(m.stride);
  }
  pair = pair && along_col;
  if (pair && pairs->smem_words.count(t))
    return fmt::format("kc_{}_of_x2({}, {})", dtype_name(td.dtype), pairs->smem_words.at(t),
                       pairs->e);
  std::string off;
  for (const Term& m : terms)
    off += fmt::format("{}{} * {}", off.empty() ? "" : " + ",
                       pair && m.coord == col ? pairs->col0 : coords[m.coord], m.stride);
  if (off.empty()) off = "0";
  if (!pair) return fmt::format("{}({} + {})", load_fn(td.dtype), ptr, off);
  std::string load = fmt::format("kc_ld_x2({} + {})", ptr, off);
  auto [it, fresh] = pairs->words.emplace(load, fmt::format("a{}_{}", t, pairs->words.size()));
  if (fresh) pairs->pre.push_back(fmt::format("{}const unsigned {} = {};", ind, it->second, load));
  return fmt::format("kc_{}_of_x2({}, {})", dtype_name(td.dtype), it->second, pairs->e);
}

}  // namespace

EpilogueCode epilogue(const Problem& p, ArgList& args, const std::vector<std::string>& coords,
                      const std::string& acc, const std::string& ind, const std::string& capture,
                      const std::string& capture_index, EpiloguePairs* pairs) {
  const Graph& g = *p.graph;
  EpilogueCode e;
  std::map<int, std::string> vals;
  const TensorDesc& yd = g.tensor(p.y).desc;
  std::string yv = fmt::format("v{}", p.y);
  const size_t col = conv_like(p) ? 1 : coords.size() - 1;
  if (p.bias >= 0) {
    const TensorDesc& bd = g.tensor(p.bias).desc;
    std::string ld =
        operand_load(args, g, p.bias, {{col, stride_code(args, bd)[0]}}, coords, col, pairs, ind);
    e.lines.push_back(fmt::format("{}const float {} = {} + {};", ind, yv, acc, ld));
    e.ops.push_back("bias");
  } else {
    e.lines.push_back(fmt::format("{}const float {} = {};", ind, yv, acc));
  }
  vals[p.y] = yv;
  for (int ni : p.group->nodes) {
    if (ni == p.group->anchor) continue;
    const Node& n = g.nodes().at(ni);
    KILN_CHECK(is_elementwise(g, n),
               "{}: node '{}' ({}) cannot be fused into a {} epilogue: only pointwise ops can",
               p.where, n.name, op_name(n.op), op_name(p.anchor->op));
    const TensorDesc& od = g.tensor(n.outputs[0]).desc;
    KILN_CHECK(od.shape == yd.shape,
               "{}: epilogue node '{}' has output shape {} but the contraction output is {}",
               p.where, n.name, shape_str(od.shape), shape_str(yd.shape));
    std::vector<std::string> x;
    for (size_t slot = 0; slot < n.inputs.size(); ++slot) {
      int t = n.inputs[slot];
      auto it = vals.find(t);
      if (it != vals.end()) {
        x.push_back(it->second);
        continue;
      }
      const TensorDesc& td = g.tensor(t).desc;
      std::vector<int> map = operand_dim_map(g, n, static_cast<int>(slot), yd.shape);
      auto st = stride_code(args, td);
      std::vector<Term> terms;
      for (size_t i = 0; i < map.size(); ++i) {
        if (map[i] < 0) continue;
        if (td.shape[map[i]].is_static() && td.shape[map[i]].value() == 1) continue;
        terms.push_back({i, st[map[i]]});
      }
      std::string v = fmt::format("v{}", t);
      e.lines.push_back(fmt::format("{}const float {} = {};", ind, v,
                                    operand_load(args, g, t, terms, coords, col, pairs, ind)));
      vals[t] = v;
      x.push_back(v);
    }
    std::string expr = pointwise_node_expr(g, n, x);
    std::string v = fmt::format("v{}", n.outputs[0]);
    e.lines.push_back(fmt::format("{}const float {} = {};", ind, v, expr));
    vals[n.outputs[0]] = v;
    e.ops.push_back(op_name(n.op));
  }
  for (int t : p.group->outputs) {
    auto it = vals.find(t);
    KILN_ASSERT(it != vals.end(), "{}: output tensor {} is not computed by the group", p.where, t);
    const TensorDesc& td = g.tensor(t).desc;
    KILN_CHECK(td.shape == yd.shape, "{}: output '{}' has shape {}, expected {}", p.where,
               g.tensor(t).name, shape_str(td.shape), shape_str(yd.shape));
    if (!capture.empty()) {
      e.lines.push_back(
          fmt::format("{}{}{}[{}] = {};", ind, capture, t, capture_index, it->second));
      continue;
    }
    auto st = stride_code(args, td);
    std::string off;
    for (size_t i = 0; i < coords.size(); ++i)
      off += fmt::format("{}{} * {}", i ? " + " : "", coords[i], st[i]);
    e.lines.push_back(fmt::format("{}{}({} + {}, {});", ind, store_fn(td.dtype),
                                  args.tensor(g, t, false), off, it->second));
  }
  return e;
}

bool outputs_pair_storable(const Problem& p, ArgList& args) {
  const Graph& g = *p.graph;
  const TensorDesc& yd = g.tensor(p.y).desc;
  size_t col = conv_like(p) ? 1 : yd.shape.size() - 1;
  const Dim& ext = yd.shape[col];
  if (!ext.is_static() || ext.value() % 2 != 0) return false;
  for (int t : p.group->outputs) {
    const TensorDesc& td = g.tensor(t).desc;
    if (td.shape != yd.shape) return false;
    auto st = stride_code(args, td);
    if (st[col] != "1LL") return false;
    // Every other stride even, so that a pair is 2-element aligned (dense layouts: multiples of
    // the column extent).
    for (size_t i = 0; i < st.size(); ++i) {
      if (i == col) continue;
      if (td.layout == Layout::Strided) {
        if (td.strides[i] % 2 != 0) return false;
      }
    }
  }
  return true;
}

std::vector<std::string> epilogue_coords(Writer& w, const Problem& p, ArgList& args) {
  if (p.is_conv) {
    std::string oh = args.dim(p.conv.oh), ow = args.dim(p.conv.ow);
    w.line("long long q = row;");
    w.line("const long long ow = q % {}; q /= {};", ow, ow);
    w.line("const long long oh = q % {}; q /= {};", oh, oh);
    w.line("const long long n = q;");
    return {"n", "col", "oh", "ow"};
  }
  std::vector<std::string> coords;
  if (!p.mm.fold.empty()) {  // row = (b0, .., frow) of the folded batch dims
    const std::string mi = args.dim(p.mm.m_inner);
    w.line("long long q = row;");
    w.line("const long long frow = q % {}; q /= {};", mi, mi);
    for (size_t i = p.mm.fold.size(); i-- > 0;) {
      const std::string d = args.dim(p.mm.fold[i]);
      w.line("const long long b{} = q % {}; q /= {};", i, d, d);
    }
    for (size_t i = 0; i < p.mm.fold.size(); ++i) coords.push_back(fmt::format("b{}", i));
    coords.push_back("frow");
    coords.push_back("col");
    return coords;
  }
  for (size_t i = 0; i < p.mm.batch.size(); ++i) coords.push_back(fmt::format("b{}", i));
  coords.push_back("row");
  coords.push_back("col");
  return coords;
}

std::string epilogue_suffix(const Problem& p) {
  std::string s;
  if (p.bias >= 0) s += "_bias";
  for (int ni : p.group->nodes) {
    if (ni == p.group->anchor) continue;
    s += std::string("_") + op_name(p.graph->nodes().at(ni).op);
  }
  return s;
}

}  // namespace kiln::contraction
