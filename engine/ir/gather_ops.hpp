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

// True for the ops whose second input holds indices into the first (gather, gather_elements).
inline bool is_index_gather(OpKind k) {
  return k == OpKind::Gather || k == OpKind::GatherElements;
}

}  // namespace kiln
