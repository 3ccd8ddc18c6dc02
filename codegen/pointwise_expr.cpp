// Pointwise expressions, operand indexing and symbolic-dim parameters for generated kernels.
#include "codegen/pointwise_expr.hpp"

#include <algorithm>
#include <climits>

#include "codegen/gather_source.hpp"
#include "codegen/kernel_assembly.hpp"
#include "engine/base/check.hpp"
#include "engine/ir/op_table.hpp"

namespace kiln {

const char* storage_type(DType t) {
  switch (t) {
    case DType::F32:
      return "float";
    case DType::F16:
      return "kiln_f16";
    case DType::BF16:
      return "kiln_bf16";
    case DType::I32:
      return "int";
    case DType::I64:
      return "long long";
    case DType::Bool:
      return "kiln_bool";
  }
  return "float";
}

int vec_elems(DType t) {
  // Integer and bool tensors are never vector-loaded (the vector helpers unpack to f32).
  if (!is_float(t)) return 0;
  return static_cast<int>(16 / dtype_size(t));
}

std::string load_f32(const std::string& ptr) {
  return fmt::format("kiln_ld({})", ptr);
}

std::string store_f32(const std::string& ptr, const std::string& value) {
  return fmt::format("kiln_st({}, {})", ptr, value);
}

std::string ident(const std::string& text) {
  std::string s;
  for (char c : text) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (ok)
      s.push_back(c);
    else if (!s.empty() && s.back() != '_')
      s.push_back('_');
  }
  while (!s.empty() && s.back() == '_') s.pop_back();
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) s.insert(s.begin(), 'n');
  return s;
}

std::string tensor_param(int t) {
  return fmt::format("t{}", t);
}

// ---------------------------------------------------------------- DimParams
std::string DimParams::ref(const Dim& d) {
  if (d.is_static()) {
    int64_t v = d.value();
    return v > INT_MAX || v < INT_MIN ? fmt::format("{}LL", v) : fmt::format("{}", v);
  }
  for (const auto& [name, dim] : params_)
    if (dim == d) return name;
  std::string name = fmt::format("{}{}", prefix_, params_.size());
  params_.emplace_back(name, d);
  return name;
}

std::string DimParams::signature() const {
  std::string s;
  for (const auto& p : params_) s += fmt::format(", long long {}", p.first);
  return s;
}

void DimParams::append_args(std::vector<KernelArg>* args) const {
  for (const auto& p : params_) {
    KernelArg a;
    a.kind = KernelArg::Kind::Int;
    a.value = p.second;
    args->push_back(a);
  }
}

// ---------------------------------------------------------------- indexing
Shape tensor_strides(const TensorDesc& d) {
  size_t r = d.shape.size();
  if (d.layout == Layout::Strided) {
    KILN_ASSERT(d.strides.size() == r, "strided tensor {} without strides", d.str());
    return Shape(d.strides.begin(), d.strides.end());
  }
  std::vector<size_t> order(r);  // outermost to innermost
  for (size_t i = 0; i < r; ++i) order[i] = i;
  if (d.layout == Layout::NHWC && r >= 3) {
    order.erase(order.begin() + 1);
    order.push_back(1);
  }
  Shape strides(r, Dim(1));
  Dim s(1);
  for (size_t i = r; i-- > 0;) {
    strides[order[i]] = s;
    s = s * d.shape[order[i]];
  }
  return strides;
}

Shape iteration_strides(const TensorDesc& d) {
  if (d.layout != Layout::Strided) return tensor_strides(d);
  std::vector<size_t> order(d.shape.size());  // outermost to innermost
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return d.strides[a] > d.strides[b]; });
  Shape strides(d.shape.size(), Dim(1));
  Dim s(1);
  for (size_t i = order.size(); i-- > 0;) {
    strides[order[i]] = s;
    s = s * d.shape[order[i]];
  }
  return strides;
}

std::vector<int> broadcast_dim_map(const Shape& operand, const Shape& iter) {
  int ri = static_cast<int>(iter.size()), ro = static_cast<int>(operand.size());
  std::vector<int> map(ri, -1);
  for (int i = 0; i < ri; ++i) {
    int od = i - (ri - ro);
    if (od < 0) continue;
    const Dim& d = operand[od];
    if (d.is_static() && d.value() == 1 && !(iter[i].is_static() && iter[i].value() == 1))
      continue;  // broadcast along this dim
    map[i] = od;
  }
  return map;
}

