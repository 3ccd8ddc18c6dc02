// The op table: one row per op (engine/ir/op_table.cpp). Everything op-specific that the builder,
// the JSON loader, shape inference, the CPU reference and codegen need is looked up here.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln {

enum class AttrKind { Int, Float, Enum, Ints, Dims, Floats };

struct AttrSpec {
  const char* name;
  AttrKind kind;
  std::optional<AttrValue> def;   // nullopt: required
  const char* choices = nullptr;  // Enum: "a|b|c"
};

struct InferArgs {
  const std::string& where;                  // "file: nodes[3] (conv1)" for messages
  const std::vector<const TensorInfo*>& in;  // the node's inputs
  const Node& node;                          // op and normalized attributes
};
// Input i's desc and name, as every inference function reads them.
inline const TensorDesc& in(const InferArgs& a, size_t i) {
  return a.in[i]->desc;
}
inline const std::string& in_name(const InferArgs& a, size_t i) {
  return a.in[i]->name;
}

using InferFn = std::vector<TensorDesc> (*)(const InferArgs&);
// Pointwise math. `x` holds the operands, `p` the op's scalar params (see op_params).
using RefFn = double (*)(const double* x, const double* p);
// CUDA f32 expression over operand variable names and scalar params.
using CudaFn = std::string (*)(const std::vector<std::string>& x, const double* p);
// Integer / bool math (the CPU reference's exact path): operands as int64 (bool 0/1).
using IntRefFn = int64_t (*)(const int64_t* x, const double* p);
// CUDA expression over integer / bool operands all of C type `T` ("int", "long long", "bool").
using IntCudaFn = std::string (*)(const std::vector<std::string>& x, const double* p,
                                  const std::string& T);

// The dtypes an op row accepts for its operands. Shape inference checks them first
// (check_operand_dtypes), naming the operand.
enum class DTypeClass : uint8_t {
  Float,    // f32 / f16 / bf16 only: the math ops, contractions, norms, pools, reductions
  Numeric,  // floating or integer (not bool), one class across operands: arithmetic, order
  Bool,     // bool only: the logical ops
  Any,      // every dtype, one class across operands: eq/ne, identity, cast, movement, where
};
const char* dtype_class_text(DTypeClass c);  // "a floating tensor", ...

// How the planner fuses an op and codegen evaluates it: fusion legality comes from this and the
// category, never from op names.
enum class FusionRole : uint8_t {
  // One output element from the same element of each operand (broadcast, or per-channel when
  // `channel_operands`): part of any group's prologue or epilogue, or of a pointwise chain.
  // Pointwise ops, and inference batchnorm (a per-channel affine).
  Elementwise,
  Anchor,             // starts a group of its category's kind: reductions, windows, contractions
  RowStatistics,      // anchor: statistics over the innermost dims (layernorm, rmsnorm, softmax)
  ChannelStatistics,  // anchor: statistics over channel groups x spatial (groupnorm, instancenorm)
  Movement,           // reshape, transpose, pad: a view or a copy
};

struct OpInfo {
  OpKind kind;
  const char* name;
  OpCategory category;
  FusionRole role;
  int min_inputs, max_inputs;
  std::vector<AttrSpec> attrs;
  InferFn infer;
  RefFn ref = nullptr;    // pointwise ops' math (the CPU reference)
  CudaFn cuda = nullptr;  // elementwise ops' f32 CUDA expression
  // Elementwise ops with a 16-bit result: a faster form (relative error ~1e-6..2e-5, far below a
  // 16-bit ulp) instead of `cuda`; f32 results keep `cuda`'s IEEE-exact one. nullptr: none.
  CudaFn fast16 = nullptr;
  // Operands after the first are per-channel vectors, indexed by dim 1 of the first (batchnorm's
  // scale, bias, mean and var); otherwise operands broadcast numpy-style.
  bool channel_operands = false;
  DTypeClass dtypes = DTypeClass::Float;
  // Integer / bool evaluation (pointwise rows that take integer or bool operands).
  IntRefFn iref = nullptr;
  IntCudaFn icuda = nullptr;
  // Operand 0 is a bool condition and the others the values (where): the dtype class and the
  // evaluation domain are those of the values.
  bool select = false;
  // The op has as many outputs as its shape inference returns (split); all others have one.
  bool several_outputs = false;
  // No operands: the values come from the element's index (range, rank 1), which the pointwise
  // emitters pass as operand 0 of `cuda` / `icuda` (and the reference as x[0] of `ref` /
  // `iref`). Such nodes run in pointwise kernels only (no anchor prologue holds the index).
  bool index_source = false;
  // Operand 1 holds indices (gather, gather_elements): integer whatever the data's dtype, checked
  // by the row's shape inference; the dtype class covers operand 0 only.
  bool index_operand = false;
  // The operands' dtypes differ by position (attention_varlen: floating q, k, v, i32 offsets):
  // the row's shape inference checks each one and check_operand_dtypes none.
  bool positional_dtypes = false;
};

// The operands' dtypes against the row's class: one located message ("<where>.inputs[0]: relu
// takes a floating tensor, got i64 'ids'"), or a mix of integer and floating operands.
void check_operand_dtypes(const OpInfo& info, const InferArgs& a);
// Whether a pointwise node evaluates in the integer / bool domain: every value operand (all but
// a select's condition) is integer or bool.
bool integer_domain(const OpInfo& info, const std::vector<DType>& operands);
// The C type of a dtype's values in generated code: "float" for the floating types, "int",
// "long long", "bool".
const char* value_ctype(DType t);

const OpInfo& op_info(OpKind k);
// Looks up by graph-file name; nullptr when unknown.
const OpInfo* find_op(const std::string& name);
// "add, sub, ..." for messages.
std::string all_op_names();

// The op's scalar params in attribute order: Int and Float values, Enum choice indices.
std::vector<double> op_params(const Node& n);
// Index of `name` within an Enum spec's choices, or -1.
int enum_index(const AttrSpec& spec, const std::string& value);

// Validates `given` against the op's specs and fills defaults; errors say "<where>.<attr>: ...".
Attrs normalize_attrs(const OpInfo& info, const Attrs& given, const std::string& where);

// f32 literal for CUDA source ("1.5f", "KILN_INF", "-KILN_INF").
std::string cuda_float(double v);

// Numpy broadcasting of logical shapes; throws "<where>: ..." on mismatch.
Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& where);

}  // namespace kiln
