// Where a copy kernel's output element reads its movement op's input (codegen/emit_copy.cpp):
// the byte-moving ops (concat, slice, expand, tile, depth_to_space, space_to_depth, trilu), pad's
// reflect and edge modes and nearest resize, by the index arithmetic of
// engine/ir/movement_ops.hpp and engine/ir/resize_op.hpp.
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

// Resize's source coordinate (an f32 expression) along dim `d` for output coordinate `o`: the
// f32 operations of resize_source (engine/ir/resize_op.cpp) in the same order.
std::string resize_source_expr(const Node& node, const TensorDesc& id, const TensorDesc& od,
                               size_t d, const std::string& o, DimParams& dp);
// Whether resize dim `d` maps every output coordinate to itself (same size at scale 1, in every
// coordinate mode).
bool resize_identity_dim(const Node& node, const TensorDesc& id, const TensorDesc& od, size_t d);
// C++ expression of `d` - 1 (a literal when static).
std::string dim_minus_one(const Dim& d, DimParams& dp);

}  // namespace kiln
