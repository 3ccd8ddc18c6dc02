// Pointwise expressions for generated kernels: f32 math of elementwise nodes (the op table's
// `cuda` and `fast16` columns), operand indexing with broadcasting, storage load/store, and
// symbolic dims passed as kernel parameters.
//
// Used by every emitter with pointwise prologues/epilogues (codegen/emit_*.cpp), including the
// contraction epilogue. Typical use for one output element whose logical coordinates are in the
// variables c0..c{r-1}:
//
//   DimParams dp;
//   PointwiseEmitter pe{graph};
//   pe.values[anchor_out] = "acc";          // a value the kernel already holds (f32)
//   pe.load = [&](Writer& w, int node, int slot) {
//     int t = graph.nodes()[node].inputs[slot];
//     auto map = operand_dim_map(graph, graph.nodes()[node], slot, iter_shape);
//     return load_f32(fmt::format("{} + {}", tensor_param(t),
//                                 operand_offset(graph.tensor(t).desc, map, coords, dp)));
//   };
//   pe.emit(w, epilogue_nodes);            // "float v12 = kiln_gelu_erf(acc);" ...
//   w.line("{};", store_f32(out_ptr_plus_offset, pe.values.at(out_tensor)));
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "codegen/writer.hpp"
#include "kiln/graph.hpp"

namespace kiln {

// ---- storage types (codegen/device/kiln_prelude.cuh defines them)
// "float", "kiln_f16", "kiln_bf16", "int", "long long", "kiln_bool".
const char* storage_type(DType t);
// Elements per 16-byte vector: 4 (f32) or 8 (f16/bf16); 0 for integer and bool tensors, which
// are read and written element by element.
int vec_elems(DType t);
// Expression loading one element at `ptr` (an expression of type const T*): "kiln_ld(p + i)".
// f32 for the floating types; integer and bool elements load as their own C type (int, long
// long, bool: value_ctype), the prelude's kiln_ld overloads.
std::string load_f32(const std::string& ptr);
// Statement text (no ';') storing f32 `value` to `ptr` (T*), rounding to T: "kiln_st(p + i, v)".
std::string store_f32(const std::string& ptr, const std::string& value);
// A C identifier made from any text ("conv1.out" -> "conv1_out"), never empty, never a leading
// digit.
std::string ident(const std::string& text);
// Kernel parameter name for graph tensor `t` ("t12").
std::string tensor_param(int t);

// ---- symbolic dims as kernel parameters
// Static dims become integer literals; each distinct symbolic dim (a symbol or a derived
// expression) becomes one `long long` kernel parameter, evaluated at launch from the bindings.
class DimParams {
 public:
  explicit DimParams(std::string prefix = "d") : prefix_(std::move(prefix)) {}
  // C++ expression for `d`: "64" (or "5000000000LL") when static, else the parameter's name.
  std::string ref(const Dim& d);
  // The registered parameters in order: (name, dim).
  const std::vector<std::pair<std::string, Dim>>& params() const { return params_; }
  // Appends ", long long d0, long long d1" style text for the kernel signature.
  std::string signature() const;
  // Appends one KernelArg(Int) per parameter, in order.
  void append_args(std::vector<KernelArg>* args) const;

 private:
  std::string prefix_;
  std::vector<std::pair<std::string, Dim>> params_;
};

// ---- indexing
// Element strides of a tensor as dims (NCHW: row-major; NHWC: dim 1 innermost; Strided: its
// explicit strides).
Shape tensor_strides(const TensorDesc& d);
// The strides a kernel walking `d` element by element decomposes its linear index with: the
// tensor's own where they are dense memory; for a strided view (a concat input in its place:
// engine/passes/concat_views.cpp) the dense strides of its dims in the same memory order, the
// element then stored through its own strides.
Shape iteration_strides(const TensorDesc& d);
// For operand `slot` of pointwise node `n` evaluated over an iteration space of logical shape
// `iter`: for each iteration dim, the operand dim it indexes, or -1 when the operand is broadcast
// along it. Numpy right-alignment for elementwise ops; the per-channel operands of an op with
// OpInfo::channel_operands (batchnorm's scale/bias/mean/var) index iteration dim 1.
std::vector<int> operand_dim_map(const Graph& g, const Node& n, int slot, const Shape& iter);
// The same for a tensor that simply broadcasts (numpy) against `iter`.
std::vector<int> broadcast_dim_map(const Shape& operand, const Shape& iter);
// Element offset expression of a tensor (desc `d`) for the iteration coordinates `coords` (one
// expression per iteration dim), dims chosen by `map`. "0" when fully broadcast.
std::string operand_offset(const TensorDesc& d, const std::vector<int>& map,
                           const std::vector<std::string>& coords, DimParams& dp);

// ---- math
// True for nodes that codegen evaluates elementwise inside a pointwise chain: the op table's
// FusionRole::Elementwise (pointwise ops, inference batchnorm).
bool is_elementwise(const Graph& g, const Node& n);
// f32 CUDA expression of one elementwise node over operand expressions (in input order): the op
// table's `cuda` column, or its `fast16` one for a 16-bit result.
std::string pointwise_node_expr(const Graph& g, const Node& n,
                                const std::vector<std::string>& operands);

// Emits a DAG of elementwise nodes for one element: "float v<tensor><suffix> = <expr>;" per node.
// Operands come from `values` (tensor id -> f32 expression) or, for tensors not yet there, from
// `load` (which may write statements, e.g. a load into a variable, and returns an f32 expression).
// Each node's output is recorded in `values`.
struct PointwiseEmitter {
  const Graph& graph;
  std::function<std::string(Writer& w, int node, int slot)> load;
  std::map<int, std::string> values;
  std::string suffix;  // appended to variable names (vector lanes: "_0", "_1", ...)
  // The element's iteration coordinates: index-source nodes (OpInfo::index_source, rank 1)
  // read coordinate 0 as their operand. Empty where no such node can be.
  std::vector<std::string> coords = {};

