// kiln contraction epilogue tile (the sm_90a TMA kernels over GEMM rows): one BM x BN 16-bit tile
// in shared memory after the stages, as BN / 64 slabs of BM rows x 64 columns in the TMA boxes'
// layout (128-byte swizzle). The producer thread prefetches a residual operand's tile into it
// with the first k tile, so that the epilogue reads it there instead of waiting on DRAM after the
// mainloop; the epilogue writes the output tile into it, and one thread stores the whole tile
// with TMA (128-byte rows, asynchronous). Needs contraction_mma.cuh and contraction_wgmma.cuh.
#pragma once

// Loads the tile at rows m0.., columns n0.. of the 2-D `map` (boxes of BM x 64) into `tile`,
// completing on `bar`, which it arms with the tile's bytes.
template <int BM, int BN>
__device__ __forceinline__ void kc_tile_load(unsigned short* tile, const KcTmaDesc* map,
                                             long long m0, long long n0, unsigned bar) {
  kc_mbar_arrive_expect_tx(bar, BM * BN * 2);
#pragma unroll
  for (int j = 0; j < BN / 64; ++j)
    kc_tma_load_2d(kc_smem_u32(tile + j * BM * 64), map, (int)n0 + j * 64, (int)m0, bar);
}

// The tile's 32-bit word at row r, column c (even): slab c / 64, row r, 16-byte chunk
// (c % 64) / 8 swizzled by r % 8.
template <int BM>
__device__ __forceinline__ unsigned* kc_tile_word(unsigned short* tile, int r, int c) {
  const int cc = c & 63;
  return reinterpret_cast<unsigned*>(tile + (c >> 6) * (BM * 64) + r * 64 +
                                     ((((cc >> 3) ^ (r & 7)) << 3) | (cc & 7)));
}

// Stores the tile to rows m0.., columns n0.. of the 2-D `map` (rows past its end are clipped)
// once all THREADS epilogue threads (named barrier 1) have written their words, made visible to
// the async proxy: thread 0 issues the boxes and waits until they are complete.
template <int BM, int BN, int THREADS>
__device__ __forceinline__ void kc_tile_store(const KcTmaDesc* map, unsigned short* tile,
                                              long long m0, long long n0) {
  kc_fence_proxy_async();
  asm volatile("bar.sync 1, %0;" ::"n"(THREADS) : "memory");
  if (threadIdx.x == 0) {
#pragma unroll
    for (int j = 0; j < BN / 64; ++j)
      kc_tma_store_2d(map, (int)n0 + j * 64, (int)m0, kc_smem_u32(tile + j * BM * 64));
    kc_tma_store_wait();
  }
}
