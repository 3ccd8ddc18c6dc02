// Graph building: every node is checked and its outputs inferred as it is added.
#include "kiln/graph.hpp"

#include <algorithm>
#include <set>

#include "engine/base/check.hpp"
#include "engine/base/memory_budget.hpp"
#include "engine/base/random.hpp"
#include "engine/ir/op_table.hpp"

namespace kiln {

namespace {
template <class T>
const T& get_attr(const Node& n, const std::string& k, const char* what) {
  auto it = n.attrs.find(k);
  KILN_ASSERT(it != n.attrs.end(), "node {} has no attribute {}", n.name, k);
  const T* v = std::get_if<T>(&it->second);
  KILN_ASSERT(v != nullptr, "attribute {}.{} is not {}", n.name, k, what);
  return *v;
}
}  // namespace

int64_t Node::attr_int(const std::string& k) const {
  return get_attr<int64_t>(*this, k, "int");
}
double Node::attr_float(const std::string& k) const {
  return get_attr<double>(*this, k, "float");
}
const std::string& Node::attr_str(const std::string& k) const {
  return get_attr<std::string>(*this, k, "string");
}
const std::vector<int64_t>& Node::attr_ints(const std::string& k) const {
  return get_attr<std::vector<int64_t>>(*this, k, "int list");
}
const std::vector<Dim>& Node::attr_dims(const std::string& k) const {
  return get_attr<std::vector<Dim>>(*this, k, "dim list");
}
const std::vector<double>& Node::attr_floats(const std::string& k) const {
  return get_attr<std::vector<double>>(*this, k, "float list");
}

std::string Graph::unique_name(const std::string& base) {
  for (;;) {
    std::string n = fmt::format("{}_{}", base, auto_id_++);
    if (!by_name_.count(n)) return n;
  }
}

int Graph::new_tensor(const std::string& name, const TensorDesc& desc, TensorRole role,
                      const std::string& where) {
  KILN_CHECK(!name.empty(), "{}: tensor name must not be empty", where);
  auto it = by_name_.find(name);
  KILN_CHECK(it == by_name_.end(), "{}: tensor '{}' is defined twice", where, name);
  TensorInfo t;
  t.name = name;
  t.desc = desc;
  t.role = role;
  tensors_.push_back(std::move(t));
  int id = static_cast<int>(tensors_.size()) - 1;
  by_name_[name] = id;
  return id;
}

namespace {
void check_desc(const TensorDesc& d, const std::string& where) {
  for (size_t i = 0; i < d.shape.size(); ++i)
    if (d.shape[i].is_static())
      KILN_CHECK(d.shape[i].value() > 0,
                 "{}.shape[{}]: expected a positive size or a symbol, found {}", where, i,
                 d.shape[i].value());
  KILN_CHECK(d.layout != Layout::NHWC || d.rank() == 4,
             "{}.layout: NHWC needs a 4-D tensor, found rank {}", where, d.rank());
  if (d.layout == Layout::Strided) {
    KILN_CHECK(d.strides.size() == d.shape.size(), "{}.strides: expected {} strides, found {}",
               where, d.shape.size(), d.strides.size());
    KILN_CHECK(shape_is_static(d.shape), "{}.strides: explicit strides need a static shape", where);
    for (int64_t s : d.strides)
      KILN_CHECK(s >= 0, "{}.strides: expected non-negative strides, found {}", where, s);
  }
}
}  // namespace

Tensor Graph::input(const std::string& name, DType dtype, Shape shape, Layout layout) {
  TensorDesc d;
  d.dtype = dtype;
  d.shape = std::move(shape);
  d.layout = layout;
  return input(name, d);
}

Tensor Graph::input(const std::string& name, const TensorDesc& desc) {
  std::string where = fmt::format("input '{}'", name);
  check_desc(desc, where);
  int id = new_tensor(name, desc, TensorRole::Input, where);
  inputs_.push_back(id);
  return {id};
}

namespace {
// Data for a constant of `desc`: its logical shape, converted to desc.dtype, row-major.
HostTensor conform(HostTensor data, const TensorDesc& desc, const std::vector<int64_t>& shape,
                   const std::string& where) {
  KILN_CHECK(data.shape == shape, "{}: data has shape {} but the constant is declared {}", where,
             shape_str(Shape(data.shape.begin(), data.shape.end())), shape_str(desc.shape));
  if (data.dtype != desc.dtype || !data.is_row_major()) {
    // Between integer / bool types exactly (an i64 beyond 2^53 survives), else through f64.
    if (!is_float(data.dtype) && !is_float(desc.dtype))
      data = HostTensor::from_i64(desc.dtype, shape, data.to_i64());
    else
      data = HostTensor::from_f64(desc.dtype, shape, data.to_f64());
  }
  return data;
}

std::vector<int64_t> constant_shape(const TensorDesc& desc, const std::string& where) {
  check_desc(desc, where);
  KILN_CHECK(shape_is_static(desc.shape), "{}: constants need a static shape, found {}", where,
             shape_str(desc.shape));
  return eval_shape(desc.shape, {});
}
}  // namespace

Tensor Graph::constant(const std::string& name, const TensorDesc& desc, HostTensor data,
                       ConstantSource source) {
  std::string where = fmt::format("constant '{}'", name);
  std::vector<int64_t> shape = constant_shape(desc, where);
  data = conform(std::move(data), desc, shape, where);
  int id = new_tensor(name, desc, TensorRole::Constant, where);
  tensors_[id].data = std::move(data);
  tensors_[id].source = std::move(source);
  return {id};
}

Tensor Graph::constant_deferred(const std::string& name, const TensorDesc& desc,
                                std::function<HostTensor()> make, ConstantSource source) {
  std::string where = fmt::format("constant '{}'", name);
  std::vector<int64_t> shape = constant_shape(desc, where);
  int id = new_tensor(name, desc, TensorRole::Constant, where);
  tensors_[id].data = LazyHostTensor::deferred(
      [make = std::move(make), desc, shape, where] { return conform(make(), desc, shape, where); });
  tensors_[id].source = std::move(source);
  return {id};
}

Tensor Graph::constant_random(const std::string& name, const TensorDesc& desc,
                              const std::string& dist, double a, double b, uint64_t seed) {
  std::string where = fmt::format("constant '{}'.init", name);
  KILN_CHECK(dist == "normal" || dist == "uniform",
             "{}: expected 'normal' or 'uniform', found '{}'", where, dist);
  KILN_CHECK(shape_is_static(desc.shape), "{}: constants need a static shape", where);
  if (dist == "normal")
    KILN_CHECK(b >= 0, "{}: std must be >= 0, found {}", where, b);
  else
    KILN_CHECK(a <= b, "{}: low {} is greater than high {}", where, a, b);
  ConstantSource src;
  src.kind = ConstantSource::Kind::Init;
  src.dist = dist;
  src.a = a;
  src.b = b;
  src.seed = seed;
  // Made in its dtype, value by value: no f64 copy of a large constant.
  auto make = [desc, where, normal = dist == "normal", a, b, seed] {
    std::vector<int64_t> shape = eval_shape(desc.shape, {});
    int64_t n = 1;
    for (int64_t d : shape)
      KILN_CHECK(checked_mul(n, d, &n), "{}: {} elements overflow 64 bits", where,
                 shape_str(desc.shape));
    const size_t es = dtype_size(desc.dtype);
    check_host_bytes(fmt::format("{} ({})", where, desc.str()),
                     static_cast<uint64_t>(n) * es);  // n <= 2^48 (the shape is bounded)
    HostTensor t = HostTensor::zeros(desc.dtype, shape);
    Rng rng(seed);
    std::byte* p = t.data.data();
    for (int64_t i = 0; i < n; ++i)
      store_element(desc.dtype, p + static_cast<size_t>(i) * es,
                    normal ? a + b * rng.normal() : a + (b - a) * rng.uniform());
    return t;
  };
  return constant_deferred(name, desc, std::move(make), src);
}

void Graph::output(Tensor t) {
  KILN_CHECK(t.id >= 0 && t.id < static_cast<int>(tensors_.size()),
             "output: not a tensor of graph '{}'", name_);
  KILN_CHECK(std::find(outputs_.begin(), outputs_.end(), t.id) == outputs_.end(),
             "output: tensor '{}' is listed twice", tensors_[t.id].name);
  outputs_.push_back(t.id);
}

std::vector<Tensor> Graph::add_node(const std::string& op, const std::vector<Tensor>& inputs,
                                    const Attrs& attrs, const std::string& name,
                                    const std::vector<std::string>& output_names,
                                    const std::string& where_in) {
  std::string node_name = name.empty() ? unique_name(op) : name;
  std::string where = where_in.empty() ? fmt::format("node '{}' ({})", node_name, op) : where_in;
  const OpInfo* info = find_op(op);
  KILN_CHECK(info != nullptr, "{}: unknown op '{}' (known ops: {})", where, op, all_op_names());
  int n_in = static_cast<int>(inputs.size());
  KILN_CHECK(n_in >= info->min_inputs && n_in <= info->max_inputs,
             "{}: op {} takes {} input{}, found {}", where, op,
             info->min_inputs == info->max_inputs
                 ? std::to_string(info->min_inputs)
                 : fmt::format("{} to {}", info->min_inputs, info->max_inputs),
             info->max_inputs == 1 ? "" : "s", n_in);
  std::vector<const TensorInfo*> in;
  for (int i = 0; i < n_in; ++i) {
    KILN_CHECK(inputs[i].id >= 0 && inputs[i].id < static_cast<int>(tensors_.size()),
               "{}: input {} is not a tensor of this graph", where, i);
    in.push_back(&tensors_[inputs[i].id]);
  }
  Node node;
  node.op = info->kind;
  node.name = node_name;
  for (Tensor t : inputs) node.inputs.push_back(t.id);
  node.attrs = normalize_attrs(*info, attrs, where);
  check_operand_dtypes(*info, InferArgs{where, in, node});
  std::vector<TensorDesc> outs = info->infer(InferArgs{where, in, node});
  KILN_CHECK(output_names.empty() || output_names.size() == outs.size(),
             "{}.outputs: op {} has {} output{}, found {} output names", where, op, outs.size(),
             outs.size() == 1 ? "" : "s", output_names.size());
  std::vector<Tensor> result;
  for (size_t i = 0; i < outs.size(); ++i) {
    std::string tname = output_names.empty()
                            ? (outs.size() == 1 ? node_name : fmt::format("{}:{}", node_name, i))
                            : output_names[i];
    if (output_names.empty() && by_name_.count(tname)) tname = unique_name(tname);
    int id = new_tensor(tname, outs[i], TensorRole::Intermediate, where + ".outputs");
    tensors_[id].producer = static_cast<int>(nodes_.size());
    node.outputs.push_back(id);
    result.push_back({id});
  }
  nodes_.push_back(std::move(node));
  return result;
}

Tensor Graph::add_node1(const std::string& op, const std::vector<Tensor>& inputs,
                        const Attrs& attrs, const std::string& name) {
  return add_node(op, inputs, attrs, name).at(0);
}

namespace {
std::vector<Tensor> with_optional(std::vector<Tensor> v, std::initializer_list<Tensor> opt) {
  for (Tensor t : opt) {
    if (!t.valid()) break;
    v.push_back(t);
  }
  return v;
}
}  // namespace

Tensor Graph::conv2d(Tensor x, Tensor w, Tensor bias, const Conv2dOptions& o) {
  return add_node1("conv2d", with_optional({x, w}, {bias}),
                   {{"stride", std::vector<int64_t>{o.stride[0], o.stride[1]}},
                    {"padding", o.padding},
                    {"dilation", std::vector<int64_t>{o.dilation[0], o.dilation[1]}},
                    {"groups", o.groups}});
}

Tensor Graph::matmul(Tensor a, Tensor b, Tensor bias, bool ta, bool tb) {
  return add_node1("matmul", with_optional({a, b}, {bias}),
                   {{"transpose_a", int64_t{ta}}, {"transpose_b", int64_t{tb}}});
}

Tensor Graph::gelu(Tensor x, GeluApprox approx) {
  return add_node1("gelu", {x},
                   {{"approximate", std::string(approx == GeluApprox::Tanh ? "tanh" : "none")}});
}
Tensor Graph::leaky_relu(Tensor x, double alpha) {
  return add_node1("leaky_relu", {x}, {{"alpha", alpha}});
}
Tensor Graph::clamp(Tensor x, double lo, double hi) {
  return add_node1("clamp", {x}, {{"min", lo}, {"max", hi}});
}
Tensor Graph::cast(Tensor x, DType dtype) {
  return add_node1("cast", {x}, {{"dtype", std::string(dtype_name(dtype))}});
}
Tensor Graph::where(Tensor cond, Tensor x, Tensor y) {
  return add_node1("where", {cond, x, y});
}
Tensor Graph::batchnorm(Tensor x, Tensor scale, Tensor bias, Tensor mean, Tensor var, double eps) {
  return add_node1("batchnorm", {x, scale, bias, mean, var}, {{"eps", eps}});
}
Tensor Graph::layernorm(Tensor x, Tensor scale, Tensor bias, int64_t axis, double eps) {
  return add_node1("layernorm", with_optional({x}, {scale, bias}), {{"axis", axis}, {"eps", eps}});
}
Tensor Graph::rmsnorm(Tensor x, Tensor scale, int64_t axis, double eps) {
  return add_node1("rmsnorm", with_optional({x}, {scale}), {{"axis", axis}, {"eps", eps}});
}
Tensor Graph::groupnorm(Tensor x, int64_t groups, Tensor scale, Tensor bias, double eps) {
  return add_node1("groupnorm", with_optional({x}, {scale, bias}),
                   {{"groups", groups}, {"eps", eps}});
}
Tensor Graph::instancenorm(Tensor x, Tensor scale, Tensor bias, double eps) {
  return add_node1("instancenorm", with_optional({x}, {scale, bias}), {{"eps", eps}});
}
Tensor Graph::softmax(Tensor x, int64_t axis) {
  return add_node1("softmax", {x}, {{"axis", axis}});
}
Tensor Graph::reduce(const std::string& op, Tensor x, std::vector<int64_t> axes, bool keepdims) {
  return add_node1(op, {x}, {{"axes", std::move(axes)}, {"keepdims", int64_t{keepdims}}});
}
Tensor Graph::maxpool2d(Tensor x, const Pool2dOptions& o) {
  Attrs a{{"kernel", std::vector<int64_t>{o.kernel[0], o.kernel[1]}}, {"padding", o.padding}};
  if (o.stride[0] > 0) a["stride"] = std::vector<int64_t>{o.stride[0], o.stride[1]};
  return add_node1("maxpool2d", {x}, a);
}
Tensor Graph::avgpool2d(Tensor x, const Pool2dOptions& o) {
  Attrs a{{"kernel", std::vector<int64_t>{o.kernel[0], o.kernel[1]}}, {"padding", o.padding}};
  if (o.stride[0] > 0) a["stride"] = std::vector<int64_t>{o.stride[0], o.stride[1]};
  return add_node1("avgpool2d", {x}, a);
}
Tensor Graph::global_avgpool(Tensor x) {
  return add_node1("global_avgpool", {x});
}
Tensor Graph::reshape(Tensor x, std::vector<Dim> shape) {
  return add_node1("reshape", {x}, {{"shape", std::move(shape)}});
}
Tensor Graph::transpose(Tensor x, std::vector<int64_t> perm) {
  return add_node1("transpose", {x}, {{"perm", std::move(perm)}});
}
Tensor Graph::pad(Tensor x, std::vector<int64_t> pads, double value) {
  return add_node1("pad", {x}, {{"pads", std::move(pads)}, {"value", value}});
}
Tensor Graph::concat(const std::vector<Tensor>& xs, int64_t axis) {
  return add_node1("concat", xs, {{"axis", axis}});
}
std::vector<Tensor> Graph::split(Tensor x, int64_t axis, std::vector<int64_t> sizes) {
  return add_node("split", {x}, {{"axis", axis}, {"split", std::move(sizes)}});
}
Tensor Graph::slice(Tensor x, std::vector<int64_t> starts, std::vector<int64_t> ends,
                    std::vector<int64_t> axes, std::vector<int64_t> steps) {
  return add_node1("slice", {x},
                   {{"starts", std::move(starts)},
                    {"ends", std::move(ends)},
                    {"axes", std::move(axes)},
                    {"steps", std::move(steps)}});
}
Tensor Graph::expand(Tensor x, std::vector<Dim> shape) {
  return add_node1("expand", {x}, {{"shape", std::move(shape)}});
}
Tensor Graph::tile(Tensor x, std::vector<int64_t> repeats) {
  return add_node1("tile", {x}, {{"repeats", std::move(repeats)}});
}
Tensor Graph::depth_to_space(Tensor x, int64_t blocksize, const std::string& mode) {
  return add_node1("depth_to_space", {x}, {{"blocksize", blocksize}, {"mode", mode}});
}
Tensor Graph::space_to_depth(Tensor x, int64_t blocksize) {
  return add_node1("space_to_depth", {x}, {{"blocksize", blocksize}});
}
Tensor Graph::trilu(Tensor x, bool upper, int64_t k) {
  return add_node1("trilu", {x}, {{"upper", int64_t{upper}}, {"k", k}});
}
Tensor Graph::resize(Tensor x, std::vector<double> scales, const std::string& mode,
                     const std::string& coord, const std::string& nearest) {
  return add_node1("resize", {x},
                   {{"scales", std::move(scales)},
                    {"mode", mode},
                    {"coordinate_transformation_mode", coord},
                    {"nearest_mode", nearest}});
}
Tensor Graph::resize_to(Tensor x, std::vector<Dim> sizes, const std::string& mode,
                        const std::string& coord, const std::string& nearest) {
  return add_node1("resize", {x},
                   {{"sizes", std::move(sizes)},
                    {"mode", mode},
                    {"coordinate_transformation_mode", coord},
                    {"nearest_mode", nearest}});
}
Tensor Graph::gather(Tensor data, Tensor indices, int64_t axis) {
  return add_node1("gather", {data, indices}, {{"axis", axis}});
}
Tensor Graph::gather_elements(Tensor data, Tensor indices, int64_t axis) {
  return add_node1("gather_elements", {data, indices}, {{"axis", axis}});
}
Tensor Graph::attention_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q,
                               Tensor cu_seqlens_k, const AttentionVarlenOptions& o) {
  return add_node1("attention_varlen", {q, k, v, cu_seqlens_q, cu_seqlens_k},
                   {{"scale", o.scale},
                    {"causal", int64_t{o.causal ? 1 : 0}},
                    {"window_left", o.window_left},
                    {"window_right", o.window_right}});
}

