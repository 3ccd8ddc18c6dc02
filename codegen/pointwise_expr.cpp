// Pointwise expressions, operand indexing and symbolic-dim parameters for generated kernels.
#include "codegen/pointwise_expr.hpp"

#include <climits>

#include "engine/check.hpp"
#include "engine/op_table.hpp"

namespace kiln {

const char* storage_type(DType t) {
  switch (t) {
    case DType::F32:
      return "float";
    case DType::F16:
      return "kiln_f16";
    case DType::BF16:
      return "kiln_bf16";
  }
  return "float";
}

int vec_elems(DType t) {
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
  if (n.op == OpKind::Batchnorm && slot > 0) {
    std::vector<int> map(iter.size(), -1);
    KILN_ASSERT(iter.size() >= 2, "batchnorm over rank {}", iter.size());
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
  return op_info(n.op).category == OpCategory::Pointwise || n.op == OpKind::Batchnorm;
}

std::string pointwise_node_expr(const Graph& g, const Node& n, const std::vector<std::string>& x) {
  if (n.op == OpKind::Batchnorm) {
    KILN_ASSERT(x.size() == 5, "batchnorm with {} operands", x.size());
    // (x - mean) * rsqrt(var + eps) * scale + bias
    return fmt::format("(({} - {}) * rsqrtf({} + {}) * {} + {})", x[0], x[3], x[4],
                       cuda_float(n.attr_float("eps")), x[1], x[2]);
  }
  const OpInfo& info = op_info(n.op);
  KILN_ASSERT(info.category == OpCategory::Pointwise && info.cuda,
              "pointwise_node_expr on non-pointwise op {}", info.name);
  std::vector<double> p = op_params(n);
  std::string e = info.cuda(x, p.data());
  if (n.op == OpKind::Cast) {
    // Rounding through the narrower storage type, as storing and reloading would.
    DType out = g.tensor(n.outputs[0]).desc.dtype;
    if (out == DType::F16) e = fmt::format("kiln_round_f16({})", e);
    if (out == DType::BF16) e = fmt::format("kiln_round_bf16({})", e);
  }
  return e;
}

void PointwiseEmitter::emit(Writer& w, const std::vector<int>& nodes) {
  for (int ni : nodes) {
    const Node& n = graph.nodes().at(ni);
    KILN_ASSERT(is_elementwise(graph, n), "node {} ({}) is not elementwise", n.name, op_name(n.op));
    std::vector<std::string> ops;
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
    w.line("const float {} = {};  // {}", var, pointwise_node_expr(graph, n, ops), ident(n.name));
    values[n.outputs[0]] = var;
  }
}

}  // namespace kiln
