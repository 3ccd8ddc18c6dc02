// The ops whose results are indices or index arithmetic: argmax and argmin (ONNX ArgMax /
// ArgMin: the i64 position of the extreme along one axis) and range (ONNX Range: start + i *
// delta, an op without inputs). Their op table rows and the attribute rules shape inference,
// the CPU reference and codegen share.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ir/op_table.hpp"

namespace kiln {

// The op table rows (engine/ir/op_table.cpp adds them at the end).
std::vector<OpInfo> index_rows();

// The axis of argmax / argmin node `n`, normalized for `rank`.
int64_t arg_reduce_axis(const Node& n, int rank);

// Range's dtype choices, in its Enum's order ("f32|f16|bf16|i32|i64").
DType range_dtype(const Node& n);

}  // namespace kiln
