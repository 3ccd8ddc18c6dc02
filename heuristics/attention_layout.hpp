// The layout of the fused attention kernel (codegen/emit_attention.cpp over
// codegen/device/kiln_attention.cuh): query rows per CTA, the key block, whether the Q
// fragments stay in registers, and the shared memory that makes. A pure function of the head
// dim, tested on the CPU.
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
  int consumers = 2;
  int query_rows = 128;  // 64 * consumers
  int key_rows = 128;
  int stages = 2;
  int threads = 384;   // consumers + the producer, 128 each
  int smem_bytes = 0;  // Q, stages x (K, V), the barriers, 1024 bytes of alignment slack
};

// Head dims with a wgmma kernel: 64 and 128 (whole 64-column swizzle slabs; the O accumulator
// of D = 128 and the S accumulator of 128 keys, 64 + 64 floats a thread, fit in the consumers'
// 240 registers). 128 keys a tile; three stages at D 64, two at D 128 (160 KB).
bool attention_wgmma_head_dim(int64_t head_dim);
AttentionWgmmaLayout choose_attention_wgmma_layout(int64_t head_dim);

enum class AttentionKernel { MmaSync, Wgmma };
// Which kernel runs a fused attention: wgmma where the target takes sm_90a instructions
// (`sm` 90 with arch-specific kernels allowed), the head dim has a wgmma layout, every operand
// row stride is 16-byte aligned (TMA's rule; the matcher already requires it, the rule keeps it
// explicit) and the TMA maps of K and V have at most 5 dims (`kv_map_rank`: 2 + K's batch dims
// that do not broadcast); mma.sync otherwise. `force` is KILN_SCHEDULE attention.wgmma: 0 or 1
// the rule, 2 mma.sync.
AttentionKernel choose_attention_kernel(int sm, bool arch_specific, int64_t head_dim,
                                        bool rows_16b_aligned, int kv_map_rank, int force);

}  // namespace kiln
