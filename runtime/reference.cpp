// The CPU reference executor: binds symbols, evaluates nodes in order in f64 on logical row-major
// arrays, rounds every stored tensor to its dtype, frees intermediates after their last use.
// Pointwise ops, movement and reductions live here; the other kernels in reference_conv.cpp and
// reference_norm.cpp.
#include "kiln/reference.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <memory>

#include "engine/base/check.hpp"
#include "engine/base/half.hpp"
#include "engine/base/memory_budget.hpp"
#include "engine/base/thread_pool.hpp"
#include "engine/ir/op_table.hpp"
#include "runtime/reference_ops.hpp"

namespace kiln {
namespace ref {

namespace {

// One element's math on slots: in the integer domain (every value operand integer or bool)
// exact int64 math, else f64 math with integer / bool operands (where's condition) read as
// numbers; the result converted to the output dtype's slot (integers: toward zero, saturating,
// NaN to 0, i32 wrapping; bool x != 0; integer to floating: int_to_double).
struct SlotMath {
  RefFn fn;
  IntRefFn ifn;
  const double* p;
  bool int_domain;
  bool int_in[4];
  DType out;

  double operator()(const double* x, size_t k) const {
    if (int_domain) {
      int64_t xi[4];
      for (size_t j = 0; j < k; ++j) xi[j] = slot_int(x[j]);
      int64_t r = ifn(xi, p);
      return is_float(out) ? int_to_double(out, r) : int_slot(wrap_int(out, r));
    }
    double xd[4];
    for (size_t j = 0; j < k; ++j) xd[j] = int_in[j] ? static_cast<double>(slot_int(x[j])) : x[j];
    double r = fn(xd, p);
    return is_float(out) ? r : int_slot(float_to_int(out, r));
  }
};

}  // namespace

void pointwise(const NodeArgs& a) {
  const OpInfo& info = op_info(a.node.op);
  KILN_ASSERT(info.ref != nullptr, "{}: pointwise op without reference math", a.where);
  const std::vector<double> params = op_params(a.node);
  const size_t k = a.in.size();
  KILN_ASSERT(a.in_dtypes.size() == k, "{}: operand dtypes missing", a.where);
  SlotMath m{info.ref, info.iref,  params.data(), integer_domain(info, a.in_dtypes),
             {},       a.out_dtype};
  KILN_ASSERT(!m.int_domain || m.ifn, "{}: integer operands reached an op without integer math",
              a.where);
  for (size_t j = 0; j < k && j < 4; ++j) m.int_in[j] = !is_float(a.in_dtypes[j]);
  // The all-floating path keeps calling the row's math directly (no slot conversions).
  const bool plain =
      !m.int_domain && is_float(a.out_dtype) &&
      std::none_of(m.int_in, m.int_in + std::min<size_t>(k, 4), [](bool b) { return b; });
  const double* p = params.data();
  const RefFn rf = info.ref;
  auto fn = [&](const double* x, const double*) { return plain ? rf(x, p) : m(x, k); };
  KILN_ASSERT(k >= 1 && k <= 4, "{}: {} operands", a.where, k);
  const int64_t n = numel(a.out_shape);
  constexpr int64_t kGrain = 1 << 14;

  bool same = true;
  for (size_t j = 0; j < k; ++j) same &= numel(a.in_shapes[j]) == n;
  if (same) {  // every operand has the output's shape (up to leading 1s): flat indexing
    int64_t blocks = (n + kGrain - 1) / kGrain;
    parallel_for(blocks, a.threads, [&](int64_t b) {
      double x[4];
      int64_t e = std::min(n, (b + 1) * kGrain);
      for (int64_t i = b * kGrain; i < e; ++i) {
        for (size_t j = 0; j < k; ++j) x[j] = a.in[j][i];
        a.out[i] = fn(x, p);
      }
    });
    return;
  }

  // General broadcasting: rows along the last output dim, each row's operand offsets from its
  // multi-index over the leading dims.
  const Dims& os = a.out_shape;
  const size_t r = os.size();
  KILN_ASSERT(r >= 1, "{}: broadcasting a scalar output", a.where);
  std::vector<Dims> st(k);
  for (size_t j = 0; j < k; ++j) st[j] = broadcast_strides(a.in_shapes[j], os);
  const int64_t inner = os[r - 1];
  const int64_t rows = n / inner;
  const int64_t grain = std::max<int64_t>(1, kGrain / inner);
  parallel_for(
      rows, a.threads,
      [&](int64_t row) {
        int64_t off[4] = {0, 0, 0, 0};
        int64_t q = row;
        for (int d = static_cast<int>(r) - 2; d >= 0; --d) {
          int64_t idx = q % os[d];
          q /= os[d];
          for (size_t j = 0; j < k; ++j) off[j] += idx * st[j][d];
        }
        double x[4];
        double* o = a.out + row * inner;
        for (int64_t i = 0; i < inner; ++i) {
          for (size_t j = 0; j < k; ++j) x[j] = a.in[j][off[j] + i * st[j][r - 1]];
          o[i] = fn(x, p);
        }
      },
      grain);
}

void reshape(const NodeArgs& a) {
  int64_t n = numel(a.out_shape);
  KILN_ASSERT(n == numel(a.in_shapes[0]), "{}: reshape of {} elements to {}", a.where,
              numel(a.in_shapes[0]), n);
  std::copy(a.in[0], a.in[0] + n, a.out);
}

void transpose(const NodeArgs& a) {
  const Dims& is = a.in_shapes[0];
  const std::vector<int64_t>& perm = a.node.attr_ints("perm");
  const size_t r = is.size();
  Dims ist = row_major_strides(is);
  // Strides into the input for each output dim.
  Dims st(r);
  for (size_t i = 0; i < r; ++i) st[i] = ist[perm[i]];
  const Dims& os = a.out_shape;
  int64_t n = numel(os);
  if (r == 0) {
    a.out[0] = a.in[0][0];
    return;
  }
  int64_t inner = os[r - 1];
  int64_t rows = n / inner;
  parallel_for(
      rows, a.threads,
      [&](int64_t row) {
        int64_t off = 0, q = row;
        for (int d = static_cast<int>(r) - 2; d >= 0; --d) {
          off += (q % os[d]) * st[d];
          q /= os[d];
        }
        double* o = a.out + row * inner;
        for (int64_t i = 0; i < inner; ++i) o[i] = a.in[0][off + i * st[r - 1]];
      },
      std::max<int64_t>(1, 4096 / inner));
}

void pad(const NodeArgs& a) {
  const Dims& is = a.in_shapes[0];
  const Dims& os = a.out_shape;
  const std::vector<int64_t>& pads = a.node.attr_ints("pads");
  const size_t r = is.size();
  KILN_ASSERT(r >= 1 && pads.size() == 2 * r, "{}: pad of rank {} with {} pads", a.where, r,
              pads.size());
  const double value = a.node.attr_float("value");
  // An integer tensor pads with the value cast to its dtype (toward zero).
  std::fill(a.out, a.out + numel(os),
            is_float(a.out_dtype) ? value : int_slot(float_to_int(a.out_dtype, value)));
  // Each input row (the last dim) lands contiguously in the output, shifted by the befores.
  const Dims ost = row_major_strides(os);
  const int64_t inner = is[r - 1];
  const int64_t rows = numel(is) / inner;
  parallel_for(
      rows, a.threads,
      [&](int64_t row) {
        int64_t off = pads[r - 1], q = row;
        for (int d = static_cast<int>(r) - 2; d >= 0; --d) {
          off += (q % is[d] + pads[d]) * ost[d];
          q /= is[d];
        }
        std::copy(a.in[0] + row * inner, a.in[0] + (row + 1) * inner, a.out + off);
      },
      std::max<int64_t>(1, 4096 / inner));
}

void reduce(const NodeArgs& a) {
  const Dims& is = a.in_shapes[0];
  const int r = static_cast<int>(is.size());
  std::vector<bool> red(r, false);
  const std::vector<int64_t>& axes = a.node.attr_ints("axes");
  for (int64_t ax : axes) red[ax < 0 ? ax + r : ax] = true;
  if (axes.empty()) red.assign(r, true);
  // The output as the input's shape with reduced dims set to 1 (same element order as keepdims
  // or not): its strides, 0 along reduced dims.
  Dims kept(is);
  for (int d = 0; d < r; ++d)
    if (red[d]) kept[d] = 1;
  Dims ost = broadcast_strides(kept, is);
  for (int d = 0; d < r; ++d)
    if (red[d]) ost[d] = 0;
  const int64_t on = numel(kept), in_n = numel(is);
  KILN_ASSERT(on == numel(a.out_shape), "{}: reduction output size", a.where);
  const int64_t count = on > 0 ? in_n / on : 1;
  const OpKind op = a.node.op;
  const double init = op == OpKind::ReduceMax    ? -std::numeric_limits<double>::infinity()
                      : op == OpKind::ReduceMin  ? std::numeric_limits<double>::infinity()
                      : op == OpKind::ReduceProd ? 1.0
                                                 : 0.0;
  std::fill(a.out, a.out + on, init);
  Dims idx(r, 0);
  int64_t off = 0;
  const double* x = a.in[0];
  for (int64_t i = 0; i < in_n; ++i) {
    double v = x[i];
    double& o = a.out[off];
    if (op == OpKind::ReduceMax)
      o = (v > o || std::isnan(v)) ? v : o;
    else if (op == OpKind::ReduceMin)
      o = (v < o || std::isnan(v)) ? v : o;
    else if (op == OpKind::ReduceL2)
      o += v * v;
    else if (op == OpKind::ReduceProd)
      o *= v;
    else
      o += v;
    for (int d = r - 1; d >= 0; --d) {
      if (++idx[d] < is[d]) {
        off += ost[d];
        break;
      }
      off -= ost[d] * (is[d] - 1);
      idx[d] = 0;
    }
  }
  if (op == OpKind::ReduceMean)
    for (int64_t i = 0; i < on; ++i) a.out[i] /= static_cast<double>(count);
  if (op == OpKind::ReduceL2)
    for (int64_t i = 0; i < on; ++i) a.out[i] = std::sqrt(a.out[i]);
}

// Running sums along `axis`, from the front or (reverse) the back; exclusive leaves each element
// out of its own sum.
void cumsum(const NodeArgs& a) {
  const Dims& xs = a.in_shapes[0];
  const int r = static_cast<int>(xs.size());
  int64_t axis = a.node.attr_int("axis");
  if (axis < 0) axis += r;
  const bool exclusive = a.node.attr_int("exclusive") != 0;
  const bool reverse = a.node.attr_int("reverse") != 0;
  const int64_t D = xs[axis];
  const int64_t inner = span_numel(xs, axis + 1, xs.size());
  const int64_t lines = span_numel(xs, 0, axis) * inner;
  parallel_for(
      lines, a.threads,
      [&](int64_t t) {
        const int64_t base = (t / inner) * D * inner + t % inner;
        double acc = 0;
        for (int64_t k = 0; k < D; ++k) {
          const int64_t i = base + (reverse ? D - 1 - k : k) * inner;
          const double v = a.in[0][i];
          if (!exclusive) acc += v;
          a.out[i] = acc;
          if (exclusive) acc += v;
        }
      },
      std::max<int64_t>(1, 4096 / D));
}

}  // namespace ref

namespace {

using ref::Dims;

// Rounds values in place to what storing them in `t` keeps.
void round_all(std::vector<double>& v, DType t, int threads) {
  constexpr int64_t kGrain = 1 << 15;
  int64_t n = static_cast<int64_t>(v.size());
  parallel_for((n + kGrain - 1) / kGrain, threads, [&](int64_t b) {
    int64_t e = std::min(n, (b + 1) * kGrain);
    switch (t) {
      case DType::F32:
        for (int64_t i = b * kGrain; i < e; ++i) v[i] = static_cast<float>(v[i]);
        break;
      case DType::F16:
        for (int64_t i = b * kGrain; i < e; ++i)
          v[i] = f16_bits_to_f32(f32_to_f16_bits(static_cast<float>(v[i])));
        break;
      case DType::BF16:
        for (int64_t i = b * kGrain; i < e; ++i)
          v[i] = bf16_bits_to_f32(f32_to_bf16_bits(static_cast<float>(v[i])));
        break;
      case DType::I32:
      case DType::Bool:
        for (int64_t i = b * kGrain; i < e; ++i)
          v[i] = ref::int_slot(wrap_int(t, ref::slot_int(v[i])));
        break;
      case DType::I64:
        break;
    }
  });
}

// A caller's host tensor must describe memory it really has.
void check_storage(const HostTensor& t, const std::string& where) {
  KILN_CHECK(t.strides.size() == t.shape.size(),
             "{}: tensor has {} strides for rank {} (a malformed HostTensor)", where,
             t.strides.size(), t.shape.size());
  int64_t max_off = 0;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    KILN_CHECK(t.shape[i] > 0, "{}: dim {} is {}, expected a positive size", where, i, t.shape[i]);
    KILN_CHECK(t.strides[i] >= 0, "{}: stride {} is {}, expected >= 0", where, i, t.strides[i]);
    max_off += (t.shape[i] - 1) * t.strides[i];
  }
  int64_t need = (max_off + 1) * static_cast<int64_t>(dtype_size(t.dtype));
  KILN_CHECK(static_cast<int64_t>(t.data.size()) >= need,
             "{}: shape and strides reach {} bytes but the tensor holds {} bytes", where, need,
             t.data.size());
}

// A tensor's values as slots (ref::NodeArgs): f64, or exact integers for integer / bool dtypes.
std::vector<double> to_slots(const HostTensor& h) {
  if (is_float(h.dtype)) return h.to_f64();
  std::vector<int64_t> iv = h.to_i64();
  std::vector<double> v(iv.size());
  for (size_t i = 0; i < iv.size(); ++i) v[i] = ref::int_slot(iv[i]);
  return v;
}

HostTensor to_host(const TensorInfo& t, const Dims& shape, const std::vector<double>& v) {
  const bool ints = !is_float(t.desc.dtype);
  if (t.desc.layout != Layout::Strided) {
    if (!ints) return HostTensor::from_f64(t.desc.dtype, shape, v, t.desc.layout);
    std::vector<int64_t> iv(v.size());
    for (size_t i = 0; i < v.size(); ++i) iv[i] = ref::slot_int(v[i]);
    return HostTensor::from_i64(t.desc.dtype, shape, iv, t.desc.layout);
  }
  HostTensor h;
  h.dtype = t.desc.dtype;
  h.shape = shape;
  h.strides = t.desc.strides;
  int64_t max_off = 0;
  for (size_t i = 0; i < shape.size(); ++i) max_off += (shape[i] - 1) * h.strides[i];
  size_t es = dtype_size(h.dtype);
  h.data.assign(static_cast<size_t>(max_off + 1) * es, std::byte{0});
  Dims idx(shape.size(), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off += idx[d] * h.strides[d];
    std::byte* at = h.data.data() + off * static_cast<int64_t>(es);
    if (ints)
      store_int(h.dtype, at, ref::slot_int(v[i]));
    else
      store_element(h.dtype, at, v[i]);
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return h;
}

void run_node(const Node& node, const std::string& where, ref::NodeArgs& args) {
  const OpInfo& info = op_info(node.op);
  if (node.op == OpKind::Range) return ref::range(args);
  if (info.category == OpCategory::Pointwise) return ref::pointwise(args);
  switch (node.op) {
    case OpKind::Conv2d:
      return ref::conv2d(args);
    case OpKind::ConvTranspose2d:
      return ref::conv_transpose2d(args);
    case OpKind::ArgMax:
    case OpKind::ArgMin:
      return ref::arg_reduce(args);
    case OpKind::Matmul:
      return ref::matmul(args);
    case OpKind::Batchnorm:
      return ref::batchnorm(args);
    case OpKind::Layernorm:
    case OpKind::Rmsnorm:
      return ref::lastdims_norm(args);
    case OpKind::Groupnorm:
    case OpKind::Instancenorm:
      return ref::channel_norm(args);
    case OpKind::Softmax:
      return ref::softmax(args);
    case OpKind::ReduceSum:
    case OpKind::ReduceMean:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin:
    case OpKind::ReduceL2:
    case OpKind::ReduceProd:
      return ref::reduce(args);
    case OpKind::LogSoftmax:
      return ref::softmax(args);
    case OpKind::Cumsum:
      return ref::cumsum(args);
    case OpKind::Maxpool2d:
    case OpKind::Avgpool2d:
      return ref::pool2d(args);
    case OpKind::GlobalAvgpool:
      return ref::global_avgpool(args);
    case OpKind::Reshape:
      return ref::reshape(args);
    case OpKind::Transpose:
      return ref::transpose(args);
    case OpKind::Pad:
      return node.attr_str("mode") == "constant" ? ref::pad(args) : ref::pad_mirror(args);
    case OpKind::Concat:
      return ref::concat(args);
    case OpKind::Split:
      return ref::split(args);
    case OpKind::Slice:
      return ref::slice(args);
    case OpKind::Expand:
      return ref::expand(args);
    case OpKind::Tile:
      return ref::tile(args);
    case OpKind::DepthToSpace:
      return ref::depth_to_space(args);
    case OpKind::SpaceToDepth:
      return ref::space_to_depth(args);
    case OpKind::Trilu:
      return ref::trilu(args);
    case OpKind::Resize:
      return ref::resize(args);
    case OpKind::Gather:
      return ref::gather(args);
    case OpKind::GatherElements:
      return ref::gather_elements(args);
    case OpKind::AttentionVarlen:
      return ref::attention_varlen(args);
    default:
      break;
  }
  KILN_ASSERT(false, "{}: the CPU reference has no kernel for op {}", where, info.name);
}

}  // namespace

namespace {

// The f64 values the run holds at its peak (every input and constant when first read, each
// node's output until its last use, the outputs' host tensors at the end), checked against the
// host memory budget before anything is allocated, naming where the peak is and its largest
// tensor.
void check_reference_memory(const Graph& g, const std::vector<Dims>& concrete,
                            const std::vector<int>& last_use, const std::string& where) {
  const std::vector<TensorInfo>& tensors = g.tensors();
  // Sizes saturate instead of wrapping (bind bounds each tensor to 2^63 bytes of its dtype).
  auto sat_add = [](uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; };
  std::vector<uint64_t> bytes(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    uint64_t n = static_cast<uint64_t>(ref::numel(concrete[i]));
    bytes[i] = n > UINT64_MAX / sizeof(double) ? UINT64_MAX : n * sizeof(double);
  }
  std::vector<bool> live(tensors.size(), false);
  uint64_t now = 0, peak = 0;
  int peak_node = -1, peak_largest = -1;
  auto hold = [&](int id) {
    if (!live[id]) {
      live[id] = true;
      now = sat_add(now, bytes[id]);
    }
  };
  auto note_peak = [&](int node, const std::vector<int>& ids) {
    if (now <= peak) return;
    peak = now;
    peak_node = node;
    peak_largest = ids.empty() ? -1 : ids[0];
    for (int id : ids)
      if (bytes[id] > bytes[peak_largest]) peak_largest = id;
  };
  const std::vector<Node>& nodes = g.nodes();
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    std::vector<int> ids = nodes[i].inputs;
    ids.insert(ids.end(), nodes[i].outputs.begin(), nodes[i].outputs.end());
    for (int id : ids) hold(id);
    note_peak(i, ids);
    for (int id : ids)
      if (live[id] && last_use[id] <= i) {
        live[id] = false;
        now -= bytes[id];
      }
  }
  for (int id : g.outputs()) {
    hold(id);
    now = sat_add(now, bytes[id] / sizeof(double) * dtype_size(tensors[id].desc.dtype));
  }
  note_peak(-1, g.outputs());
  if (peak_largest < 0) return;
  const TensorInfo& t = tensors[peak_largest];
  std::string at = peak_node >= 0 ? fmt::format("node '{}' ({})", nodes[peak_node].name,
                                                op_name(nodes[peak_node].op))
                                  : std::string("the outputs");
  check_host_bytes(
      fmt::format("{}: f64 values at {}, the largest tensor '{}' {}[{}] ({})", where, at, t.name,
                  dtype_name(t.desc.dtype), fmt::join(concrete[peak_largest], ", "),
                  bytes_text(bytes[peak_largest])),
      peak);
}

}  // namespace

