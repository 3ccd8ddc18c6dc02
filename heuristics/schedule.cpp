// Schedule heuristics for memory-bound kernels (see schedule.hpp).
#include "heuristics/schedule.hpp"

#include <algorithm>

namespace kiln {

PointwiseSchedule choose_pointwise(int max_elem_bytes, int sm) {
  PointwiseSchedule s;
  // One 16-byte access per dense tensor per thread; 256 threads keep enough bytes in flight per
  // SM on sm_80/sm_90 with 8+ resident CTAs.
  s.vec = std::max(1, 16 / std::max(1, max_elem_bytes));
  s.threads = 256;
  // Four vectors per thread for 16-bit data (64 bytes of each dense input in flight per
  // thread): half the CTAs of two (fewer CTA launches and wave tails on a streaming kernel), at a
  // moderate register cost (32 floats per dense input); f32 keeps two.
  s.vecs = s.vec > 4 ? 4 : (s.vec > 1 ? 2 : 1);
  return s;
}

RowSchedule choose_rownorm(int64_t row_len, int max_elem_bytes, bool contiguous, int sm) {
  RowSchedule s;
  int vec = contiguous ? std::max(1, 16 / std::max(1, max_elem_bytes)) : 1;
  if (row_len < 0) {
    s.registers = false;
    s.threads = 256;
    s.vec = 1;
    return s;
  }
  if (row_len % vec != 0) vec = 1;
  s.vec = vec;
  int64_t nvec = (row_len + vec - 1) / vec;
  if (row_len <= 1024) {
    // One warp per row; 4 rows per CTA (128 threads).
    s.warp_per_row = true;
    s.threads = 128;
    s.rows_per_cta = 4;
    s.vecs_per_thread = static_cast<int>((nvec + 31) / 32);
    return s;
  }
  // One CTA per row, each thread holding about four 16-byte vectors (4096 16-bit elements: one
  // warp-group of 128 threads, 32 elements each): four loads per input in flight per thread, and
  // the block reduction spans few warps (a cheaper barrier).
  int64_t t = 128;
  while (t < 1024 && t * 4 < nvec) t *= 2;
  s.threads = static_cast<int>(t);
  s.vecs_per_thread = static_cast<int>((nvec + t - 1) / t);
  if (s.vecs_per_thread * s.vec > 64) {
    // Too many registers per thread: stream the row in passes instead (served from L1/L2).
    s.registers = false;
    s.threads = 1024;
    s.vec = 1;
    s.vecs_per_thread = 1;
  }
  return s;
}

ReduceSchedule choose_reduction(int64_t reduce_len, bool inner, int sm) {
  ReduceSchedule s;
  s.inner = inner;
  if (!inner) {
    // A thread per output element, looping over the reduced dims (adjacent threads read adjacent
    // addresses).
    s.threads = 256;
    s.warp_per_output = false;
    s.outputs_per_cta = 256;
    return s;
  }
  if (reduce_len >= 0 && reduce_len <= 4096) {
    s.warp_per_output = true;
    s.threads = 256;
    s.outputs_per_cta = 8;
  } else {
    s.warp_per_output = false;
    s.threads = 512;
    s.outputs_per_cta = 1;
  }
  return s;
}

ChannelNormSchedule choose_channelnorm(int64_t group_elems, bool contiguous, int vec_elems,
                                       int sm) {
  ChannelNormSchedule s;
  s.threads = group_elems >= 0 && group_elems < 4096 ? 128 : 512;
  s.vec = contiguous ? vec_elems : 1;
  return s;
}

}  // namespace kiln
