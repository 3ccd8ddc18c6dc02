// Graph identity, for the Engine's graph-level cache and hot-shape variants
// (docs/DYNAMIC_SHAPES.md); specialize_graph (kiln/graph.hpp) is implemented beside it.
#pragma once

#include <string>

#include "kiln/graph.hpp"

namespace kiln {

// A canonical 128-bit key (32 hex digits) of everything that decides the compiled kernels and the
// run-time interface of `g`: its name, every tensor's role, dtype, layout, shape (symbolic dims by
// their canonical text) and strides, every constant's name and data bytes, every node's op,
// operands and attributes, and the names of inputs and outputs. Names of intermediate tensors and
// of nodes are left out: two graphs that differ only there get the same key.
std::string graph_key(const Graph& g);

// A hash of the names graph_key leaves out (intermediates and nodes), to tell whether two graphs
// of one key are also identical in their names.
uint64_t graph_names_hash(const Graph& g);

}  // namespace kiln
