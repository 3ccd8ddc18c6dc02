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

bool attention_wgmma_head_dim(int64_t head_dim) {
  return head_dim == 64 || head_dim == 128;
}

AttentionWgmmaLayout choose_attention_wgmma_layout(int64_t head_dim) {
  KILN_ASSERT(attention_wgmma_head_dim(head_dim), "no wgmma attention layout for head dim {}",
              head_dim);
  AttentionWgmmaLayout l;
  l.head_dim = head_dim;
  l.consumers = 2;
  l.query_rows = 64 * l.consumers;
  l.key_rows = 128;
  l.stages = head_dim <= 64 ? 3 : 2;
  l.threads = 128 * (l.consumers + 1);
  const int d = static_cast<int>(head_dim);
  l.smem_bytes =
      (l.query_rows * d + 2 * l.stages * l.key_rows * d) * 2 + 1024 + 8 * (3 * l.stages + 1);
  return l;
}

AttentionKernel choose_attention_kernel(int sm, bool arch_specific, int64_t head_dim,
                                        bool rows_16b_aligned, int kv_map_rank, int force) {
  if (force == 2) return AttentionKernel::MmaSync;
  const bool ok = sm == 90 && arch_specific && attention_wgmma_head_dim(head_dim) &&
                  rows_16b_aligned && kv_map_rank >= 2 && kv_map_rank <= 5;
  return ok ? AttentionKernel::Wgmma : AttentionKernel::MmaSync;
}

}  // namespace kiln
