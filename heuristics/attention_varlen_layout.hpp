// The layout of the ragged-batch attention kernel (attention_varlen,
// codegen/emit_attention_varlen.cpp over codegen/device/kiln_attention.cuh): which kernel runs
// it, query rows per CTA and warps, the key block and the shared memory. Pure functions, tested
// on the CPU.
#pragma once

#include <cstdint>
#include <string>

#include "heuristics/attention_layout.hpp"

namespace kiln {

struct AttentionVarlenProblem {
  int64_t head_dim = 0;    // D of q and k
  int64_t v_head_dim = 0;  // Dv of v and the output
  bool half = true;        // q, k, v are f16 or bf16
  int sm = 90;
  // The mean query length of a sequence when the token count and the batch are static (Tq / B),
  // else 0 (unknown: sized for long sequences).
  int64_t mean_q_len = 0;
};

enum class AttentionVarlenPath {
  MmaSync,  // KcAttention::run a CTA per (query block of a sequence, head)
  None,     // no kernel takes the problem: `why` says what is missing
};

struct AttentionVarlenLayout {
  AttentionVarlenPath path = AttentionVarlenPath::None;
  std::string why;       // path None: the missing condition, for the user error
  AttentionLayout tile;  // head dim padding, key block, Q in registers; warps and query rows
                         // as chosen here, shared memory for them
};

// The rule: the mma.sync kernel (sm_80+, f16 / bf16, D == Dv a multiple of 8 up to 256; the
// wgmma kernel's TMA boxes would need a descriptor per sequence, so sm_90 runs mma.sync too).
// Query rows per CTA follow the mean sequence length: a CTA's rows past its sequence's end are
// idle, so short sequences (a mean up to 16 or 32 queries: decode steps, chat turns) take 1 or 2
// warps of 16 rows instead of 4; unknown means take 4 (the fixed-length kernel's 64 rows).
AttentionVarlenLayout choose_attention_varlen_layout(const AttentionVarlenProblem& p);

}  // namespace kiln
