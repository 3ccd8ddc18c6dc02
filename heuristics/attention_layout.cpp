// The fused attention kernel's layout (heuristics/attention_layout.hpp).
#include "heuristics/attention_layout.hpp"

#include <algorithm>

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
  return head_dim >= 64 && head_dim <= 256 && head_dim % 8 == 0;
}

AttentionWgmmaLayout choose_attention_wgmma_layout(int64_t head_dim) {
  KILN_ASSERT(attention_wgmma_head_dim(head_dim), "no wgmma attention layout for head dim {}",
              head_dim);
  AttentionWgmmaLayout l;
  l.head_dim = head_dim;
  l.padded_dim = static_cast<int>((head_dim + 63) / 64 * 64);
  l.consumers = 2;
  l.query_rows = 64 * l.consumers;
  l.key_rows = l.padded_dim <= 128 ? 128 : 64;
  l.threads = 128 * (l.consumers + 1);
  const int d = l.padded_dim;
  auto tiles = [&](int stages) { return (l.query_rows * d + 2 * stages * l.key_rows * d) * 2; };
  l.stages = tiles(3) <= kWgmmaThreeStageTileBytes ? 3 : 2;
  l.smem_bytes = tiles(l.stages) + 1024 + 8 * (4 * l.stages + 1);
  return l;
}

int64_t choose_attention_split(const AttentionLayout& l, const AttentionSplitProblem& p) {
  KILN_ASSERT(l.key_rows > 0 && l.smem_bytes > 0, "attention layout without key blocks");
  if (p.force == 1 || p.q_len <= 0 || p.q_len > l.query_rows) return 0;
  const int64_t k_len = p.k_len > 0 ? p.k_len : kSplitKeyEstimate;
  const int64_t blocks = (k_len + l.key_rows - 1) / l.key_rows;
  if (p.force > 1) {
    const int64_t per = (blocks + p.force - 1) / p.force;
    return per < blocks ? per : 0;
  }
  // Two CTAs an SM at most (128 threads of up to 255 registers), fewer where the SM's shared
  // memory (228 KB on sm_90, 164 KB on sm_80, 100 KB on sm_86 / sm_89; 1 KB of it reserved a
  // CTA) does not hold two.
  const int64_t sm_smem = (p.sm == 90 ? 228 : p.sm == 80 ? 164 : 100) * 1024;
  const int64_t per_sm =
      std::max<int64_t>(1, std::min<int64_t>(2, sm_smem / (l.smem_bytes + 1024)));
  const int64_t slots = per_sm * std::max(1, p.sm_count);
  const int64_t ctas = std::max<int64_t>(1, p.batch);  // one query block (q_len <= query_rows)
  if (ctas >= slots) return 0;
  // A CTA's time: its key blocks plus kSplitOverheadBlocks (the first tile's load, which nothing
  // overlaps, and the partial's store and combine), so finer splits that only trim the last
  // wave's quantization by a block or two do not win.
  int64_t best_per = blocks, best_cost = blocks + kSplitOverheadBlocks;  // no split: one wave
  for (int64_t s = 2; s <= blocks / kMinSplitBlocks && s <= 256; ++s) {
    const int64_t per = (blocks + s - 1) / s;
    const int64_t splits = (blocks + per - 1) / per;
    const int64_t waves = (ctas * splits + slots - 1) / slots;
    if (waves * (per + kSplitOverheadBlocks) < best_cost) {
      best_cost = waves * (per + kSplitOverheadBlocks);
      best_per = per;
    }
  }
  return best_per < blocks ? best_per : 0;
}

AttentionKernel choose_attention_kernel(int sm, bool arch_specific, int64_t head_dim,
                                        bool rows_16b_aligned, int kv_map_rank, int force,
                                        bool split) {
  if (force == 2 || split) return AttentionKernel::MmaSync;
  const bool ok = sm == 90 && arch_specific && attention_wgmma_head_dim(head_dim) &&
                  rows_16b_aligned && kv_map_rank >= 2 && kv_map_rank <= 5;
  return ok ? AttentionKernel::Wgmma : AttentionKernel::MmaSync;
}

}  // namespace kiln
