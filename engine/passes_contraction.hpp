// Graph passes around contractions (conv2d / matmul).
#pragma once

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

}  // namespace kiln
