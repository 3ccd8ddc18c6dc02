// Small graph edits the passes share: fresh names, and a node added at the end moved to where
// the nodes stay in topological order.
#pragma once

#include <string>

#include "kiln/graph.hpp"

namespace kiln {

// `stem`, or `stem_2`, `stem_3`, ... : the first name no tensor or node of `g` has.
std::string fresh_name(const Graph& g, const std::string& stem);

// Moves the graph's last node to index `at`, keeping producers consistent (the nodes stay in
// topological order when the moved node's inputs are produced before `at`).
void move_last_node_to(Graph& g, int at);

// A new constant i64 vector `idx` (a gather's indices), named after `stem`.
Tensor index_constant(Graph& g, const std::string& stem, const std::vector<int64_t>& idx);

// Every node input that is tensor `from` becomes `to` (the graph outputs stay as they are).
void replace_uses(Graph& g, int from, int to);

// Whether tensor `t` is dense row-major memory, so that reshaping it for a matmul is a view (else
// the reshape would cost a copy kernel where the matmul read a strided operand in place): not
// made by a movement op, through reshapes, except a transpose of a matmul's private result (the
// matmul stores it transposed: attention's heads merge) or a transpose that only a reshape reads
// (a copy, or a view of row-major memory).
bool rows_dense(const Graph& g, int t);

// Infers the outputs of nodes `first`.. again from their inputs as they are now (the layouts after
// a rewrite changed a tensor's layout, as building the graph would have set them). A movement op's
// channels-last output stays channels-last: only a pass chooses that (shape inference makes
// movement outputs row-major), and a copy writes any layout. Returns false, leaving the graph
// partly updated, when a shape or dtype would change or a graph output's layout would; a user
// error of an op that refuses its new input layout propagates.
bool reinfer_layouts(Graph& g, size_t first);

// The row-major tensor that `t` is a transpose `perm` of (a channels-last map relabeling a
// row-major [N, H, W, C] with perm {0, 3, 1, 2}), or -1.
int transposed_from_row_major(const Graph& g, int t, const std::vector<int64_t>& perm);

}  // namespace kiln
