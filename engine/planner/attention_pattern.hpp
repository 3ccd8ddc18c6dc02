// Attention chains the planner fuses into one kernel (codegen/emit_attention.cpp):
//   S = Q @ K^T, then up to one each of, in graph order,
//     S * c or S / c (c a scalar constant),
//     S + M (an additive mask M that broadcasts to S: key padding [B, 1, 1, Sk], causal [Sq, Sk],
//            full [B, H, Sq, Sk]; any float dtype; computed or constant),
//     where(cond, S, fill) or where(cond, fill, S) (fill a scalar constant, cond a bool that
//            broadcasts to S),
//   P = softmax(S, last axis), O = P @ V (or O^T = V^T @ P^T, the transposed P read as a
//   transpose_b operand: the UNet attention block whose O^T is its output's channels)
// where the scores and every intermediate up to P are private (one consumer, not graph outputs).
// Q, K and V are read through their strides (symbolic where the shapes are) and an offset: views
// as laid out, and private chains of reshapes, transposes and slices down to the last that stayed
// a copy (torchvision's head split of its QKV projection), and a private mul of Q or K by a
// scalar constant (torch's SDPA export), are taken into the group and read through (the factor
// moves to the scores; attention_operands.hpp). O is written through the reshapes and
// transposes after it (the head merge) likewise. K / V batch dims of size 1 broadcast over Q's
// (grouped- and multi-query attention). The kernel keeps S and P on chip (flash-attention style),
// so none of them is ever written. A mask that is recognisably a band of the diagonal — causal,
// a sliding window, or both (a constant band pattern; trilu of all-true / ones, or of a uniform
// large negative fill; `and` of such conditions, `or` of such masked conditions, the sum of such
// additive masks) — is not read at all: the kernel computes it from the indices and skips the
// key blocks a query block cannot see. Rows whose every key is masked give zeros
// (docs/graph_format.md).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln {

// One elementwise step between the scores and the softmax.
struct ScoreStep {
  enum class Kind : uint8_t { Scale, AddMask, Where };
  Kind kind = Kind::Scale;
  int node = -1;
  double value = 1.0;        // Scale: the factor (1 / c for a div); Where: the fill
  int tensor = -1;           // AddMask: the mask; Where: the condition; -1 when the step is causal
  bool keep_if_true = true;  // Where: where(cond, S, fill); false: where(cond, fill, S)
  // The tensor's element strides over the scores' dims [batch..., Sq, Sk]; 0 where it broadcasts.
  std::vector<Dim> strides;
};

struct AttentionChain {
  int qk = -1, softmax = -1, pv = -1;  // node indices
  int q = -1, k = -1, v = -1, o = -1;  // tensor ids the kernel reads and writes
  // Movement ops of Q, K and V down to the last that stayed a copy, scalar muls of Q and K, and
  // the movement ops after O up to the last copy: the kernel reads their inputs (writes that
  // copy's result) through the composed strides instead, and they join the group.
  std::vector<int> operand_views;
  Dim q_offset{0}, k_offset{0}, v_offset{0};  // elements into q, k, v (multiples of 8)
  double operand_scale = 1.0;    // the product of those muls' factors, on the raw scores
  std::vector<ScoreStep> steps;  // between qk and softmax, in graph order
  bool k_rows = true;            // K is [..., Tk, D] (transpose_b), else [..., D, Tk]
  bool v_rows = true;            // V is [..., Tk, D], else [..., D, Tk] (transpose_b)
  double scale_value = 1.0;      // the Scale step's factor (1 without one)
  int64_t head_dim = 0;
  Shape batch;       // the scores' (and Q's, O's) batch dims
  Dim q_len, k_len;  // query and key lengths
  // A causal step: key j is visible to query i when j <= i + causal_offset.
  bool causal = false;
  int64_t causal_offset = 0;
  // A sliding window (a band mask's lower edge): key j is visible to query i when
  // j >= i + window_offset. With `causal`, a window of causal_offset - window_offset + 1 keys.
  bool window = false;
  int64_t window_offset = 0;
  // The nodes that compute a band mask (causal / window) for the chain alone: the kernel never
  // reads their result, so they join the group and run nowhere.
  std::vector<int> band_nodes;
  // Element strides: batch dims (Q's; 0 where K / V broadcast a dim: grouped-query attention),
  // then the row (query / key) stride; D is contiguous. Symbolic where the shape is.
  std::vector<Dim> q_strides, k_strides, v_strides, o_strides;

  std::vector<int> nodes() const;  // every node of the chain, qk first
  bool kv_broadcast() const;       // whether K or V broadcasts a batch dim of Q
};

// The chain starting at matmul node `qk` when the fused kernel takes it: f16/bf16, head dim D a
// multiple of 8 up to 256 for Q, K, V and O alike, D contiguous in every operand (views
// included), every other stride a multiple of 8 (16-byte rows), batch dims of K and V equal to
// Q's or broadcast (size 1), O's equal to Q's. Symbolic batch and sequence dims are fine, and
// the query and key lengths may differ.
std::optional<AttentionChain> match_attention(const Graph& g, int qk);

// Internal to the matcher (attention_scores.cpp): the steps from scores tensor `t` (of shape
// `scores`) to the softmax node, which it returns (-1 when the chain is not taken); `t` ends as
// the softmax's input.
int match_score_steps(const Graph& g, int& t, const Shape& scores, AttentionChain& c);

// Element strides of `t` as a tensor broadcast to `shape` (right-aligned; 0 on broadcast dims),
// when `t` broadcasts to it and has strides the kernel can compute (views: static ones).
std::optional<std::vector<Dim>> broadcast_strides(const Graph& g, int t, const Shape& shape);

// The element strides of a tensor, symbolic where its shape is (row-major and Strided layouts;
// NHWC only when static).
std::optional<std::vector<Dim>> dim_strides(const TensorDesc& d);

}  // namespace kiln