int Graph::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

std::vector<std::string> Graph::symbols() const {
  std::vector<std::string> s;
  for (const TensorInfo& t : tensors_)
    for (const Dim& d : t.desc.shape) d.symbols(&s);
  std::sort(s.begin(), s.end());
  return s;
}

namespace {
std::string bindings_text(const Bindings& b) {
  std::string s;
  for (const auto& [k, v] : b) s += fmt::format("{}{}={}", s.empty() ? "" : ", ", k, v);
  return s.empty() ? "static shapes" : s;
}
}  // namespace

Bindings Graph::bind(const std::map<std::string, std::vector<int64_t>>& input_shapes,
                     const Bindings& extra) const {
  Bindings b;
  std::map<std::string, std::string> bound_by;
  for (const auto& [sym, v] : extra) {
    KILN_CHECK(v > 0, "symbol '{}': expected a positive size, found {}", sym, v);
    b[sym] = v;
    bound_by[sym] = "--shape";
  }
  for (int id : inputs_) {
    const TensorInfo& t = tensors_[id];
    auto it = input_shapes.find(t.name);
    if (it == input_shapes.end()) continue;
    const std::vector<int64_t>& s = it->second;
    KILN_CHECK(s.size() == t.desc.shape.size(),
               "input '{}': expected rank {} ({}), found shape of rank {}", t.name,
               t.desc.shape.size(), shape_str(t.desc.shape), s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      const Dim& d = t.desc.shape[i];
      if (!d.is_symbol()) continue;
      auto [bit, fresh] = b.emplace(d.symbol(), s[i]);
      if (fresh) {
        bound_by[d.symbol()] = fmt::format("input '{}' dim {}", t.name, i);
      } else {
        KILN_CHECK(bit->second == s[i],
                   "symbol '{}' is bound to {} by {} and to {} by input '{}' dim {}", d.symbol(),
                   bit->second, bound_by[d.symbol()], s[i], t.name, i);
      }
    }
  }
  for (const std::string& sym : symbols())
    KILN_CHECK(b.count(sym), "symbol '{}' is not bound: give an input that has it or --shape {}=V",
               sym, sym);
  for (int id : inputs_) {
    const TensorInfo& t = tensors_[id];
    auto it = input_shapes.find(t.name);
    if (it == input_shapes.end()) continue;
    for (size_t i = 0; i < it->second.size(); ++i) {
      int64_t want = t.desc.shape[i].eval(b);
      KILN_CHECK(want == it->second[i], "input '{}' dim {}: expected {} ({}), found {}", t.name, i,
                 want, t.desc.shape[i].str(), it->second[i]);
    }
  }
  // Derived dims (conv outputs) must stay positive for these sizes, and every tensor's size fit
  // 64 bits, so that no later size arithmetic wraps.
  for (const TensorInfo& t : tensors_) {
    int64_t bytes = static_cast<int64_t>(dtype_size(t.desc.dtype));
    for (size_t i = 0; i < t.desc.shape.size(); ++i) {
      int64_t v = 0;
      try {
        v = t.desc.shape[i].eval(b);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::User) throw;
        KILN_FAIL("tensor '{}' ({}) dim {}: {}", t.name, t.desc.str(), i, e.what());
      }
      KILN_CHECK(v > 0, "tensor '{}' dim {} ({}) is {} for these shapes", t.name, i,
                 t.desc.shape[i].str(), v);
      KILN_CHECK(checked_mul(bytes, v, &bytes),
                 "tensor '{}' ({}) would be more than 2^63 bytes with {}", t.name, t.desc.str(),
                 bindings_text(b));
    }
  }
  return b;
}

