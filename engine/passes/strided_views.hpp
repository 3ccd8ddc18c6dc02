// What the slice, expand and concat views (engine/passes/slice_views.cpp, concat_views.cpp)
// share: which kernels read or write a tensor through arbitrary strides, and how a tensor is
// made a view at an offset into its root.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln {

// Views start 16 bytes aligned: kernels take 16-byte vector accesses wherever a tensor's
// strides allow them, and know nothing of the offset.
constexpr int64_t kViewAlignBytes = 16;

// Whether every reader of tensor `t` takes it at any strides: elementwise ops only (a pointwise
// kernel indexes a non-dense operand through its strides; a contraction epilogue reads its
// operands through theirs). The planner keeps strided views out of every other group kind
// (strided_view_io). False when nothing reads `t` or it is a graph output.
bool all_readers_strided(const Graph& g, int t);

// Whether node `p`'s kernel stores its output through arbitrary strides: an elementwise op (a
// pointwise kernel or a contraction epilogue), a contraction anchor (conv2d, matmul,
// conv_transpose2d: their epilogues store through the output's strides) or a pool (its scalar
// kernel stores each output element through them).
bool writer_stores_strided(const Graph& g, int p);

// An element offset `start` x `stride` that keeps a view 16-byte aligned for dtype size `es`:
// statically, or for every value of a symbolic `start` (the stride alone is aligned).
bool offset_aligned(const Dim& start, int64_t stride, int64_t es);

// The dense layout whose strides `strides` are for `shape` (NCHW: row-major at every rank; NHWC;
// unit dims may carry any stride), or Strided.
Layout layout_of_strides(const std::vector<int64_t>& strides, const Shape& shape);

// Tensor `view` becomes a view of `root` at element `offset`, laid out with `strides` there (a
// dense layout where the strides are one, Strided otherwise; no strides: dense row-major, symbolic
// dims included).
void make_view(Graph& g, int view, int root, const std::vector<int64_t>& strides,
               const Dim& offset);

// Whether tensor `t` may become a view: a private intermediate (not a graph output) that is no
// view and no root of one yet.
bool may_become_view(const Graph& g, int t);

// Whether tensor `t` is a private intermediate, no view itself, that views were made of.
bool is_view_root(const Graph& g, int t);

// Whether tensor `t` is a view laid out with explicit strides (a slice, an expand or a concat
// input that is not dense memory of its own).
bool is_strided_view(const Graph& g, int t);

}  // namespace kiln