std::vector<int> operand_dim_map(const Graph& g, const Node& n, int slot, const Shape& iter) {
  const Shape& s = g.tensor(n.inputs.at(slot)).desc.shape;
  if (op_info(n.op).channel_operands && slot > 0) {
    std::vector<int> map(iter.size(), -1);
    KILN_ASSERT(iter.size() >= 2, "{} over rank {}", op_name(n.op), iter.size());
    map[1] = 0;
    return map;
  }
  return broadcast_dim_map(s, iter);
}

std::string operand_offset(const TensorDesc& d, const std::vector<int>& map,
                           const std::vector<std::string>& coords, DimParams& dp) {
  KILN_ASSERT(map.size() == coords.size(), "map/coords size mismatch");
  Shape strides = tensor_strides(d);
  std::string off;
  for (size_t i = 0; i < map.size(); ++i) {
    if (map[i] < 0) continue;
    const Dim& st = strides.at(map[i]);
    // A dim of size 1 contributes nothing whatever its stride.
    if (d.shape[map[i]].is_static() && d.shape[map[i]].value() == 1) continue;
    std::string term = st.is_static() && st.value() == 1
                           ? coords[i]
                           : fmt::format("{} * {}", coords[i], dp.ref(st));
    off += (off.empty() ? "" : " + ") + term;
  }
  return off.empty() ? "0" : off;
}

// ---------------------------------------------------------------- math
bool is_elementwise(const Graph& g, const Node& n) {
  return op_info(n.op).role == FusionRole::Elementwise;
}

std::string pointwise_node_expr(const Graph& g, const Node& n, const std::vector<std::string>& x) {
  const OpInfo& info = op_info(n.op);
  KILN_ASSERT(info.role == FusionRole::Elementwise && info.cuda,
              "pointwise_node_expr on non-elementwise op {}", info.name);
  KILN_ASSERT(info.index_source || (static_cast<int>(x.size()) >= info.min_inputs &&
                                    static_cast<int>(x.size()) <= info.max_inputs),
              "{} with {} operands", info.name, x.size());
  std::vector<double> p = op_params(n);
  if (info.index_source) {
    const DType out = g.tensor(n.outputs[0]).desc.dtype;
    if (is_float(out)) return info.cuda(x, p.data());
    return info.icuda(x, p.data(), value_ctype(out));
  }
  std::vector<DType> dts;
  for (int t : n.inputs) dts.push_back(g.tensor(t).desc.dtype);
  if (integer_domain(info, dts)) {
    // Integer / bool math in the operands' own C type: the widest value operand's (i32 with i64
    // computes in long long), never through f32.
    KILN_ASSERT(info.icuda, "{}: integer operands reached an op without integer math", info.name);
    const size_t first = info.select ? 1 : 0;
    DType wide = dts[first];
    for (size_t i = first; i < dts.size(); ++i)
      if (dts[i] == DType::I64) wide = DType::I64;
    const std::string T = value_ctype(wide);
    std::vector<std::string> xs = x;
    for (size_t i = first; i < xs.size(); ++i)
      if (dts[i] != wide) xs[i] = fmt::format("static_cast<{}>({})", T, xs[i]);
    return info.icuda(xs, p.data(), T);
  }
  // A 16-bit result takes the op's fast form where it has one.
  const bool wide = g.tensor(n.outputs[0]).desc.dtype == DType::F32;
  return (info.fast16 && !wide ? info.fast16 : info.cuda)(x, p.data());
}

