// kiln contraction mainloop for sm_90a: wgmma.mma_async (m64nNk16, f16/bf16 in, f32 acc) with both
// operands read from shared memory through 128-byte-swizzled matrix descriptors, fed by a cp.async
// multistage pipeline that every thread takes part in (no warp specialization). Needs
// contraction_mma.cuh (kc_smem_u32, cp.async helpers, packing). The generated kernel supplies the
// operand loaders and kc_wgmma_n<BN>() (the asm with BN/2 accumulator operands).
//
// Shared tiles (BK = 64 16-bit elements = 128 bytes, one swizzle row):
//  - K-major operand (A always; B of conv / transposed matmul B): [rows][64], row r at r * 128
//    bytes, 16-byte chunk c stored at chunk c ^ (r % 8). Descriptor: SBO = 1024 (8-row groups),
//    LBO unused; k16 step = +32 bytes on the start address.
//  - N-major B (matmul, B row-major [K][N]): slabs of 64 columns, slab j at j * BK * 128 bytes,
//    within a slab row k at k * 128 bytes, chunk (n % 64) / 8 stored at chunk ^ (k % 8).
//    Descriptor: LBO = slab stride, SBO = 1024 (8-k groups); k16 step = +2048 bytes.
// Every stage base is 1024-byte aligned (the swizzle pattern repeats every 1024 bytes).
#pragma once

__device__ __forceinline__ void kc_wg_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void kc_wg_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void kc_wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Orders this thread's generic-proxy shared writes (cp.async, st.shared) before async-proxy reads
// (wgmma operands).
__device__ __forceinline__ void kc_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void kc_reg_fence(float& r) {
  asm volatile("" : "+f"(r)::"memory");
}
// Shared-memory matrix descriptor, 128-byte swizzle.
__device__ __forceinline__ unsigned long long kc_wg_desc(unsigned addr, unsigned lbo,
                                                         unsigned sbo) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) |
         ((unsigned long long)((lbo >> 4) & 0x3FFFu) << 16) |
         ((unsigned long long)((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}

// Block tile BM x BN x 64, BM / 64 warpgroups (each 64 rows x BN), STAGES buffers. B_KM: the B
// tile is K-major (else N-major). MMA: a functor (desc_a, desc_b, acc) issuing one m64nBNk16.
template <int BM, int BN, int STAGES, bool B_KM>
struct KcWgmma {
  static constexpr int BK = 64;
  static constexpr int WARPGROUPS = BM / 64;
  static constexpr int THREADS = WARPGROUPS * 128;
  static constexpr int MI = 1, NI = BN / 8;
  static constexpr int A_ELEMS = BM * BK, B_ELEMS = BN * BK, STAGE_ELEMS = A_ELEMS + B_ELEMS;
  static constexpr int SMEM_BYTES = STAGE_ELEMS * STAGES * 2 + 1024;  // + alignment slack
  static_assert(BM % 64 == 0 && BN % 64 == 0 && BN <= 256, "wgmma tile");
  static_assert(STAGES >= 3, "the pipeline keeps STAGES - 2 tiles in flight");

  __device__ static __forceinline__ int a_off(int m, int k) {
    return m * BK + ((((k >> 3) ^ m) & 7) << 3) + (k & 7);
  }
  __device__ static __forceinline__ int b_off(int n, int k) {
    if (B_KM) return n * BK + ((((k >> 3) ^ n) & 7) << 3) + (k & 7);
    return (n >> 6) * (BK * 64) + k * 64 + (((((n >> 3) & 7) ^ k) & 7) << 3) + (n & 7);
  }
  // The 1024-aligned start of the stage buffers inside dynamic shared memory.
  __device__ static __forceinline__ unsigned short* aligned(unsigned short* smem) {
    const unsigned a = kc_smem_u32(smem);
    return smem + (((a + 1023u) & ~1023u) - a) / 2;
  }

  template <class LA, class LB, class MMA>
  __device__ static __forceinline__ void mainloop(unsigned short* smem, LA& load_a, LB& load_b,
                                                  MMA& mma, int kt0, int kt1,
                                                  float (&acc)[1][NI][4]) {
    const int wg = threadIdx.x >> 7;
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[0][ni][e] = 0.f;
    const int nt = kt1 - kt0;
#pragma unroll
    for (int s = 0; s < STAGES - 2; ++s) {
      if (s < nt) {
        load_a(smem + s * STAGE_ELEMS, kt0 + s);
        load_b(smem + s * STAGE_ELEMS + A_ELEMS, kt0 + s);
      }
      kc_cp_async_commit();
    }
    const unsigned base = kc_smem_u32(smem);
    for (int t = 0; t < nt; ++t) {
      // Tile t has landed (this thread's copies); make every thread's copies visible to wgmma.
      kc_cp_async_wait<STAGES - 3>();
      kc_fence_proxy_async();
      __syncthreads();
      const unsigned sa = base + (t % STAGES) * STAGE_ELEMS * 2 + wg * 64 * BK * 2;
      const unsigned sb = base + (t % STAGES) * STAGE_ELEMS * 2 + A_ELEMS * 2;
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) kc_reg_fence(acc[0][ni][e]);
      kc_wg_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        const unsigned long long da = kc_wg_desc(sa + kk * 32, 16, 1024);
        const unsigned long long db =
            B_KM ? kc_wg_desc(sb + kk * 32, 16, 1024) : kc_wg_desc(sb + kk * 2048, BK * 128, 1024);
        mma(da, db, acc);
      }
      kc_wg_commit();
      // While the tensor cores run, refill the buffer of tile t - 2: every warpgroup finished
      // reading it (wait_group 1 at the end of iteration t - 1, before the barrier above).
      const int nx = t + STAGES - 2;
      if (nx < nt) {
        const int st = nx % STAGES;
        load_a(smem + st * STAGE_ELEMS, kt0 + nx);
        load_b(smem + st * STAGE_ELEMS + A_ELEMS, kt0 + nx);
      }
      kc_cp_async_commit();
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) kc_reg_fence(acc[0][ni][e]);
      kc_wg_wait<1>();
    }
    kc_wg_wait<0>();
    kc_cp_async_wait<0>();
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) kc_reg_fence(acc[0][ni][e]);
  }
};
