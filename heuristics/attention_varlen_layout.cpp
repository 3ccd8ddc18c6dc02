// The ragged-batch attention kernel's layout (heuristics/attention_varlen_layout.hpp).
#include "heuristics/attention_varlen_layout.hpp"

#include <fmt/format.h>

namespace kiln {

AttentionVarlenLayout choose_attention_varlen_layout(const AttentionVarlenProblem& p) {
  AttentionVarlenLayout l;
  const int64_t d = p.head_dim;
  if (p.sm < 80) {
    l.why = fmt::format("the ragged attention kernel needs sm_80+ (mma.sync), the target is sm_{}",
                        p.sm);
  } else if (!p.half) {
    l.why = "the ragged attention kernel takes f16 or bf16 q, k, v (insert a cast)";
  } else if (d < 8 || d > 256 || d % 8 != 0) {
    l.why = fmt::format(
        "the ragged attention kernel takes head dims that are multiples of 8 up "
        "to 256, got {}",
        d);
  } else if (p.v_head_dim != d) {
    l.why = fmt::format("the ragged attention kernel needs v's head dim ({}) equal to q's ({})",
                        p.v_head_dim, d);
  }
  if (!l.why.empty()) return l;
  l.path = AttentionVarlenPath::MmaSync;
  l.tile = choose_attention_layout(d);
  const int64_t m = p.mean_q_len;
  l.tile.warps = m > 0 && m <= 16 ? 1 : m > 0 && m <= 32 ? 2 : 4;
  l.tile.query_rows = 16 * l.tile.warps;
  const int ld = l.tile.padded_dim + 8;
  l.tile.smem_bytes = (l.tile.query_rows * ld + 4 * l.tile.key_rows * ld) * 2;
  return l;
}

}  // namespace kiln
