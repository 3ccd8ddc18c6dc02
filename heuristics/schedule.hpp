// Schedule choice for the memory-bound kernel families: vector width, threads per CTA, rows per
// CTA (warp-per-row vs CTA-per-row), from shape, dtype and arch, and the KILN_SCHEDULE overrides.
// Pure functions, tested on CPU. The channel norms' layout is heuristics/channelnorm_layout.hpp.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/types.hpp"

namespace kiln {

// Hand overrides of the rules below (KILN_SCHEDULE / EngineOptions::schedule), for measuring the
// alternatives on a device: "pointwise.vecs=2,rownorm.threads=256,channelnorm.slice_kb=40".
// 0 means "the rule decides". Part of the generated source, so each setting has its own cache
// entries. An override that a shape cannot take (e.g. more threads than a row has vectors) is
// clamped to what it can.
// channelnorm.algo values; a schedule a shape cannot take falls back to the next one of the rule
// (split, then cluster, then per-group).
enum : int { kChannelNormRule = 0, kChannelNormSplit, kChannelNormCluster, kChannelNormPerGroup };

struct ScheduleOverrides {
  int pointwise_vecs = 0;        // 16-byte vectors per thread, 1..8
  int pointwise_threads = 0;     // threads per CTA, 64..1024, a multiple of 32
  int rownorm_threads = 0;       // threads per row (CTA-per-row rows), a power of two 64..1024
  int rownorm_lanes = 0;         // lanes per row (rows of a warp or less), a power of two 1..32
  int channelnorm_slice_kb = 0;  // cluster groupnorm: shared-memory slice per CTA, 8..200 KiB
  int channelnorm_cluster = 0;   // cluster groupnorm: CTAs per cluster, 1, 2, 4 or 8
  int channelnorm_cb = 0;        // cluster groupnorm: channels per cluster (divides C)
  int channelnorm_algo = 0;      // kChannelNorm*: split, cluster or pergroup (by name)
  int channelnorm_vecs = 0;      // split groupnorm: 16-byte vectors per thread, 1..16
  int channelnorm_threads = 0;   // split groupnorm: threads per CTA (rounded to the unit)
  int channelnorm_iters = 0;     // split groupnorm: chunks per CTA, 1..64
  int channelnorm_onewave = 0;   // cluster groupnorm in one wave, part from L2: 1 on, 2 off
  int window_vec = 0;            // pools: 8 channels (16 bytes) per thread: 1 on (the rule), 2 off
  int contraction_prefetch = 0;  // TMA kernels' residual tile prefetched: 1 on (the rule), 2 off
  int contraction_tmastore = 0;  // TMA kernels' output tile stored by TMA: 1 on (the rule), 2 off
  int contraction_im2col = 0;    // convs by im2col-mode TMA: 1 on (the rule), 2 off (pixel blocks)
  int contraction_rowfold = 0;   // row-folded TMA convs (the stem): 1 on (the rule), 2 off
  int attention_fused = 0;       // attention chains as one kernel: 1 on (the rule), 2 off
  int attention_wgmma = 0;       // the sm_90a wgmma attention kernel: 1 on (the rule), 2 mma.sync
  int attention_splits = 0;      // decode attention's key splits: 1 none, N (2..256) N splits
  int attention_pingpong = 0;    // wgmma attention consumers taking turns: 1 on, 2 off (the rule)
  bool empty() const;
};
// Parses "family.key=value,..." (the keys above); throws kiln::Error(User) naming a bad item and
// listing the valid keys.
ScheduleOverrides parse_schedule_overrides(const std::string& spec);
// The valid keys, for messages and docs.
const char* schedule_override_keys();
// KILN_SCHEDULE (env().schedule) parsed; a bad item is a user error naming the variable.
ScheduleOverrides env_schedule_overrides();

struct PointwiseSchedule {
  int vec = 1;        // elements per thread (one 16-byte vector of the widest dense dtype)
  int threads = 256;  // per CTA
  int vecs = 2;       // 16-byte vectors per thread (1 for 16-bit data), loads before math
};
// `max_elem_bytes`: the widest element among the densely indexed tensors.
PointwiseSchedule choose_pointwise(int max_elem_bytes, int sm, const ScheduleOverrides& o = {});

struct RowSchedule {
  bool registers = true;      // whole row held in registers (static row length); else looped passes
  bool warp_per_row = false;  // a warp or less per row (row_threads lanes), shuffle reductions
  int threads = 256;          // per CTA
  int rows_per_cta = 1;       // warp-per-row: rows per CTA (threads / row_threads)
  int vec = 1;                // elements per vector access
  int vecs_per_thread = 1;
  // Threads per row: `threads` (a CTA per row), else (warp_per_row) the lanes of one warp that
  // share a row, a power of two up to 32: short rows pack several to a warp.
  int row_threads = 256;
  // Registers: threads x vectors cover the row exactly, so no slot needs a bounds check.
  bool exact = false;
  // Exact, with a power-of-two tree of equal per-thread counts: layernorm merges its Welford
  // triples without a division or a branch.
  bool equal_counts = false;
};
// `row_len` < 0: symbolic. `contiguous`: rows are contiguous in memory (vector access possible).
RowSchedule choose_rownorm(int64_t row_len, int max_elem_bytes, bool contiguous, int sm,
                           const ScheduleOverrides& o = {});

struct ReduceSchedule {
  bool inner = true;  // the reduced dims include the innermost memory dim: a warp/CTA per output
  bool warp_per_output = true;
  int threads = 256;
  int outputs_per_cta = 8;
  // Outer reductions (`inner` false) over long reduced ranges: a CTA holds 32 adjacent outputs
  // (a warp across them, coalesced) by threads / 32 rows of the reduced range, combined in
  // shared memory; `splits` CTAs share each 32-output tile, the last to arrive summing their
  // partials (a workspace and a counter per tile). Off: one thread per output.
  bool columns = false;
  int splits = 1;
};
// `reduce_len`, `outputs` < 0: symbolic.
ReduceSchedule choose_reduction(int64_t reduce_len, int64_t outputs, bool inner, int sm);

}  // namespace kiln