void Graph::prune() {
  std::vector<bool> live_t(tensors_.size(), false), live_n(nodes_.size(), false);
  std::vector<int> stack(outputs_.begin(), outputs_.end());
  for (int id : inputs_) live_t[id] = true;
  while (!stack.empty()) {
    int t = stack.back();
    stack.pop_back();
    if (live_t[t] && tensors_[t].role != TensorRole::Input) continue;
    live_t[t] = true;
    int p = tensors_[t].producer;
    if (p >= 0 && !live_n[p]) {
      live_n[p] = true;
      for (int i : nodes_[p].inputs) stack.push_back(i);
      for (int o : nodes_[p].outputs) live_t[o] = true;
    }
  }
  std::vector<int> remap(tensors_.size(), -1);
  std::vector<TensorInfo> nt;
  for (size_t i = 0; i < tensors_.size(); ++i)
    if (live_t[i]) {
      remap[i] = static_cast<int>(nt.size());
      nt.push_back(std::move(tensors_[i]));
    }
  std::vector<Node> nn;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!live_n[i]) continue;
    Node n = std::move(nodes_[i]);
    for (int& t : n.inputs) t = remap[t];
    for (int& t : n.outputs) {
      t = remap[t];
      nt[t].producer = static_cast<int>(nn.size());
    }
    nn.push_back(std::move(n));
  }
  for (TensorInfo& t : nt)
    if (t.view_of >= 0) t.view_of = remap[t.view_of];
  for (int& t : inputs_) t = remap[t];
  for (int& t : outputs_) t = remap[t];
  tensors_ = std::move(nt);
  nodes_ = std::move(nn);
  by_name_.clear();
  for (size_t i = 0; i < tensors_.size(); ++i) by_name_[tensors_[i].name] = static_cast<int>(i);
}

}  // namespace kiln
