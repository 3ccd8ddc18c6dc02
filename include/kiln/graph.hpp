// The op graph: tensors, nodes, constants, and the builder API that checks and infers shapes as
// nodes are added.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kiln/host_tensor.hpp"
#include "kiln/op_list.hpp"
#include "kiln/types.hpp"

namespace kiln {

// Attribute values as they appear in graph files. Floats accept integers; "dtype" attributes are
// strings; reshape's shape is a list of dims (ints, -1, or symbols); resize's scales are a list
// of numbers.
using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<Dim>,
                               std::vector<double>>;
using Attrs = std::map<std::string, AttrValue>;

// A handle to a tensor of one graph (an index into Graph::tensors()).
struct Tensor {
  int id = -1;
  bool valid() const { return id >= 0; }
  friend bool operator==(Tensor a, Tensor b) { return a.id == b.id; }
};

// Where a constant's data came from, kept so that saving a graph writes the same source back.
struct ConstantSource {
  enum class Kind { Data, File, Init } kind = Kind::Data;
  std::string file;  // as written in the graph file (relative to it)
  std::string key;   // safetensors key; empty = the tensor's name
  // Init: "normal" (a = mean, b = std) or "uniform" (a = low, b = high), seeded.
  std::string dist;
  double a = 0.0, b = 1.0;
  uint64_t seed = 0;
};

enum class TensorRole { Input, Constant, Intermediate };

struct TensorInfo {
  std::string name;
  TensorDesc desc;
  TensorRole role = TensorRole::Intermediate;
  int producer = -1;  // node index for intermediates
  // Set by the Engine's view passes (engine/passes/fold_views.cpp, concat_views.cpp): this
  // tensor lives in the memory of tensor `view_of` (a reshape, transpose, slice, expand or concat
  // input: no copy; desc says how it is laid out there), starting `view_offset` elements into it
  // (a slice's start, a concat input's place; symbolic where a batch dim precedes it). Views are
  // made by passes only, never read from or written to graph files.
  int view_of = -1;
  Dim view_offset{0};
  // Constants only: logical row-major data in desc.dtype (made on first use for `init` and `file`
  // constants of a graph file), and where it came from.
  LazyHostTensor data;
  ConstantSource source;
};

struct Node {
  OpKind op;
  std::string name;  // user-given or generated; used in messages and kernel names
  std::vector<int> inputs;
  std::vector<int> outputs;
  Attrs attrs;  // every attribute of the op, defaults filled in

  int64_t attr_int(const std::string& k) const;
  double attr_float(const std::string& k) const;
  const std::string& attr_str(const std::string& k) const;
  const std::vector<int64_t>& attr_ints(const std::string& k) const;
  const std::vector<Dim>& attr_dims(const std::string& k) const;
  const std::vector<double>& attr_floats(const std::string& k) const;
};

struct Conv2dOptions {
  std::array<int64_t, 2> stride{1, 1};
  std::vector<int64_t> padding{0, 0};  // [ph, pw] or [top, left, bottom, right]
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
};

struct Pool2dOptions {
  std::array<int64_t, 2> kernel{2, 2};
  std::array<int64_t, 2> stride{0, 0};  // 0 = the kernel size
  std::vector<int64_t> padding{0, 0};
};

enum class GeluApprox { None, Tanh };

// attention_varlen's attributes (docs/graph_format.md): scale 0 is 1 / sqrt(head_dim); causal and
// the window bound the visible keys around the bottom-right aligned diagonal, -1 = unbounded.
struct AttentionVarlenOptions {
  double scale = 0.0;
  bool causal = false;
  int64_t window_left = -1, window_right = -1;
};

class Graph {
 public:
  explicit Graph(std::string name = "graph") : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  // ---- building ----
  Tensor input(const std::string& name, DType dtype, Shape shape, Layout layout = Layout::NCHW);
  Tensor input(const std::string& name, const TensorDesc& desc);
  // A constant with its data (logical shape must match desc.shape; data is converted to
  // desc.dtype).
  Tensor constant(const std::string& name, const TensorDesc& desc, HostTensor data,
                  ConstantSource source = {});
  // A constant filled with seeded random values (normal or uniform), made in its dtype when first
  // used (within the host memory budget, engine/base/memory_budget.hpp).
  Tensor constant_random(const std::string& name, const TensorDesc& desc, const std::string& dist,
                         double a, double b, uint64_t seed);
  // A constant whose data `make` returns when first used (it must have desc's logical shape; it is
  // converted to desc.dtype like constant()'s).
  Tensor constant_deferred(const std::string& name, const TensorDesc& desc,
                           std::function<HostTensor()> make, ConstantSource source = {});
  void output(Tensor t);

