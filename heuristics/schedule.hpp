// Schedule choice for the memory-bound kernel families: vector width, threads per CTA, rows per
// CTA (warp-per-row vs CTA-per-row), from shape, dtype and arch. Pure functions, tested on CPU.
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
  int channelnorm_slice_kb = 0;  // cluster groupnorm: shared-memory slice per CTA, 8..200 KiB
  int channelnorm_cluster = 0;   // cluster groupnorm: CTAs per cluster, 1, 2, 4 or 8
  int channelnorm_cb = 0;        // cluster groupnorm: channels per cluster (divides C)
  int channelnorm_algo = 0;      // kChannelNorm*: split, cluster or pergroup (by name)
  int channelnorm_vecs = 0;      // split groupnorm: 16-byte vectors per thread, 1..16
  int channelnorm_threads = 0;   // split groupnorm: threads per CTA (rounded to the unit)
  int channelnorm_hints = 0;     // split groupnorm L2 policies: 1 on (the rule), 2 off
  int channelnorm_iters = 0;     // split groupnorm: chunks per CTA, 1..64
  int channelnorm_onewave = 0;   // cluster groupnorm in one wave, part from L2: 1 on, 2 off
  int window_vec = 0;            // pools: 8 channels (16 bytes) per thread: 1 on (the rule), 2 off
  int contraction_prefetch = 0;  // TMA kernels' residual tile prefetched: 1 on (the rule), 2 off
  int contraction_tmastore = 0;  // TMA kernels' output tile stored by TMA: 1 on (the rule), 2 off
  int contraction_im2col = 0;    // convs by im2col-mode TMA: 1 on (the rule), 2 off (pixel blocks)
  int contraction_rowfold = 0;   // row-folded TMA convs (the stem): 1 on (the rule), 2 off
  int attention_fused = 0;       // attention chains as one kernel: 1 on (the rule), 2 off
  int stream_hints = 0;  // pointwise/rownorm row data: 1 streaming hints, 2 plain (the rule)
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
  int vec = 1;                // elements per thread (one 16-byte vector of the widest dense dtype)
  int threads = 256;          // per CTA
  int vecs = 2;               // 16-byte vectors per thread (1 for 16-bit data), loads before math
  bool stream_hints = false;  // dense data by L1::no_allocate loads and .cs stores (else plain)
};
// `max_elem_bytes`: the widest element among the densely indexed tensors.
PointwiseSchedule choose_pointwise(int max_elem_bytes, int sm, const ScheduleOverrides& o = {});

struct RowSchedule {
  bool registers = true;  // whole row held in registers (static row length); else looped passes
  bool warp_per_row = false;
  int threads = 256;     // per CTA
  int rows_per_cta = 1;  // warp-per-row: warps per CTA
  int vec = 1;           // elements per vector access
  int vecs_per_thread = 1;
  bool stream_hints = false;  // row data by L1::no_allocate loads and .cs stores (else plain)
};
// `row_len` < 0: symbolic. `contiguous`: rows are contiguous in memory (vector access possible).
RowSchedule choose_rownorm(int64_t row_len, int max_elem_bytes, bool contiguous, int sm,
                           const ScheduleOverrides& o = {});

struct ReduceSchedule {
  bool inner = true;  // the reduced dims include the innermost memory dim: a warp/CTA per output
  bool warp_per_output = true;
  int threads = 256;
  int outputs_per_cta = 8;
};
// `reduce_len` < 0: symbolic.
ReduceSchedule choose_reduction(int64_t reduce_len, bool inner, int sm);

struct ChannelNormSchedule {
  int threads = 512;  // per CTA; one CTA per (n, group)
  int vec = 1;        // contiguous NCHW groups: vector width
};
ChannelNormSchedule choose_channelnorm(int64_t group_elems, bool contiguous, int vec_elems, int sm);

// The split channel-norm schedule (codegen/emit_channelnorm.cpp): a statistics kernel and an
// apply kernel over each sample's S x C dense channels-last elements, split into `ctas` chunks
// of threads x vecs 16-byte vectors, one CTA each in both kernels.
struct ChannelNormSplit {
  bool ok = false;      // false: the shape does not fit (then the cluster or per-group path)
  int threads = 0;      // a multiple of C / gcd(C, vec): each thread's lanes keep fixed channels
  int vecs = 0;         // 16-byte vectors per thread (of each register-held input)
  int iters = 1;        // chunks of threads x vecs per CTA, the next loaded during the current
  int64_t ctas = 0;     // per sample
  int ctas_per_sm = 1;  // the occupancy the launch bounds ask registers for
  bool hints = true;    // L2 eviction policies: keep the input for the apply kernel's re-read
};
// `vector_inputs`: dense inputs held in registers (1 without a prologue).
ChannelNormSplit choose_channelnorm_split(int64_t channels, int64_t groups, int64_t spatial,
                                          int vec_elems, int vector_inputs, bool prologue, int sm,
                                          const ScheduleOverrides& o = {});

}  // namespace kiln
