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
struct ScheduleOverrides {
  int pointwise_vecs = 0;        // 16-byte vectors per thread, 1..8
  int pointwise_threads = 0;     // threads per CTA, 64..1024, a multiple of 32
  int rownorm_threads = 0;       // threads per row (CTA-per-row rows), a power of two 64..1024
  int channelnorm_slice_kb = 0;  // cluster groupnorm: shared-memory slice per CTA, 8..200 KiB
  int channelnorm_cluster = 0;   // cluster groupnorm: CTAs per cluster, 1, 2, 4 or 8
  int channelnorm_cb = 0;        // cluster groupnorm: channels per cluster (divides C)
  bool empty() const;
};
// Parses "family.key=value,..." (the keys above); throws kiln::Error(User) naming a bad item and
// listing the valid keys.
ScheduleOverrides parse_schedule_overrides(const std::string& spec);
// The valid keys, for messages and docs.
const char* schedule_override_keys();

struct PointwiseSchedule {
  int vec = 1;        // elements per thread (one 16-byte vector of the widest dense dtype)
  int threads = 256;  // per CTA
  int vecs = 2;       // 16-byte vectors per thread (4 for 16-bit data), loads before math
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

}  // namespace kiln
