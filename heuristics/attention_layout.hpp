// The layout of the fused attention kernel (codegen/emit_attention.cpp over
// codegen/device/kiln_attention.cuh): query rows per CTA, the key block, whether the Q
// fragments stay in registers, and the shared memory that makes; the key split of decode shapes.
// Pure functions, tested on the CPU.
#pragma once

#include <cstdint>

namespace kiln {

struct AttentionLayout {
  int64_t head_dim = 0;
  int padded_dim = 0;   // the head dim rounded up to 16 (the mma k step), zeros in shared memory
  int warps = 4;        // 16 query rows each
  int query_rows = 64;  // per CTA: 16 * warps
  int key_rows = 64;    // per key block (32 or 64)
  bool q_in_registers = true;
  int smem_bytes = 0;  // Q once, K and V twice (double buffered), rows padded by 8 elements
};

// Head dims up to 128 keep Q's fragments in registers and stream 64-key blocks (the output
// accumulator, D / 2 floats a thread, fits beside them); wider heads (up to 256) re-read Q from
// shared memory and stream 32-key blocks, which keeps the accumulator in registers and the
// shared memory at 101 KB for D = 256 (sm_80's 163 KB limit included).
AttentionLayout choose_attention_layout(int64_t head_dim);

// The sm_90a kernel (codegen/device/kiln_attention_wgmma.cuh): CONSUMERS warpgroups of 64 query
// rows each on wgmma and one producer warpgroup whose first thread loads Q once and K / V tiles
// of key_rows keys by TMA into a `stages`-deep ring (128-byte swizzled slabs of 64 head columns).
struct AttentionWgmmaLayout {
  int64_t head_dim = 0;
  int padded_dim = 0;  // whole 64-column slabs: the head dim rounded up to 64
  int consumers = 2;
  int query_rows = 128;  // 64 * consumers
  int key_rows = 128;
  int stages = 2;
  int threads = 384;   // consumers + the producer, 128 each
  int smem_bytes = 0;  // Q, stages x (K, V), the barriers, 1024 bytes of alignment slack
};

// Head dims with a wgmma kernel: multiples of 8 from 64 to 256. The tiles hold whole 64-column
// swizzle slabs: a head dim that is no multiple of 64 (80, 96, 160) is padded to the next one by
// the TMA boxes, whose columns past the tensor's head dim arrive as zeros and add nothing to
// Q K^T or P V, and the output stores only the head dim (FlashAttention-3 pads its head dims to
// the next kernel it has the same way). Padded dims up to 128 stream 128-key tiles (the O
// accumulator of 128 columns and the S accumulator of 128 keys, 64 + 64 floats a thread, fit in
// the consumers' 240 registers); 192 and 256 stream 64-key tiles (96 or 128 + 32 floats). Three
// stages where their tiles fit in kWgmmaThreeStageTileBytes, else two (the rest of the SM's
// 228 KB stays L1): three at padded dims 64 and 192, two at 128 and 256.
inline constexpr int kWgmmaThreeStageTileBytes = 192 * 1024;
bool attention_wgmma_head_dim(int64_t head_dim);
AttentionWgmmaLayout choose_attention_wgmma_layout(int64_t head_dim);

// Flash-decoding: a decode-shaped attention (a static query length of at most one CTA's query
// rows, few batch elements x heads) splits its key axis over several CTAs. Each split CTA writes
// its unnormalized f32 partial output with its row max and row sum to the executor's workspace;
// the last split CTA of a (batch, query block) to arrive (a per-tile counter) combines them in
// split order. A split covers `blocks_per_split` key blocks; the number of splits is
// ceil(k_len / (blocks_per_split x key_rows)) at launch, so a symbolic key length (a KV cache)
// gets splits for the length it is bound to.
struct AttentionSplitProblem {
  int64_t q_len = 0;   // the static query length; 0 when symbolic (no split: prefill-like)
  int64_t batch = 1;   // the product of the batch dims (symbols estimated as 1)
  int64_t k_len = 0;   // the key length; 0 when symbolic (estimated kSplitKeyEstimate)
  int sm = 90;         // the target arch (its shared memory an SM)
  int sm_count = 132;  // the target's SMs
  int force = 0;       // KILN_SCHEDULE attention.splits: 0 the rule, 1 no split, N splits
};
inline constexpr int64_t kSplitKeyEstimate = 8192;  // a symbolic key length, for the rule

// Key blocks a split covers, 0 for no split. The rule: split only when the query CTAs (batch x
// query blocks) fill less than one wave (one or two CTAs resident an SM, by the shared
// memory); among split counts whose splits keep at least kMinSplitBlocks key blocks, take the one
// with the fewest waves x (blocks per split + kSplitOverheadBlocks) (the time of a memory-bound
// grid), the smallest on a tie (less partial traffic). A decode of 32 heads x 32768 keys on 132
// SMs: 8 splits of 64 blocks, 256 CTAs in one wave of 264.
inline constexpr int64_t kMinSplitBlocks = 4;
inline constexpr int64_t kSplitOverheadBlocks = 2;
int64_t choose_attention_split(const AttentionLayout& l, const AttentionSplitProblem& p);

enum class AttentionKernel { MmaSync, Wgmma };
// Which kernel runs a fused attention: wgmma where the target takes sm_90a instructions
// (`sm` 90 with arch-specific kernels allowed), the head dim has a wgmma layout, every operand
// row stride is 16-byte aligned (TMA's rule; the matcher already requires it, the rule keeps it
// explicit) and the TMA maps of K and V have at most 5 dims (`kv_map_rank`: 2 + K's batch dims
// that do not broadcast), and the attention does not split its keys (`split`: flash-decoding
// runs on the mma.sync kernel, sm_90 included); mma.sync otherwise. `force` is KILN_SCHEDULE
// attention.wgmma: 0 or 1 the rule, 2 mma.sync.
AttentionKernel choose_attention_kernel(int sm, bool arch_specific, int64_t head_dim,
                                        bool rows_16b_aligned, int kv_map_rank, int force,
                                        bool split = false);

}  // namespace kiln
