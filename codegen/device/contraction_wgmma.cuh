// kiln contraction mainloop for sm_90a: wgmma.mma_async (m64nNk16, f16/bf16 in, f32 acc) with both
// operands read from shared memory through 128-byte-swizzled matrix descriptors, fed by a cp.async
// multistage pipeline that every thread takes part in (no warp specialization). Needs
// contraction_mma.cuh (kc_smem_u32, cp.async helpers, packing). The generated kernel supplies the
// operand loaders and kc_wgmma4_n<BN>() (the asm with BN/2 accumulator operands).
//
// Shared tiles (BK = 64 16-bit elements = 128 bytes, one swizzle row):
//  - K-major operand (A always; B of conv / transposed matmul B): [rows][64], row r at r * 128
//    bytes, 16-byte chunk c stored at chunk c ^ (r % 8). Descriptor: SBO = 1024 (8-row groups),
//    LBO unused; k16 step = +32 bytes on the start address.
//  - N-major B (matmul, B row-major [K][N]): slabs of 64 columns, slab j at j * BK * 128 bytes,
//    within a slab row k at k * 128 bytes, chunk (n % 64) / 8 stored at chunk ^ (k % 8).
//    Descriptor: LBO = slab stride, SBO = 1024 (8-k groups); k16 step = +2048 bytes.
// Every stage base is 1024-byte aligned (the swizzle pattern repeats every 1024 bytes).
//
// Row-folded A (AQ > 0, TMA only): a conv whose filter row (S taps x C channels) is AQ 16-byte
// chunks of consecutive input pixels, with one output column per 16 bytes of input (C * stride_w
// = 8 16-bit values: the RGB stem padded to C = 4 at stride 2). The 64-wide k tile is 8 / AQ
// filter rows ("slots"). For each slot and each of the tile's BM / ABW output rows, TMA loads the
// input row's chunks ow0 .. ow0 + A_SUB_ROWS - 1 as A_SUB_ROWS rows of 16 bytes (no swizzle).
// Tile row m's k chunk q is then sub-row m + q: the K-major core matrices (8 rows x 16 bytes)
// overlap, and a descriptor with LBO = 16 (next chunk along k) and SBO = 128 (next 8 rows) reads
// the im2col operand straight from one copy of the input row.
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
// Shared-memory matrix descriptor, 128-byte swizzle (or none: `swizzle` false).
__device__ __forceinline__ unsigned long long kc_wg_desc(unsigned addr, unsigned lbo, unsigned sbo,
                                                         bool swizzle = true) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) |
         ((unsigned long long)((lbo >> 4) & 0x3FFFu) << 16) |
         ((unsigned long long)((sbo >> 4) & 0x3FFFu) << 32) | (swizzle ? 1ull << 62 : 0ull);
}

// Block tile BM x BN x 64, BM / 64 warpgroups (each 64 rows x BN), STAGES buffers. B_KM: the B
// tile is K-major (else N-major). MMA: a functor (desc_a[4], desc_b[4], acc) issuing the stage's
// four m64nBNk16 (one asm statement: NVRTC time grows with each statement's accumulator operands).
// AQ > 0: the row-folded A (above), ABW output columns per tile row.
template <int BM, int BN, int STAGES, bool B_KM, int AQ = 0, int ABW = 64>
struct KcWgmma {
  static constexpr int BK = 64;
  static constexpr int WARPGROUPS = BM / 64;
  static constexpr int THREADS = WARPGROUPS * 128;
  static constexpr int MI = 1, NI = BN / 8;
  // Row-folded A: A_SLOTS filter rows per k tile, A_BH output rows per tile, each slot and row
  // A_SUB_ROWS 16-byte rows (the last tile row's chunks included).
  static constexpr int A_SLOTS = AQ ? 8 / AQ : 1;
  static constexpr int A_BH = AQ ? BM / ABW : 1;
  static constexpr int A_SUB_ROWS = AQ ? (ABW + AQ - 1 + 7) / 8 * 8 : BM;
  static constexpr int A_LOAD_ELEMS = AQ ? A_SLOTS * A_BH * A_SUB_ROWS * 8 : BM * BK;
  // A's region keeps B 1024-byte aligned (its 128-byte swizzle).
  static constexpr int A_ELEMS = (A_LOAD_ELEMS + 511) / 512 * 512, B_ELEMS = BN * BK;
  static constexpr int STAGE_ELEMS = A_ELEMS + B_ELEMS;
  static constexpr int LOAD_BYTES = (A_LOAD_ELEMS + B_ELEMS) * 2;     // what TMA writes per stage
  static constexpr int SMEM_BYTES = STAGE_ELEMS * STAGES * 2 + 1024;  // + alignment slack
  static_assert(BM % 64 == 0 && BN % 64 == 0 && BN <= 256, "wgmma tile");
  static_assert(STAGES >= 3, "the pipeline keeps STAGES - 2 tiles in flight");
  static_assert(AQ == 0 || ((AQ == 2 || AQ == 4 || AQ == 8) && ABW % 64 == 0 && BM % ABW == 0),
                "row-folded A: 2, 4 or 8 chunks per filter row, whole warpgroups per output row");

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

