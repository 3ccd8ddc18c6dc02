// attention_varlen: softmax(scale Q K^T) V over a batch of sequences of different lengths packed
// along one token axis (FlashAttention's varlen form), sequence b holding query rows
// [cu_seqlens_q[b], cu_seqlens_q[b + 1]) and key rows [cu_seqlens_k[b], cu_seqlens_k[b + 1]).
// Its op table row, and the attribute rules that shape inference, the CPU reference and codegen
// share (docs/graph_format.md, "attention_varlen").
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ir/op_table.hpp"

namespace kiln {

// The op table rows (engine/ir/op_table.cpp adds them at the end).
std::vector<OpInfo> attention_rows();

// The operands' positions.
enum VarlenOperand : int { kVarlenQ = 0, kVarlenK, kVarlenV, kVarlenCuQ, kVarlenCuK };

// What a query row sees, from node `n`'s attributes. Rows and keys are counted within their
// sequence; the diagonal is bottom-right aligned (FlashAttention's varlen convention): query i
// of a sequence with lq queries and lk keys sits at key position i + lk - lq. Key j is visible
// when j >= i + (lk - lq) - left (when left >= 0) and j <= i + (lk - lq) + right (when
// right >= 0). causal is right = 0 (a smaller window_right tightens it).
struct VarlenBand {
  double scale = 1.0;  // the attribute, or 1 / sqrt(D) when it is 0 (the default)
  bool causal = false;
  int64_t left = -1, right = -1;  // -1: unbounded on that side
  bool has_upper() const { return right >= 0; }
  bool has_lower() const { return left >= 0; }
};
VarlenBand varlen_band(const Node& n, int64_t head_dim);

// Whether key j of a sequence of lq queries and lk keys is visible to query i under `b`.
inline bool varlen_visible(const VarlenBand& b, int64_t i, int64_t j, int64_t lq, int64_t lk) {
  const int64_t diag = i + lk - lq;
  return (!b.has_upper() || j <= diag + b.right) && (!b.has_lower() || j >= diag - b.left);
}

}  // namespace kiln