void PointwiseEmitter::emit(Writer& w, const std::vector<int>& nodes) {
  for (int ni : nodes) {
    const Node& n = graph.nodes().at(ni);
    KILN_ASSERT(is_elementwise(graph, n), "node {} ({}) is not elementwise", n.name, op_name(n.op));
    std::vector<std::string> ops;
    if (op_info(n.op).index_source) {
      KILN_ASSERT(coords.size() == 1, "node {} ({}) needs its element's index", n.name,
                  op_name(n.op));
      ops.push_back(coords[0]);
    }
    for (size_t s = 0; s < n.inputs.size(); ++s) {
      auto it = values.find(n.inputs[s]);
      if (it != values.end()) {
        ops.push_back(it->second);
      } else {
        KILN_ASSERT(load, "no loader for operand {} of node {}", s, n.name);
        ops.push_back(load(w, ni, static_cast<int>(s)));
      }
    }
    std::string var = fmt::format("v{}{}", n.outputs[0], suffix);
    w.line("const {} {} = {};  // {}", value_ctype(graph.tensor(n.outputs[0]).desc.dtype), var,
           pointwise_node_expr(graph, n, ops), ident(n.name));
    values[n.outputs[0]] = var;
  }
}

// ---------------------------------------------------------------- group kernels
void GroupParams::add_trailing(std::string decl, KernelArg arg) {
  trailing_.emplace_back(std::move(decl), std::move(arg));
}

std::string GroupParams::signature() const {
  std::string s;
  for (int t : group.inputs)
    s += fmt::format("{}const {}* __restrict__ {}", s.empty() ? "" : ", ",
                     storage_type(graph.tensor(t).desc.dtype), tensor_param(t));
  for (int t : group.outputs)
    s += fmt::format("{}{}* __restrict__ {}", s.empty() ? "" : ", ",
                     storage_type(graph.tensor(t).desc.dtype), tensor_param(t));
  s += dims.signature();
  for (const auto& [decl, arg] : trailing_) s += ", " + decl;
  return s;
}

std::vector<KernelArg> GroupParams::args() const {
  std::vector<KernelArg> a;
  for (int t : group.inputs) a.push_back({KernelArg::Kind::Tensor, t, Dim(0)});
  for (int t : group.outputs) a.push_back({KernelArg::Kind::Tensor, t, Dim(0)});
  dims.append_args(&a);
  for (const auto& [decl, arg] : trailing_) a.push_back(arg);
  return a;
}

Dim group_bytes_moved(const Graph& g, const FusionGroup& grp) {
  Dim b(0);
  for (const auto* list : {&grp.inputs, &grp.outputs})
    for (int t : *list) {
      const TensorDesc& d = g.tensor(t).desc;
      b = b + shape_numel(d.shape) * Dim(static_cast<int64_t>(dtype_size(d.dtype)));
    }
  return b;
}

Dim group_flops(const Graph& g, const FusionGroup& grp) {
  Dim f(0);
  for (int n : grp.nodes) {
    const Node& node = g.nodes()[n];
    Dim numel =
        shape_numel(g.tensor(node.inputs.empty() ? node.outputs[0] : node.inputs[0]).desc.shape);
    f = f + numel * Dim(n == grp.anchor ? 5 : 1);
  }
  return f;
}

std::string group_kernel_name(const Graph& g, const FusionGroup& grp, const std::string& detail) {
  // grp.name is "<kind>_<dtype>_<ops...>"; insert the detail after the dtype.
  std::string name = ident(grp.name);
  if (!detail.empty()) {
    size_t a = name.find('_');
    size_t b = a == std::string::npos ? a : name.find('_', a + 1);
    if (b == std::string::npos)
      name += "_" + detail;
    else
      name.insert(b, "_" + detail);
  }
  return name;
}

KernelSpec group_kernel_spec(const GroupKernel& k, const GroupParams& gp, const std::string& body) {
  std::string device = device_file("kiln_prelude.cuh") + "\n";
  if (!k.device.empty()) device += k.device + "\n";
  KernelDecl d{k.name, std::to_string(k.threads), k.min_blocks, k.cluster, gp.signature()};
  KernelSpec spec = assembled_kernel(device + k.heading, d, body, k.threads, k.grid);
  spec.args = gp.args();
  spec.bytes_moved = group_bytes_moved(gp.graph, gp.group);
  spec.flops = group_flops(gp.graph, gp.group);
  return spec;
}

Shape row_major_strides(const Shape& shape) {
  Shape st(shape.size(), Dim(1));
  Dim s(1);
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = s;
    s = s * shape[i];
  }
  return st;
}

