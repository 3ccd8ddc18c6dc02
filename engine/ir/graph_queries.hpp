// Small structural queries over a Graph shared by the engine passes and the planner.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln {

// The nodes reading tensor `t` (each once), in node order.
std::vector<int> consumers_of(const Graph& g, int t);
bool is_graph_output(const Graph& g, int t);
// The tensor whose memory `t` lives in: its TensorInfo::view_of, or `t` itself.
int memory_root(const Graph& g, int t);
// Element strides of a tensor in memory when they are static: explicit (Strided), or a dense
// layout whose dims are static except the outermost (which no stride depends on).
std::optional<std::vector<int64_t>> static_strides(const TensorDesc& d);
// `t` is an intermediate (not a graph output) that exactly one node reads.
bool read_by_one(const Graph& g, int t);
// `n` is an elementwise op of one output (FusionRole::Elementwise).
bool is_elementwise(const Node& n);
// `t` is a contraction's result or made from one by elementwise ops that alone read it, each
// other operand of theirs from anywhere (what a contraction's epilogue computes); `op`, when given,
// the contraction's op.
bool from_contraction_epilogue(const Graph& g, int t, std::optional<OpKind> op = std::nullopt);
// Whether `strides` are the dense strides of `shape` in `layout` (unit dims may carry any stride).
bool strides_dense(const std::vector<int64_t>& strides, const Shape& shape, Layout layout);
// Every reader of `t` reads a channels-last tensor as well as a row-major one, at full speed: the
// elementwise ops (adjacent threads, adjacent memory in either layout), convolutions (as their
// input), pools, and a transpose to [N, H, W, C] (the channels-last memory in its order).
bool all_consumers_take_nhwc(const Graph& g, int t);
// Whether tensor `t` is a constant whose data the graph holds (folding passes read it).
bool has_constant_data(const Graph& g, int t);

}  // namespace kiln
