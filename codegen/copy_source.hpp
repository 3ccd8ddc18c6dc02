// Where a copy kernel's output element reads its movement op's input (codegen/emit_copy.cpp):
// the byte-moving ops (concat, slice, expand, tile, depth_to_space, space_to_depth, trilu) and
// pad's reflect and edge modes, by the index arithmetic of engine/ir/movement_ops.hpp.
#pragma once

#include <string>
#include <vector>

#include "codegen/pointwise_expr.hpp"
#include "codegen/writer.hpp"

namespace kiln {

// One place an output element may read: input `input` of the node at coordinates `coords`, when
// `inside` holds ("" = always, "false" = never: the element is the fill value). Several sources
// (concat) are tried in order, the first whose `inside` holds is read, the last one
// unconditionally.
struct CopySource {
  int input = 0;
  std::vector<std::string> coords;
  std::string inside;
};

// True for the ops whose elements are read by computed source coordinates: those movement_sources
// maps and gather / gather_elements (codegen/gather_source.hpp); the others are reshape,
// transpose, constant pad.
bool is_gather_copy(const Node& node);

// The sources of the output element at coordinates `oc` (expressions) of gather-copy node `node`.
std::vector<CopySource> movement_sources(const Graph& g, const Node& node,
                                         const std::vector<std::string>& oc, DimParams& dp);

}  // namespace kiln
