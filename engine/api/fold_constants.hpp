// Constant folding (API layer: it runs the CPU reference, runtime/reference.cpp): a node whose
// inputs are all constants computes a constant, whatever the input data. Exported models carry
// such subgraphs: Swin V2's continuous position bias (an MLP over a fixed coordinate table,
// gathered, transposed, 16 * sigmoid) and its clamped, exponentiated logit scale, recomputed by
// small kernels on every run otherwise. Each folded result is a constant whose data the reference
// makes on first use (planning alone makes none), bounded in size and work.
#pragma once

#include <memory>
#include <string>

#include "kiln/graph.hpp"

namespace kiln {

// `g` with every foldable node's results as constants (the same graph when none folds); `note`
// gets what was folded ("" when nothing).
std::shared_ptr<const Graph> fold_constants(std::shared_ptr<const Graph> g, std::string* note);

}  // namespace kiln