  // Adds a node of op `op` (its graph-file name). Checks arity, attributes and shapes; returns the
  // outputs. `where` prefixes every error message (the graph file passes "file: nodes[3] (conv1)").
  std::vector<Tensor> add_node(const std::string& op, const std::vector<Tensor>& inputs,
                               const Attrs& attrs = {}, const std::string& name = {},
                               const std::vector<std::string>& output_names = {},
                               const std::string& where = {});
  Tensor add_node1(const std::string& op, const std::vector<Tensor>& inputs,
                   const Attrs& attrs = {}, const std::string& name = {});

  Tensor conv2d(Tensor x, Tensor w, Tensor bias = {}, const Conv2dOptions& o = {});
  Tensor matmul(Tensor a, Tensor b, Tensor bias = {}, bool transpose_a = false,
                bool transpose_b = false);
#define KILN_X(E, n)                            \
  Tensor n(Tensor x, const Attrs& attrs = {}) { \
    return add_node1(#n, {x}, attrs);           \
  }
  KILN_UNARY_OPS(KILN_X)
#undef KILN_X
#define KILN_X(E, n)              \
  Tensor n(Tensor a, Tensor b) {  \
    return add_node1(#n, {a, b}); \
  }
  KILN_BINARY_OPS(KILN_X)
#undef KILN_X
  Tensor gelu(Tensor x, GeluApprox approx);
  Tensor leaky_relu(Tensor x, double alpha);
  Tensor clamp(Tensor x, double lo, double hi);
  Tensor cast(Tensor x, DType dtype);
  // cond ? x : y elementwise (cond bool; x and y of one dtype; all three broadcast).
  Tensor where(Tensor cond, Tensor x, Tensor y);
  Tensor batchnorm(Tensor x, Tensor scale, Tensor bias, Tensor mean, Tensor var, double eps = 1e-5);
  Tensor layernorm(Tensor x, Tensor scale = {}, Tensor bias = {}, int64_t axis = -1,
                   double eps = 1e-5);
  Tensor rmsnorm(Tensor x, Tensor scale = {}, int64_t axis = -1, double eps = 1e-6);
  Tensor groupnorm(Tensor x, int64_t groups, Tensor scale = {}, Tensor bias = {},
                   double eps = 1e-5);
  Tensor instancenorm(Tensor x, Tensor scale = {}, Tensor bias = {}, double eps = 1e-5);
  Tensor softmax(Tensor x, int64_t axis = -1);
  Tensor reduce(const std::string& op, Tensor x, std::vector<int64_t> axes, bool keepdims = false);
  Tensor maxpool2d(Tensor x, const Pool2dOptions& o);
  Tensor avgpool2d(Tensor x, const Pool2dOptions& o);
  Tensor global_avgpool(Tensor x);
  Tensor reshape(Tensor x, std::vector<Dim> shape);
  Tensor transpose(Tensor x, std::vector<int64_t> perm);
  // Pads every dim d with pads[d] elements before and pads[rank + d] after, filled with `value`
  // (pads = [before_0, ..., before_{r-1}, after_0, ..., after_{r-1}]); the layout is kept.
  Tensor pad(Tensor x, std::vector<int64_t> pads, double value = 0.0);
  // The movement ops of ONNX (docs/graph_format.md gives each one's attributes): concat along
  // `axis`, split into parts of `sizes`, slice (starts/ends/axes/steps as ONNX Slice), expand
  // (bidirectional broadcast to `shape`), tile, depth_to_space (mode "DCR" or "CRD"),
  // space_to_depth, trilu (the upper or lower triangle of the last two dims from diagonal k).
  Tensor concat(const std::vector<Tensor>& xs, int64_t axis);
  std::vector<Tensor> split(Tensor x, int64_t axis, std::vector<int64_t> sizes);
  Tensor slice(Tensor x, std::vector<int64_t> starts, std::vector<int64_t> ends,
               std::vector<int64_t> axes = {}, std::vector<int64_t> steps = {});
  Tensor expand(Tensor x, std::vector<Dim> shape);
  Tensor tile(Tensor x, std::vector<int64_t> repeats);
  Tensor depth_to_space(Tensor x, int64_t blocksize, const std::string& mode = "DCR");
  Tensor space_to_depth(Tensor x, int64_t blocksize);
  Tensor trilu(Tensor x, bool upper = true, int64_t k = 0);
  // resize (ONNX Resize) of the spatial dims (dim 2 on) of [N, C, spatial...] by `scales` (one
  // per dim, 1 for N and C; output dims floor(in * scale)) or to `sizes` (N and C as the input's);
  // mode "nearest" or "linear", coord one of half_pixel, pytorch_half_pixel, align_corners,
  // asymmetric; nearest rounding round_prefer_floor, round_prefer_ceil, floor or ceil.
  Tensor resize(Tensor x, std::vector<double> scales, const std::string& mode = "nearest",
                const std::string& coord = "half_pixel",
                const std::string& nearest = "round_prefer_floor");
  Tensor resize_to(Tensor x, std::vector<Dim> sizes, const std::string& mode = "nearest",
                   const std::string& coord = "half_pixel",
                   const std::string& nearest = "round_prefer_floor");
  // ONNX Gather: the slices of `data` along `axis` that `indices` (i32 or i64, any rank, negative
  // from the end) name; ONNX GatherElements: out[i] = data[i with i[axis] = indices[i]].
  Tensor gather(Tensor data, Tensor indices, int64_t axis = 0);
  Tensor gather_elements(Tensor data, Tensor indices, int64_t axis = 0);
  // Attention over a ragged batch packed along the token axis: q [Tq, Hq, D], k [Tk, Hkv, D],
  // v [Tk, Hkv, Dv], cu_seqlens_q / cu_seqlens_k [B + 1] i32 cumulative offsets (sequence b is
  // rows [cu[b], cu[b + 1])); out [Tq, Hq, Dv]. Query head h reads kv head h / (Hq / Hkv).
  Tensor attention_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k,
                          const AttentionVarlenOptions& o = {});

  // ---- inspection ----
  const std::vector<TensorInfo>& tensors() const {
    return tensors_;
  }
  const std::vector<Node>& nodes() const {
    return nodes_;
  }
  const std::vector<int>& inputs() const {
    return inputs_;
  }
  const std::vector<int>& outputs() const {
    return outputs_;
  }
  const TensorInfo& tensor(int id) const {
    return tensors_.at(id);
  }
  const TensorInfo& tensor(Tensor t) const {
    return tensors_.at(t.id);
  }
  const TensorDesc& desc(Tensor t) const {
    return tensors_.at(t.id).desc;
  }
  // Tensor id by name, or -1.
  int find(const std::string& name) const;
  // Every symbol used by any tensor shape, sorted.
  std::vector<std::string> symbols() const;
  // Binds every symbol from concrete input shapes (plus `extra`); a symbol seen with two sizes or
  // left unbound is a user error naming the input and dim.
  Bindings bind(const std::map<std::string, std::vector<int64_t>>& input_shapes,
                const Bindings& extra = {}) const;

  // ---- passes ----
  // Drops nodes, constants and inputs' uses not reachable from the outputs (inputs stay declared).
  void prune();
  // Mutable access for graph passes (engine/); callers keep the graph valid.
  std::vector<TensorInfo>& mutable_tensors() {
    return tensors_;
  }
  std::vector<Node>& mutable_nodes() {
    return nodes_;
  }

 private:
  int new_tensor(const std::string& name, const TensorDesc& desc, TensorRole role,
                 const std::string& where);
  std::string unique_name(const std::string& base);

  std::string name_;
  std::vector<TensorInfo> tensors_;
  std::vector<Node> nodes_;
  std::vector<int> inputs_;
  std::vector<int> outputs_;
  std::map<std::string, int> by_name_;
  int auto_id_ = 0;
};

// `g` with every symbolic dim (tensor shapes, reshape shapes) replaced by its value under `b`: a
// static graph computing the same thing for that binding (what EngineOptions::specialize_after
// compiles for a hot shape). Every symbol of `g` must be bound.
Graph specialize_graph(const Graph& g, const Bindings& b);

}  // namespace kiln
