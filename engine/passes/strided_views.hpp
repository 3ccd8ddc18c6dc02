// What the slice, expand and concat views (engine/passes/slice_views.cpp, concat_views.cpp)
// share: which kernels read or write a tensor through arbitrary strides, and how a tensor is
// made a view at an offset into its root.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln {

// Views start 16 bytes aligned: kernels take 16-byte vector accesses wherever a tensor's
// strides allow them, and know nothing of the offset.
constexpr int64_t kViewAlignBytes = 16;

// Whether every reader of tensor `t` takes it laid out with `strides`: an elementwise op at any
// strides (a pointwise kernel indexes a non-dense operand through its strides; a contraction
// epilogue reads its operands through theirs), a row norm (layernorm, rmsnorm, softmax anchor)
// where `strides` keep its rows dense and 16-byte aligned (no strides given: none). The planner
// keeps strided views out of every other group (Planner::takes_strided_views). False when
// nothing reads `t` or it is a graph output.
bool all_readers_strided(const Graph& g, int t, const std::vector<int64_t>& strides = {});
// The same for one reader, node `c`.
bool reader_takes_strides(const Graph& g, const Node& c, int t,
                          const std::vector<int64_t>& strides);
// Whether matmul node `c` reads `t` as its A or B operand (not its bias) laid out with `strides`,
// contiguous along the last dim: the contraction loaders take any other strides.
bool matmul_reads_operand(const Node& c, int t, const std::vector<int64_t>& strides);

// Whether every reader of `t`, laid out with `strides`, takes it: all_readers_strided's readers,
// a matmul operand (matmul_reads_operand), or a slice (or a reshape, reshape_view_strides) whose
// output becomes a strided view in turn that its readers take (Swin V2's unpadding: a slice of H,
// then of W, read by a layernorm; its head split: q, k and v sliced from the QKV projection, read
// by row norms and the attention), at most `4 - depth` such steps deep. `rows_only`: no elementwise
// readers (they would read a transposed view uncoalesced), only row norms and matmul operands.
bool readers_take_strided(const Graph& g, int t, const std::vector<int64_t>& strides,
                          bool rows_only = false, int depth = 0);

// The output of slice or expand node `n` as strides (and an element offset) over its input laid
// out with `in_strides`, if it is one.
bool slice_view_strides(const Graph& g, const Node& n, const std::vector<int64_t>& in_strides,
                        std::vector<int64_t>* strides, int64_t* offset);
// The strides of shape `to` read as a reshape of shape `from` laid out with `from_strides`,
// where that is a view: each run of `from` dims contiguous with each other split or merged into
// `to` dims of the same count (unit dims dropped or added anywhere), or nothing.
std::optional<std::vector<int64_t>> reshape_view_strides(const Shape& from,
                                                         const std::vector<int64_t>& from_strides,
                                                         const Shape& to);

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
