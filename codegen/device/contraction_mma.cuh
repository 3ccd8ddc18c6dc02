// kiln contraction tensor-core mainloop (sm_80+): cp.async multistage global->shared pipeline,
// XOR-swizzled shared tiles, ldmatrix fragments and mma.sync m16n8k16 (f16/bf16 in, f32 acc).
// The generated kernel supplies the operand loaders (implicit-GEMM im2col or matmul addressing)
// and the epilogue; this file owns the shared-memory layout and the math.
#pragma once

__device__ __forceinline__ void kc_ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void kc_ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
template <bool BF16>
__device__ __forceinline__ void kc_mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                            unsigned b1) {
  if (BF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}
// Packs two f32 values into a 32-bit pair of f16 / bf16 (low half = first).
__device__ __forceinline__ unsigned kc_pack_f16(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ unsigned kc_pack_bf16(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// Swizzled tile of `ROWS` rows x `COLS` 16-bit elements, COLS contiguous: the 16-byte chunk index
// within a row is XORed with a function of the row so that the 8 row addresses of one ldmatrix
// (8 consecutive rows, same logical chunk) hit 8 distinct bank groups.
template <int COLS>
__device__ __forceinline__ int kc_swz_off(int row, int col) {
  constexpr int CPR = COLS / 8 < 8 ? COLS / 8 : 8;  // chunks that the swizzle permutes
  constexpr int RDIV = 8 / CPR;
  return row * COLS + ((((col >> 3) ^ ((row / RDIV) % CPR))) << 3) + (col & 7);
}

// Block tile BM x BN x BK, warp tile WM x WN, STAGES-deep pipeline. A_KM: the A tile is stored
// K-contiguous ([BM][BK]) else M-contiguous ([BK][BM]); B_KM likewise ([BN][BK] or [BK][BN]).
template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool A_KM, bool B_KM, bool BF16>
struct KcGemm {
  static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
  static constexpr int THREADS = WARPS_M * WARPS_N * 32;
  static constexpr int MI = WM / 16, NI = WN / 8;
  static constexpr int A_ELEMS = BM * BK, B_ELEMS = BN * BK, STAGE_ELEMS = A_ELEMS + B_ELEMS;
  static constexpr int SMEM_BYTES = STAGE_ELEMS * STAGES * 2;
  static_assert(NI % 2 == 0, "warp tile N must be a multiple of 16");
  static_assert(BK % 16 == 0, "BK must be a multiple of 16");

  // Element offset of logical (mn, k) within the A / B buffer of one stage.
  __device__ static __forceinline__ int a_off(int m, int k) {
    return A_KM ? kc_swz_off<BK>(m, k) : kc_swz_off<BM>(k, m);
  }
  __device__ static __forceinline__ int b_off(int n, int k) {
    return B_KM ? kc_swz_off<BK>(n, k) : kc_swz_off<BN>(k, n);
  }

  __device__ static __forceinline__ void compute(const unsigned short* sa, const unsigned short* sb,
                                                 float (&acc)[MI][NI][4], int wm, int wn,
                                                 int lane) {
    const int j = lane >> 3, i8 = lane & 7;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned a[MI][4];
      unsigned b[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const int m0 = wm * WM + mi * 16;
        if (A_KM) {
          kc_ldmatrix_x4(a[mi], kc_smem_u32(sa + a_off(m0 + (j & 1) * 8 + i8, kk + (j >> 1) * 8)));
        } else {
          kc_ldmatrix_x4_trans(a[mi],
                               kc_smem_u32(sa + a_off(m0 + (j & 1) * 8, kk + (j >> 1) * 8 + i8)));
        }
      }
#pragma unroll
      for (int ni = 0; ni < NI; ni += 2) {
        const int n0 = wn * WN + ni * 8;
        unsigned r[4];
        if (B_KM) {
          kc_ldmatrix_x4(r, kc_smem_u32(sb + b_off(n0 + (j >> 1) * 8 + i8, kk + (j & 1) * 8)));
        } else {
          kc_ldmatrix_x4_trans(r,
                               kc_smem_u32(sb + b_off(n0 + (j >> 1) * 8, kk + (j & 1) * 8 + i8)));
        }
        b[ni][0] = r[0];
        b[ni][1] = r[1];
        b[ni + 1][0] = r[2];
        b[ni + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) kc_mma16816<BF16>(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
    }
  }

  // The multistage pipeline over k tiles [kt0, kt1). load_a(buf, kt) / load_b(buf, kt) issue the
  // cp.async (or synchronous st.shared) copies of k tile `kt` into one stage's A / B buffer.
  template <class LA, class LB>
  __device__ static __forceinline__ void mainloop(unsigned short* smem, LA& load_a, LB& load_b,
                                                  int kt0, int kt1, float (&acc)[MI][NI][4]) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wm = warp % WARPS_M, wn = warp / WARPS_M;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.f;
    const int nt = kt1 - kt0;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < nt) {
        load_a(smem + s * STAGE_ELEMS, kt0 + s);
        load_b(smem + s * STAGE_ELEMS + A_ELEMS, kt0 + s);
      }
      kc_cp_async_commit();
    }
    for (int t = 0; t < nt; ++t) {
      kc_cp_async_wait<STAGES - 2>();
      __syncthreads();
      const int nx = t + STAGES - 1;
      if (nx < nt) {
        const int st = nx % STAGES;
        load_a(smem + st * STAGE_ELEMS, kt0 + nx);
        load_b(smem + st * STAGE_ELEMS + A_ELEMS, kt0 + nx);
      }
      kc_cp_async_commit();
      const int cs = t % STAGES;
      compute(smem + cs * STAGE_ELEMS, smem + cs * STAGE_ELEMS + A_ELEMS, acc, wm, wn, lane);
    }
    kc_cp_async_wait<0>();
  }
};

// 16-byte store of four 32-bit words to shared memory (the synchronous loader path).
__device__ __forceinline__ void kc_st_shared_v4(unsigned addr, unsigned a, unsigned b, unsigned c,
                                                unsigned d) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(a), "r"(b), "r"(c),
               "r"(d));
}
// 8-byte store of two f32 values (8-byte aligned).
__device__ __forceinline__ void kc_st_f32x2(float* p, float a, float b) {
  asm volatile("st.global.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b));
}

// 16-byte stores of eight f32 results as f16 / bf16 (16-byte aligned), and 2 x 16 bytes as f32.
__device__ __forceinline__ void kc_st_f16x8(unsigned short* p, const float* v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(kc_pack_f16(v[0], v[1])),
               "r"(kc_pack_f16(v[2], v[3])), "r"(kc_pack_f16(v[4], v[5])),
               "r"(kc_pack_f16(v[6], v[7])));
}
__device__ __forceinline__ void kc_st_bf16x8(unsigned short* p, const float* v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(kc_pack_bf16(v[0], v[1])),
               "r"(kc_pack_bf16(v[2], v[3])), "r"(kc_pack_bf16(v[4], v[5])),
               "r"(kc_pack_bf16(v[6], v[7])));
}
__device__ __forceinline__ void kc_st_f32x8(float* p, const float* v) {
  asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(v[0]), "f"(v[1]),
               "f"(v[2]), "f"(v[3]));
  asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p + 4), "f"(v[4]), "f"(v[5]),
               "f"(v[6]), "f"(v[7]));
}

