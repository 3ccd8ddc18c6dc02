// The op table: one row per op (engine/op_table.cpp). Everything op-specific that the builder,
// the JSON loader, shape inference, the CPU reference and codegen need is looked up here.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln {

enum class AttrKind { Int, Float, Enum, Ints, Dims };

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

using InferFn = std::vector<TensorDesc> (*)(const InferArgs&);
// Pointwise math. `x` holds the operands, `p` the op's scalar params (see op_params).
using RefFn = double (*)(const double* x, const double* p);
// CUDA f32 expression over operand variable names and scalar params.
using CudaFn = std::string (*)(const std::vector<std::string>& x, const double* p);

struct OpInfo {
  OpKind kind;
  const char* name;
  OpCategory category;
  int min_inputs, max_inputs;
  std::vector<AttrSpec> attrs;
  InferFn infer;
  RefFn ref = nullptr;    // pointwise only
  CudaFn cuda = nullptr;  // pointwise only
};

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
