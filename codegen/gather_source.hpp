// Where a copy kernel's output element reads gather / gather_elements data (codegen/emit_copy.cpp):
// the coordinate along the axis is a load of the index tensor (the kernel's second input). An
// index outside [-dim, dim) never reads out of bounds: the read is clamped into the axis and the
// kernel ORs kGatherIndexOutOfRange into its error word (a trailing parameter the executor owns,
// zeroed before each run and read back after it: runtime/executor.cpp).
#pragma once

#include <string>
#include <vector>

#include "codegen/copy_source.hpp"

namespace kiln {

// The error word's parameter name in the copy kernel of a gather.
inline constexpr const char* kErrorWordParam = "kiln_err";
// The code a kernel ORs into its error word when an index is out of range.
inline constexpr unsigned kGatherIndexOutOfRange = kErrorIndexOutOfRange;

// The source of the output element at coordinates `oc` of gather / gather_elements node `node`:
// writes the index load, its normalization and the clamp (variables named with `suffix`, of
// index type `idx`) and returns the data coordinates.
// `err` is the kernel's error word parameter.
CopySource index_gather_source(Writer& w, const Graph& g, const Node& node,
                               const std::vector<std::string>& oc, const char* idx,
                               const std::string& suffix, DimParams& dp,
                               const std::string& err = kErrorWordParam);

}  // namespace kiln
