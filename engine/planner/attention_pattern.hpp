// Attention chains the planner fuses into one kernel (codegen/emit_attention.cpp):
//   S = Q @ K^T, optionally S / c or S * c (c a scalar constant), P = softmax(S, last axis),
//   O = P @ V
// where the scores S and P are private intermediates (one consumer, not graph outputs). The
// kernel keeps S and P on chip (flash-attention style), so neither is ever written.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln {

struct AttentionChain {
  int qk = -1, scale = -1, softmax = -1, pv = -1;  // node indices (scale: -1 when absent)
  int q = -1, k = -1, v = -1, o = -1;              // tensor ids
  bool k_rows = true;        // K is [..., Tk, D] (transpose_b), else [..., D, Tk]
  bool v_rows = true;        // V is [..., Tk, D], else [..., D, Tk] (transpose_b)
  double scale_value = 1.0;  // what the scores are multiplied by before the softmax
  int64_t head_dim = 0;
  // Static element strides: batch dims, then the row (query / key) stride; D is contiguous.
  std::vector<int64_t> q_strides, k_strides, v_strides, o_strides;
};

// The chain starting at matmul node `qk` when the fused kernel takes it: f16/bf16, head dim D a
// multiple of 32 up to 128 for Q, K, V and O alike, D contiguous in every operand (views
// included), every other stride static and a multiple of 8 (16-byte rows), the same batch dims
// everywhere. Symbolic batch and sequence dims are fine.
std::optional<AttentionChain> match_attention(const Graph& g, int qk);

}  // namespace kiln
