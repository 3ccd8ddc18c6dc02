// Schedule choice for the memory-bound kernel families: vector width, threads per CTA, rows per
// CTA (warp-per-row vs CTA-per-row), from shape, dtype and arch. Pure functions, tested on CPU.
#pragma once

#include <cstdint>

#include "kiln/types.hpp"

namespace kiln {

struct PointwiseSchedule {
  int vec = 1;        // elements per thread (one 16-byte vector of the widest dense dtype)
  int threads = 256;  // per CTA
  int vecs = 2;       // 16-byte vectors per thread (4 for 16-bit data), loads before math
};
// `max_elem_bytes`: the widest element among the densely indexed tensors.
PointwiseSchedule choose_pointwise(int max_elem_bytes, int sm);

struct RowSchedule {
  bool registers = true;  // whole row held in registers (static row length); else looped passes
  bool warp_per_row = false;
  int threads = 256;     // per CTA
  int rows_per_cta = 1;  // warp-per-row: warps per CTA
  int vec = 1;           // elements per vector access
  int vecs_per_thread = 1;
};
// `row_len` < 0: symbolic. `contiguous`: rows are contiguous in memory (vector access possible).
RowSchedule choose_rownorm(int64_t row_len, int max_elem_bytes, bool contiguous, int sm);

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
