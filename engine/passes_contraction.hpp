// Graph passes around contractions (conv2d / matmul).
#pragma once

#include <memory>
#include <string>

#include "kiln/graph.hpp"

namespace kiln {

// Folds inference batchnorm into the conv2d / matmul that feeds it when the contraction's weights
// (and bias, if any) and the batchnorm's scale, bias, mean and var are constants and nothing else
// reads the contraction's output:
//   W' = W * gamma / sqrt(var + eps)   (per output channel)
//   b' = (b - mean) * gamma / sqrt(var + eps) + beta
// The contraction gets new constants W' and b' and takes over the batchnorm's output tensor; the
// batchnorm node disappears. Matmul folds only when its output is 2-D (channel = the last dim).
// Returns the number of batchnorm nodes folded. Dead nodes and tensors are pruned.
int fold_batchnorm(Graph& g);

// Cheap test: some batchnorm reads a conv2d / matmul output (fold_batchnorm may change `g`).
bool has_batchnorm_after_contraction(const Graph& g);

// The graph passes Engine::compile runs before planning, and `kiln plan|emit|explain` with it
// so that they show what the Engine builds: with fusion on, batchnorm folding. `g` is returned
// unchanged (no copy) when no pass applies. `note` (optional) says what changed.
std::shared_ptr<const Graph> apply_engine_passes(std::shared_ptr<const Graph> g, bool fusion,
                                                 std::string* note = nullptr);

}  // namespace kiln
