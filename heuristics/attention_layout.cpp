// The fused attention kernel's layout (heuristics/attention_layout.hpp).
#include "heuristics/attention_layout.hpp"

#include "engine/base/check.hpp"

namespace kiln {

AttentionLayout choose_attention_layout(int64_t head_dim) {
  KILN_ASSERT(head_dim >= 8 && head_dim <= 256 && head_dim % 8 == 0,
              "attention head dim {} (the pattern takes multiples of 8 up to 256)", head_dim);
  AttentionLayout l;
  l.head_dim = head_dim;
  l.padded_dim = static_cast<int>((head_dim + 15) / 16 * 16);
  l.warps = 4;
  l.query_rows = 16 * l.warps;
  const bool wide = l.padded_dim > 128;
  l.key_rows = wide ? 32 : 64;
  l.q_in_registers = !wide;
  const int ld = l.padded_dim + 8;
  l.smem_bytes = (l.query_rows * ld + 4 * l.key_rows * ld) * 2;
  return l;
}

}  // namespace kiln