  // Keeps the compiler from moving accumulator accesses across the asynchronous wgmma.
  __device__ static __forceinline__ void fence_acc(float (&acc)[1][NI][4]) {
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) kc_reg_fence(acc[0][ni][e]);
  }
  // The descriptor of warpgroup wg's A rows for k16 step kk of the stage whose A tile is at `sa`.
  __device__ static __forceinline__ unsigned long long a_desc(unsigned sa, int wg, int kk) {
    if (AQ == 0) return kc_wg_desc(sa + wg * 64 * BK * 2 + kk * 32, 16, 1024);
    // The step's two k chunks 2 kk, 2 kk + 1 lie in one slot (AQ even): chunks q, q + 1.
    const int slot = (2 * kk) / (AQ ? AQ : 1), q = (2 * kk) % (AQ ? AQ : 1);
    const int row = (wg * 64) / ABW, col = (wg * 64) % ABW;
    return kc_wg_desc(sa + ((slot * A_BH + row) * A_SUB_ROWS + col + q) * 16, 16, 128, false);
  }
  // Issues and commits the four k16 wgmma of one stage: warpgroup wg's A rows of the stage's A
  // tile at `sa`, the B tile at `sb` (shared-memory byte addresses).
  template <class MMA>
  __device__ static __forceinline__ void issue_tile(unsigned sa, int wg, unsigned sb, MMA& mma,
                                                    float (&acc)[1][NI][4]) {
    fence_acc(acc);
    kc_wg_fence();
    unsigned long long da[BK / 16], db[BK / 16];
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      da[kk] = a_desc(sa, wg, kk);
      db[kk] =
          B_KM ? kc_wg_desc(sb + kk * 32, 16, 1024) : kc_wg_desc(sb + kk * 2048, BK * 128, 1024);
    }
    mma(da, db, acc);
    kc_wg_commit();
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
      const unsigned sa = base + (t % STAGES) * STAGE_ELEMS * 2;
      const unsigned sb = sa + A_ELEMS * 2;
      issue_tile(sa, wg, sb, mma, acc);
      // While the tensor cores run, refill the buffer of tile t - 2: every warpgroup finished
      // reading it (wait_group 1 at the end of iteration t - 1, before the barrier above).
      const int nx = t + STAGES - 2;
      if (nx < nt) {
        const int st = nx % STAGES;
        load_a(smem + st * STAGE_ELEMS, kt0 + nx);
        load_b(smem + st * STAGE_ELEMS + A_ELEMS, kt0 + nx);
      }
      kc_cp_async_commit();
      fence_acc(acc);
      kc_wg_wait<1>();
    }
    kc_wg_wait<0>();
    kc_cp_async_wait<0>();
    fence_acc(acc);
  }
};

