// The movement ops that copy bytes into a new arrangement (concat, split, slice, expand, tile,
// depth_to_space, space_to_depth, trilu): their op table rows, and the index arithmetic that
// shape inference, the CPU reference and codegen share (ONNX semantics).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ir/op_table.hpp"

namespace kiln {

// The op table rows (engine/ir/op_table.cpp adds them at the end).
std::vector<OpInfo> movement_rows();

// One axis of a slice after ONNX's normalization: output coordinate o reads input coordinate
// start + step * o, for o in [0, len).
struct SliceAxis {
  int64_t start = 0, step = 1, len = 0;
};
// Every input dim of slice node `n` for an input of concrete size `dims` (dims not sliced: start
// 0, step 1, len = the dim). Bounds as ONNX Slice: negative from the end, then clamped.
std::vector<SliceAxis> slice_axes(const Node& n, const std::vector<int64_t>& dims);
// The axes slice node `n` names, normalized and checked against `rank` (for messages: `where`).
std::vector<int64_t> slice_axis_list(const Node& n, int rank, const std::string& where);

// The sizes of split node `n`'s outputs along its axis of size `dim`: the `split` attribute, or
// `num_outputs` parts of ceil(dim / num_outputs) with a smaller last one (ONNX Split-18).
std::vector<int64_t> split_sizes(const Node& n, int64_t dim, const std::string& where);

// The input axis of concat / split node `n` (normalized for `rank`).
int64_t movement_axis(const Node& n, int rank);

}  // namespace kiln