// Split-K helpers: L2 (coherent) loads of partial sums written by other CTAs, the counter
// increment and a device-scope fence.
__device__ __forceinline__ float kc_ld_cg_f32(const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];\n" : "=f"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ void kc_st_cg_f32(float* p, float v) {
  asm volatile("st.global.cg.f32 [%0], %1;\n" ::"l"(p), "f"(v) : "memory");
}
__device__ __forceinline__ unsigned kc_atom_add_u32(unsigned* p, unsigned v) {
  unsigned r;
  asm volatile("atom.global.acq_rel.gpu.add.u32 %0, [%1], %2;\n"
               : "=r"(r)
               : "l"(p), "r"(v)
               : "memory");
  return r;
}
__device__ __forceinline__ void kc_fence_gpu() {
  asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
}

// Called by every thread of each of `splits` CTAs once its partial is stored: whether this CTA
// is the last of them to arrive at counter cnt[tile] (`leader`: the one thread that counts). That
// CTA resets the counter to zero, so the counters stay zero between launches, and sees every
// other CTA's partial.
__device__ __forceinline__ bool kc_split_last(unsigned* cnt, unsigned tile, unsigned splits,
                                              bool leader) {
  __shared__ unsigned kc_is_last;
  kc_fence_gpu();
  __syncthreads();
  if (leader) {
    const unsigned prev = kc_atom_add_u32(cnt + tile, 1u);
    kc_is_last = prev == splits - 1u;
    if (prev == splits - 1u) cnt[tile] = 0u;
  }
  __syncthreads();
  if (!kc_is_last) return false;
  kc_fence_gpu();
  return true;
}