// ---- Warp-specialized variant: the last warpgroup is a producer that only issues the cp.async
// loads; the BM / 64 consumer warpgroups only wait and issue wgmma. Stage handoff through
// mbarriers in shared memory (after the stage buffers): full[s] completes when the producer's
// 128 threads' copies of stage s have landed (cp.async.mbarrier.arrive.noinc), empty[s] when
// every consumer warp's wgmma reading stage s has retired. No CTA barrier in the loop, so a slow
// load stalls only the stage it fills, and the address math of the im2col gather runs on warps
// that never hold accumulators.
__device__ __forceinline__ void kc_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void kc_mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Arrives on `bar` once all of this thread's earlier cp.async copies have completed.
__device__ __forceinline__ void kc_mbar_arrive_cp_async(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// Waits until the phase with parity `parity` of `bar` has completed.
__device__ __forceinline__ void kc_mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred done;\nKC_MBAR_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra KC_MBAR_WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// TMA (sm_90): a 128-byte CUtensorMap passed as a __grid_constant__ kernel parameter, and a 2-D
// tiled load of one box into shared memory that completes a transaction count on an mbarrier.
struct __align__(64) KcTmaDesc {
  unsigned long long v[16];
};
__device__ __forceinline__ void kc_mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// Box at (c0 = innermost coordinate, c1) of `map` into shared memory at `dst`.
__device__ __forceinline__ void kc_tma_load_2d(unsigned dst, const KcTmaDesc* map, int c0, int c1,
                                               unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// Boxes of 3-D and 5-D maps (innermost coordinate first): attention operands over their batch
// dims (kiln_attention_wgmma.cuh).
__device__ __forceinline__ void kc_tma_load_3d(unsigned dst, const KcTmaDesc* map, int c0, int c1,
                                               int c2, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void kc_tma_load_5d(unsigned dst, const KcTmaDesc* map, int c0, int c1,
                                               int c2, int c3, int c4, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3, %4, %5, %6}], [%7];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4),
      "r"(bar)
      : "memory");
}

// Box at (c0 = innermost, c1, c2, c3) of a 4-D `map` (an NHWC activation: channel, column, row,
// image); coordinates may be negative or past the end: those elements read as zero.
__device__ __forceinline__ void kc_tma_load_4d(unsigned dst, const KcTmaDesc* map, int c0, int c1,
                                               int c2, int c3, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}

// im2col load of an im2col-mode 4-D `map` (NHWC input of a conv): the map's pixels-per-column
// consecutive output positions, starting at the one whose filter window's top-left input pixel
// is (w, h) of image n (W fastest, then H, then N, through the map's bounding box), each the
// tap at (dw, dh) from its window's corner, channels c .. c + channels-per-pixel - 1. Taps in
// the padding and positions past the last image read as zero.
__device__ __forceinline__ void kc_tma_load_im2col_4d(unsigned dst, const KcTmaDesc* map, int c,
                                                      int w, int h, int n, unsigned short dw,
                                                      unsigned short dh, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], "
      "[%1, {%2, %3, %4, %5}], [%6], {%7, %8};\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c), "r"(w), "r"(h), "r"(n), "r"(bar),
      "h"(dw), "h"(dh)
      : "memory");
}

// Box at (c0 = innermost, c1) of `map` from shared memory at `src` to global memory (elements
// outside the tensor are not written); the thread's bulk group, waited by kc_tma_store_wait().
__device__ __forceinline__ void kc_tma_store_2d(const KcTmaDesc* map, int c0, int c1,
                                                unsigned src) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
          reinterpret_cast<unsigned long long>(map)),
      "r"(c0), "r"(c1), "r"(src)
      : "memory");
}
// Commits this thread's TMA stores and waits until they are complete.
__device__ __forceinline__ void kc_tma_store_wait() {
  asm volatile("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group 0;\n" ::: "memory");
}

// SYNC_STORES: some loader writes shared memory with plain stores (the scalar gather of an
// unaligned operand): each producer thread also arrives normally (release) after them.
// TMA: the loaders issue TMA box loads (`load(stage, kt, full_bar)`), from one producer thread
// that first arms the stage's barrier with the stage's byte count; otherwise every producer
// thread issues cp.async copies (`load(stage, kt)`).
template <int BM, int BN, int STAGES, bool B_KM, bool SYNC_STORES, bool TMA = false, int AQ = 0,
          int ABW = 64>
struct KcWgmmaWs {
  typedef KcWgmma<BM, BN, STAGES, B_KM, AQ, ABW> Tile;  // the same shared tiles and descriptors
  static constexpr int BK = 64;
  static constexpr int CONSUMERS = BM / 64;
  static constexpr int PRODUCER_THREADS = 128;
  static constexpr int THREADS = CONSUMERS * 128 + PRODUCER_THREADS;
  static constexpr int MI = 1, NI = BN / 8;
  static constexpr int A_ELEMS = Tile::A_ELEMS, STAGE_ELEMS = Tile::STAGE_ELEMS;
  static constexpr int A_SLOTS = Tile::A_SLOTS, A_BH = Tile::A_BH, A_SUB_ROWS = Tile::A_SUB_ROWS;
  static constexpr int SMEM_BYTES = STAGE_ELEMS * STAGES * 2 + 1024 + 2 * STAGES * 8;
  static_assert(STAGES >= 3, "warp-specialized pipeline depth");
  static_assert(AQ == 0 || TMA, "row-folded A arrives by TMA");
  static_assert(CONSUMERS <= 2,
                "one or two consumer warpgroups (640 threads leave too few registers)");
  // Two consumers with a 64 x 256 accumulator tile each (128 registers of it) and 384 threads
  // (168 registers each at launch): the producer hands registers to the consumers.
  static constexpr bool REBALANCE = CONSUMERS == 2 && BN == 256;
  static constexpr int PRODUCER_REGS = 152, CONSUMER_REGS = 176;