  void emit(Writer& w, const std::vector<int>& nodes);
};

// ---- group kernels (the non-contraction emitters share these)
// The parameters of a group's kernel: every group input (const T* __restrict__), then every group
// output (T* __restrict__), then the symbolic dims registered in `dims` while emitting the body,
// then the trailing parameters (a workspace, counters) in the order added.
struct GroupParams {
  const Graph& graph;
  const FusionGroup& group;
  DimParams dims;

  GroupParams(const Graph& g, const FusionGroup& grp) : graph(g), group(grp) {}
  // A parameter after the dims: `decl` in the list ("float* __restrict__ kc_ws"), `arg` its value.
  void add_trailing(std::string decl, KernelArg arg);
  std::string signature() const;  // "const kiln_f16* __restrict__ t3, float* __restrict__ t9, ..."
  std::vector<KernelArg> args() const;

 private:
  std::vector<std::pair<std::string, KernelArg>> trailing_;
};
// Each group input read once plus each output written once, in bytes.
Dim group_bytes_moved(const Graph& g, const FusionGroup& grp);
// Rough flop count: one per elementwise node and element, five per anchor element.
Dim group_flops(const Graph& g, const FusionGroup& grp);
// "pointwise_f16_add_gelu" style kernel name from the group, with `detail` ("r4096") after the
// dtype when non-empty.
std::string group_kernel_name(const Graph& g, const FusionGroup& grp, const std::string& detail);

// Operand loads for a pointwise chain over the iteration space `iter`: tensors whose shape and
// strides equal `dense` strides are read at the linear index `lin`; others at the offset given by
// the coordinates. Each (tensor, indexing) is loaded once per lane into a variable.
struct ElementLoader {
  const Graph& graph;
  Shape iter;
  Shape dense;                      // strides of the dense (linear-indexed) layout
  std::string lin;                  // linear index expression (in the dense layout)
  std::vector<std::string> coords;  // per iteration dim
  DimParams* dims = nullptr;
  std::string suffix;
  std::map<std::string, std::string> cache;
  // Gather nodes fused into the group (a row norm's embedding lookup): their results are read
  // through the gather, the index loaded and checked where an element is needed; `gather_errors`
  // names each one's error word parameter (codegen/gather_source.hpp).
  std::vector<int> gathers = {};
  std::vector<std::string> gather_errors = {};

  bool is_dense(int tensor) const;
  // Offset of a tensor of shape `iter` (or broadcasting to it) for this element.
  std::string offset(int tensor, const std::vector<int>& map);
  std::string load(Writer& w, int node, int slot);
  // Binds into a PointwiseEmitter.
  std::function<std::string(Writer&, int, int)> fn() {
    return [this](Writer& w, int n, int s) { return load(w, n, s); };
  }
};
// Coordinate expressions of linear index `lin` decomposed over `shape` with the given element
// strides (the dims' memory order); static dims give constant div/mod.
std::vector<std::string> decompose(const std::string& lin, const Shape& shape, const Shape& strides,
                                   DimParams& dp);
// How a group kernel is declared and launched, apart from its parameters and body.
struct GroupKernel {
  std::string name;     // the kernel's name and entry
  std::string heading;  // comment lines above the declaration, each ending in a newline
  std::string device;   // device helpers after the prelude (a codegen/device file), or empty
  int threads = 256;    // per CTA: the block and the launch bounds
  int min_blocks = 0;   // the launch bounds' CTAs per SM (0: left out)
  int cluster = 0;      // __cluster_dims__ (0: no cluster)
  Dim grid;             // CTAs, one-dimensional
};
// The group kernel over `body` (a Writer's text at depth 0, emitted first so that it registers
// the dims it uses): the prelude, k.device, k.heading, then the declaration with gp's parameter
// list (kernel_assembly.hpp); args, launch geometry, bytes and flops filled in.
KernelSpec group_kernel_spec(const GroupKernel& k, const GroupParams& gp, const std::string& body);
// Row-major element strides of a shape.
Shape row_major_strides(const Shape& shape);

}  // namespace kiln
