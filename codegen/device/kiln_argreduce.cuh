// argmax / argmin pairs (value, index) for codegen/emit_argreduce.cpp, after kiln_prelude.cuh.
// The order is onnxruntime's sequential scan made associative: a NaN at index 0 beats every pair
// (the scan's first element stays the best), any other NaN loses to every number, equal values
// go to the smaller index (the larger with select_last_index). Index -1 marks an empty pair.
// Guarded, not `#pragma once`: several kernels may be concatenated into one NVRTC program.
#ifndef KILN_ARGREDUCE_CUH
#define KILN_ARGREDUCE_CUH

KILN_DEVICE bool kiln_arg_isnan(float v) {
  return v != v;
}
KILN_DEVICE bool kiln_arg_isnan(int) {
  return false;
}
KILN_DEVICE bool kiln_arg_isnan(long long) {
  return false;
}

// Whether (v, i) beats (w, j).
template <bool MAX, bool LAST, typename T>
KILN_DEVICE bool kiln_arg_better(T v, long long i, T w, long long j) {
  if (j < 0) return i >= 0;
  if (i < 0) return false;
  const bool nv = kiln_arg_isnan(v), nw = kiln_arg_isnan(w);
  if (nv || nw) {
    if (nv && i == 0) return true;
    if (nw && j == 0) return false;
    return nw && !nv;
  }
  if (v == w) return LAST ? i > j : i < j;
  return MAX ? v > w : v < w;
}

template <bool MAX, bool LAST, typename T>
KILN_DEVICE void kiln_arg_take(T& v, long long& i, T w, long long j) {
  if (kiln_arg_better<MAX, LAST>(w, j, v, i)) {
    v = w;
    i = j;
  }
}

// Every lane ends with the warp's best pair.
template <bool MAX, bool LAST, typename T>
KILN_DEVICE void kiln_warp_arg(T& v, long long& i) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const T w = __shfl_xor_sync(0xffffffffu, v, o);
    const long long j = __shfl_xor_sync(0xffffffffu, i, o);
    kiln_arg_take<MAX, LAST>(v, i, w, j);
  }
}

// The CTA's best pair in every thread of warp 0 (THREADS a multiple of 32, at most 1024;
// `sv`, `si` shared scratch of THREADS / 32 entries).
template <bool MAX, bool LAST, int THREADS, typename T>
KILN_DEVICE void kiln_block_arg(T& v, long long& i, T* sv, long long* si) {
  kiln_warp_arg<MAX, LAST>(v, i);
  if (THREADS == 32) return;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    sv[warp] = v;
    si[warp] = i;
  }
  __syncthreads();
  if (warp != 0) return;
  v = sv[lane < THREADS / 32 ? lane : 0];
  i = lane < THREADS / 32 ? si[lane] : -1;
  kiln_warp_arg<MAX, LAST>(v, i);
}

#endif  // KILN_ARGREDUCE_CUH