std::map<std::string, HostTensor> run_reference(const Graph& g,
                                                const std::map<std::string, HostTensor>& inputs,
                                                const ReferenceOptions& opts) {
  const std::string where = fmt::format("run_reference (graph '{}')", g.name());
  const int threads = resolve_threads(opts.threads);
  const std::vector<TensorInfo>& tensors = g.tensors();

  // ---- inputs: every one given, nothing else, declared dtype, sound storage
  auto input_list = [&] {
    std::string s;
    for (int id : g.inputs()) s += (s.empty() ? "" : ", ") + tensors[id].name;
    return s.empty() ? std::string("none") : s;
  };
  for (const auto& [name, t] : inputs) {
    int id = g.find(name);
    KILN_CHECK(id >= 0 && tensors[id].role == TensorRole::Input,
               "{}: '{}' is not an input of the graph (inputs: {})", where, name, input_list());
  }
  std::map<std::string, std::vector<int64_t>> shapes;
  for (int id : g.inputs()) {
    const TensorInfo& t = tensors[id];
    auto it = inputs.find(t.name);
    KILN_CHECK(it != inputs.end(), "{}: input '{}' ({}) was not given", where, t.name,
               t.desc.str());
    const HostTensor& h = it->second;
    std::string at = fmt::format("{}: input '{}'", where, t.name);
    KILN_CHECK(h.dtype == t.desc.dtype, "{}: expected dtype {} ({}), found {}", at,
               dtype_name(t.desc.dtype), t.desc.str(), dtype_name(h.dtype));
    check_storage(h, at);
    shapes[t.name] = h.shape;
  }
  const Bindings b = g.bind(shapes, opts.bindings);

  // ---- lifetimes: the last node reading each tensor; outputs live to the end
  const int n_nodes = static_cast<int>(g.nodes().size());
  std::vector<int> last_use(tensors.size(), -1);
  for (int i = 0; i < n_nodes; ++i)
    for (int id : g.nodes()[i].inputs) last_use[id] = i;
  for (int id : g.outputs()) last_use[id] = INT_MAX;

  std::vector<std::unique_ptr<std::vector<double>>> values(tensors.size());
  std::vector<Dims> concrete(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) concrete[i] = eval_shape(tensors[i].desc.shape, b);
  check_reference_memory(g, concrete, last_use, where);

  // Inputs and constants are converted when first needed.
  auto value_of = [&](int id) -> const std::vector<double>& {
    if (!values[id]) {
      const TensorInfo& t = tensors[id];
      if (t.role == TensorRole::Input) {
        values[id] = std::make_unique<std::vector<double>>(to_slots(inputs.at(t.name)));
      } else {
        KILN_ASSERT(t.role == TensorRole::Constant && t.data.has_value(),
                    "tensor '{}' is read before it is computed", t.name);
        values[id] = std::make_unique<std::vector<double>>(to_slots(*t.data));
      }
      KILN_ASSERT(static_cast<int64_t>(values[id]->size()) == ref::numel(concrete[id]),
                  "tensor '{}': {} values for shape of {} elements", t.name, values[id]->size(),
                  ref::numel(concrete[id]));
    }
    return *values[id];
  };

  for (int i = 0; i < n_nodes; ++i) {
    const Node& node = g.nodes()[i];
    const std::string node_where =
        fmt::format("{}: node '{}' ({})", where, node.name, op_name(node.op));
    KILN_ASSERT(!node.outputs.empty(), "{}: no outputs", node_where);
    std::vector<std::unique_ptr<std::vector<double>>> outs;
    for (int out_id : node.outputs)
      outs.push_back(std::make_unique<std::vector<double>>(
          static_cast<size_t>(ref::numel(concrete[out_id])), 0.0));
    const int out0 = node.outputs[0];
    ref::NodeArgs args{node, node_where, {}, {}, outs[0]->data(), concrete[out0], threads,
                       {},   DType::F32, {}, {}};
    args.out_dtype = tensors[out0].desc.dtype;
    for (size_t k = 0; k < outs.size(); ++k) {
      args.outs.push_back(outs[k]->data());
      args.out_shapes.push_back(concrete[node.outputs[k]]);
    }
    for (int id : node.inputs) {
      args.in.push_back(value_of(id).data());
      args.in_shapes.push_back(concrete[id]);
      args.in_dtypes.push_back(tensors[id].desc.dtype);
    }
    run_node(node, node_where, args);
    for (size_t k = 0; k < outs.size(); ++k) {
      const int out_id = node.outputs[k];
      round_all(*outs[k], tensors[out_id].desc.dtype, threads);
      values[out_id] = std::move(outs[k]);
      if (last_use[out_id] < 0) values[out_id].reset();  // dead: nothing reads it
    }
    for (int id : node.inputs)
      if (last_use[id] == i) values[id].reset();
  }

  std::map<std::string, HostTensor> result;
  for (int id : g.outputs())
    result[tensors[id].name] = to_host(tensors[id], concrete[id], value_of(id));
  return result;
}

}  // namespace kiln
