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

}  // namespace kiln