namespace {
// Equality of two dim expressions as polynomials: structurally, or by evaluating both with the
// symbols bound to distinct primes (Dim arithmetic does not canonicalize N*64 vs 64*N).
bool dims_equal(const Dim& a, const Dim& b) {
  if (a == b) return true;
  if (a.is_static() && b.is_static()) return false;
  std::vector<std::string> syms;
  a.symbols(&syms);
  b.symbols(&syms);
  Bindings bind;
  const int64_t primes[] = {1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049};
  for (size_t i = 0; i < syms.size(); ++i) bind[syms[i]] = primes[i % 8] + 64 * (i / 8);
  return a.eval(bind) == b.eval(bind);
}
}  // namespace

std::vector<std::string> decompose(const std::string& lin, const Shape& shape, const Shape& strides,
                                   DimParams& dp) {
  size_t r = shape.size();
  // The outermost dim (largest stride) needs no modulo; find it as the dim whose stride is not a
  // factor of any other: with layouts it is the first in memory order. We pick the dim whose
  // stride equals numel / size.
  Dim numel = shape_numel(shape);
  std::vector<std::string> c(r);
  for (size_t d = 0; d < r; ++d) {
    if (shape[d].is_static() && shape[d].value() == 1) {
      c[d] = "0";
      continue;
    }
    bool unit = strides[d].is_static() && strides[d].value() == 1;
    std::string q = unit ? lin : fmt::format("({} / {})", lin, dp.ref(strides[d]));
    bool outermost = dims_equal(strides[d] * shape[d], numel);
    c[d] = outermost ? q : fmt::format("({} % {})", q, dp.ref(shape[d]));
  }
  return c;
}

bool ElementLoader::is_dense(int t) const {
  const TensorDesc& d = graph.tensor(t).desc;
  return d.shape == iter && tensor_strides(d) == dense;
}

std::string ElementLoader::offset(int t, const std::vector<int>& map) {
  bool identity = graph.tensor(t).desc.shape == iter;
  for (size_t i = 0; identity && i < map.size(); ++i) identity = map[i] == static_cast<int>(i);
  if (identity && !lin.empty() && is_dense(t)) return lin;
  return operand_offset(graph.tensor(t).desc, map, coords, *dims);
}

std::string ElementLoader::load(Writer& w, int node, int slot) {
  const Node& n = graph.nodes().at(node);
  int t = n.inputs.at(slot);
  std::vector<int> map = operand_dim_map(graph, n, slot, iter);
  std::string key = fmt::format("{}", t);
  for (int m : map) key += fmt::format(",{}", m);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::string var = fmt::format("l{}_{}{}", t, cache.size(), suffix);
  const int p = graph.tensor(t).producer;
  auto fused = std::find(gathers.begin(), gathers.end(), p);
  if (p >= 0 && fused != gathers.end()) {
    // The gather's output element at this operand's coordinates, read from its data.
    const Node& gn = graph.nodes()[p];
    std::vector<std::string> oc;
    for (size_t d = 0; d < map.size(); ++d)
      if (map[d] >= 0) oc.push_back(coords.at(d));
    KILN_ASSERT(oc.size() == graph.tensor(t).desc.shape.size(), "gather {} read broadcast",
                gn.name);
    const std::string sfx = fmt::format("_{}_{}{}", t, cache.size(), suffix);
    CopySource src = index_gather_source(w, graph, gn, oc, "long long", sfx, *dims,
                                         gather_errors.at(fused - gathers.begin()));
    const TensorDesc& dd = graph.tensor(gn.inputs[0]).desc;
    std::vector<int> ident(dd.shape.size());
    for (size_t d = 0; d < ident.size(); ++d) ident[d] = static_cast<int>(d);
    w.line("const {} {} = {};", value_ctype(dd.dtype), var,
           load_f32(tensor_param(gn.inputs[0]) + " + " +
                    operand_offset(dd, ident, src.coords, *dims)));
    cache[key] = var;
    return var;
  }
  w.line("const {} {} = {};", value_ctype(graph.tensor(t).desc.dtype), var,
         load_f32(tensor_param(t) + " + " + offset(t, map)));
  cache[key] = var;
  return var;
}

}  // namespace kiln
