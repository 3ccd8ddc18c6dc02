// The index-driven movement ops gather and gather_elements (ONNX Gather, GatherElements): their
// op table rows and the index arithmetic that shape inference, the CPU reference and codegen
// share.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ir/op_table.hpp"

namespace kiln {

// The op table rows (engine/ir/op_table.cpp adds them at the end).
std::vector<OpInfo> gather_rows();

// The data axis of gather / gather_elements node `n`, normalized for data of rank `rank`.
int64_t gather_axis(const Node& n, int rank);

// Whether the indices of gather / gather_elements node `n` of `g` are a constant (of at most
// kMaxCheckedConstantIndices values) whose every value lies in [-dim, dim) of the data's static
// axis: its kernel then needs no bounds check and no error word (nothing to report, no readback
// per run), as a channel shuffle's gathers have.
constexpr int64_t kMaxCheckedConstantIndices = int64_t{1} << 20;
bool gather_indices_in_range(const Graph& g, const Node& n);

// True for the ops whose second input holds indices into the first (gather, gather_elements).
inline bool is_index_gather(OpKind k) {
  return k == OpKind::Gather || k == OpKind::GatherElements;
}

}  // namespace kiln
