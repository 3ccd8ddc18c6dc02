// kiln split-K reduction (the contraction tensor-core kernels, grid.z = SPLITS splits of the k
// tiles): each split CTA stores its f32 partial tile of TILE = BM x BN values to the workspace
// (element i of thread t at i * THREADS + t, split z's tile after z - 1 others), then the last CTA
// of an output tile to arrive (one counter per tile, reset to zero by that CTA, so the counters
// stay zero between launches) sums the partials in split order into `acc`. Needs
// contraction_mma.cuh.
#pragma once

// True in the CTA that holds the sums (it runs the epilogue); the others return.
template <int SPLITS, int TILE, int THREADS, int MI, int NI>
__device__ __forceinline__ bool kc_split_k_reduce(float (&acc)[MI][NI][4], float* ws, unsigned* cnt,
                                                  int tid) {
  const unsigned tile = blockIdx.x + blockIdx.y * gridDim.x;
  float* part = ws + (size_t)tile * SPLITS * TILE;
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = (mi * NI + ni) * 4 + e;
        kc_st_cg_f32(part + (size_t)blockIdx.z * TILE + i * THREADS + tid, acc[mi][ni][e]);
      }
    }
  }
  if (!kc_split_last(cnt, tile, SPLITS, tid == 0)) return false;
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = (mi * NI + ni) * 4 + e;
        float sum = 0.f;
        for (int z = 0; z < SPLITS; ++z)
          sum += kc_ld_cg_f32(part + (size_t)z * TILE + i * THREADS + tid);
        acc[mi][ni][e] = sum;
      }
    }
  }
  return true;
}