  __device__ static __forceinline__ int a_off(int m, int k) { return Tile::a_off(m, k); }
  __device__ static __forceinline__ int b_off(int n, int k) { return Tile::b_off(n, k); }
  __device__ static __forceinline__ unsigned short* aligned(unsigned short* smem) {
    return Tile::aligned(smem);
  }
  // The thread's index among the producer's threads (negative in consumers).
  __device__ static __forceinline__ int producer_tid() {
    return (int)threadIdx.x - CONSUMERS * 128;
  }

  // Returns false in the producer warpgroup (its accumulators are not results): the caller
  // returns before the epilogue.
  template <class LA, class LB, class MMA>
  __device__ static __forceinline__ bool mainloop(unsigned short* smem, LA& load_a, LB& load_b,
                                                  MMA& mma, int kt0, int kt1,
                                                  float (&acc)[1][NI][4]) {
    const unsigned base = kc_smem_u32(smem);
    const unsigned bars = base + STAGE_ELEMS * STAGES * 2;  // full[s] at +8 s, empty[s] after
    if (threadIdx.x == 0) {
      for (int s = 0; s < STAGES; ++s) {
        kc_mbar_init(bars + 8 * s, TMA ? 1 : PRODUCER_THREADS * (SYNC_STORES ? 2 : 1));
        kc_mbar_init(bars + 8 * (STAGES + s), CONSUMERS * 4);
      }
      kc_fence_proxy_async();  // the initialized barriers, visible to the TMA unit (async proxy)
    }
    __syncthreads();
    const int wg = threadIdx.x >> 7;
    const int nt = kt1 - kt0;
    if (wg == CONSUMERS) {
      if (REBALANCE) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
      if constexpr (TMA) {
        if (producer_tid() == 0) {
          for (int t = 0; t < nt; ++t) {
            const int s = t % STAGES;
            if (t >= STAGES) kc_mbar_wait(bars + 8 * (STAGES + s), ((t / STAGES) - 1) & 1);
            kc_mbar_arrive_expect_tx(bars + 8 * s, Tile::LOAD_BYTES);
            load_a(smem + s * STAGE_ELEMS, kt0 + t, bars + 8 * s);
            load_b(smem + s * STAGE_ELEMS + A_ELEMS, kt0 + t, bars + 8 * s);
          }
        }
      } else {
        for (int t = 0; t < nt; ++t) {
          const int s = t % STAGES;
          if (t >= STAGES) kc_mbar_wait(bars + 8 * (STAGES + s), ((t / STAGES) - 1) & 1);
          load_a(smem + s * STAGE_ELEMS, kt0 + t);
          load_b(smem + s * STAGE_ELEMS + A_ELEMS, kt0 + t);
          kc_mbar_arrive_cp_async(bars + 8 * s);
          if (SYNC_STORES) kc_mbar_arrive(bars + 8 * s);
        }
        kc_cp_async_wait<0>();
      }
      return false;
    }
    if (REBALANCE) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[0][ni][e] = 0.f;
    const bool lane0 = (threadIdx.x & 31) == 0;
    for (int t = 0; t < nt; ++t) {
      const int s = t % STAGES;
      kc_mbar_wait(bars + 8 * s, (t / STAGES) & 1);
      kc_fence_proxy_async();  // the producer's generic-proxy writes, before wgmma reads them
      const unsigned sa = base + s * STAGE_ELEMS * 2;
      const unsigned sb = sa + A_ELEMS * 2;
      Tile::issue_tile(sa, wg, sb, mma, acc);
      Tile::fence_acc(acc);
      // Tile t - 1's wgmma has retired: its stage goes back to the producer.
      kc_wg_wait<1>();
      if (t > 0 && lane0) kc_mbar_arrive(bars + 8 * (STAGES + (t - 1) % STAGES));
    }
    kc_wg_wait<0>();
    Tile::fence_acc(acc);
    return true;
  }
};
