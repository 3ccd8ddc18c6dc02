// kiln fused attention (sm_80+): O = softmax(scale * Q K^T) V for one batch element and a block of
// 64 query rows, without the scores ever leaving the SM (the flash-attention scheme: key blocks
// of 64 stream through shared memory, a running row max and row sum rescale the output).
// Needs contraction_mma.cuh (cp.async, ldmatrix, mma.sync m16n8k16) before it.
//
// 4 warps, 16 query rows each. Per key block: S = Q K^T by mma (Q fragments stay in registers, K
// rows are the B operand as stored: [key][d]); the S accumulator of two adjacent 8-key tiles is
// exactly the A fragment of the next mma, so P = exp2(S - max) goes to O += P V in registers (V
// by transposed ldmatrix). Shared rows are padded by 8 elements: conflict-free ldmatrix.
#pragma once

template <int D, bool BF16>
struct KcAttention {
  static_assert(D % 32 == 0 && D >= 32 && D <= 128, "head dim: 32, 64, 96 or 128");
  static constexpr int BQ = 64, BK = 64, THREADS = 128;
  static constexpr int LD = D + 8;  // shared row stride, elements
  static constexpr int TILE = BK * LD;
  // Q, then two stages of (K, V).
  static constexpr int SMEM_BYTES = (BQ * LD + 4 * TILE) * 2;

  // Rows [r0, r0 + 64) of a [rows, D] matrix (row stride `rs` elements, rows past `rows` zero).
  __device__ static __forceinline__ void load_tile(unsigned short* s, const unsigned short* g,
                                                   long long rs, int r0, int rows) {
    constexpr int CHUNKS = 64 * D / 8;
#pragma unroll
    for (int i = 0; i < CHUNKS / THREADS; ++i) {
      const int id = threadIdx.x + i * THREADS;
      const int r = id / (D / 8), c = (id % (D / 8)) * 8;
      const bool v = r0 + r < rows;
      kc_cp_async16(kc_smem_u32(s + r * LD + c), v ? g + (long long)(r0 + r) * rs + c : g, v);
    }
  }

  __device__ static __forceinline__ unsigned pack(float lo, float hi) {
    return BF16 ? kc_pack_bf16(lo, hi) : kc_pack_f16(lo, hi);
  }

  // q, k, v, o: this batch element's matrices; `scale_log2` = scale * log2(e); q0 the first query.
  __device__ static __forceinline__ void run(unsigned short* smem, const unsigned short* q,
                                             long long q_rs, const unsigned short* k,
                                             long long k_rs, const unsigned short* v,
                                             long long v_rs, unsigned short* o, long long o_rs,
                                             int tq, int tk, int q0, float scale_log2) {
    unsigned short* sq = smem;
    unsigned short* sk = smem + BQ * LD;  // stage s: K at sk + 2 s TILE, V after it
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int nkb = (tk + BK - 1) / BK;

    load_tile(sq, q, q_rs, q0, tq);
    load_tile(sk, k, k_rs, 0, tk);
    load_tile(sk + TILE, v, v_rs, 0, tk);
    kc_cp_async_commit();

    unsigned qa[D / 16][4];
    float oacc[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; ++i) oacc[i][0] = oacc[i][1] = oacc[i][2] = oacc[i][3] = 0.f;
    float m0 = -KILN_INF, m1 = -KILN_INF, l0 = 0.f, l1 = 0.f;  // rows lane/4 and lane/4 + 8

    for (int kb = 0; kb < nkb; ++kb) {
      const int st = kb & 1;
      if (kb + 1 < nkb) {  // the next block streams in while this one is used
        unsigned short* nk = sk + 2 * (st ^ 1) * TILE;
        load_tile(nk, k, k_rs, (kb + 1) * BK, tk);
        load_tile(nk + TILE, v, v_rs, (kb + 1) * BK, tk);
        kc_cp_async_commit();
        kc_cp_async_wait<1>();
      } else {
        kc_cp_async_wait<0>();
      }
      __syncthreads();
      if (kb == 0) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
          kc_ldmatrix_x4(
              qa[kk], kc_smem_u32(sq + (warp * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8));
      }
      const unsigned short* ks = sk + 2 * st * TILE;
      const unsigned short* vs = ks + TILE;

      float s[BK / 8][4];
#pragma unroll
      for (int nt = 0; nt < BK / 8; ++nt) {
        s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
        for (int k2 = 0; k2 < D / 32; ++k2) {
          unsigned b[4];
          kc_ldmatrix_x4(b,
                         kc_smem_u32(ks + (nt * 8 + (lane & 7)) * LD + k2 * 32 + (lane >> 3) * 8));
          kc_mma16816<BF16>(s[nt], qa[2 * k2], b[0], b[1]);
          kc_mma16816<BF16>(s[nt], qa[2 * k2 + 1], b[2], b[3]);
        }
      }
      // Scaled logits (log2 domain), keys past tk masked; the block's row maxima.
      float mx0 = -KILN_INF, mx1 = -KILN_INF;
#pragma unroll
      for (int nt = 0; nt < BK / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = kb * BK + nt * 8 + (lane & 3) * 2 + (e & 1);
          const float x = key < tk ? s[nt][e] * scale_log2 : -KILN_INF;
          s[nt][e] = x;
          if (e < 2)
            mx0 = fmaxf(mx0, x);
          else
            mx1 = fmaxf(mx1, x);
        }
#pragma unroll
      for (int off = 1; off < 4; off <<= 1) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
      }
      // Every block has a valid key, so the new maxima are finite.
      const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
      const float a0 = exp2f(m0 - n0), a1 = exp2f(m1 - n1);
      m0 = n0;
      m1 = n1;
      float r0 = 0.f, r1 = 0.f;
#pragma unroll
      for (int nt = 0; nt < BK / 8; ++nt) {
        s[nt][0] = exp2f(s[nt][0] - n0);
        s[nt][1] = exp2f(s[nt][1] - n0);
        s[nt][2] = exp2f(s[nt][2] - n1);
        s[nt][3] = exp2f(s[nt][3] - n1);
        r0 += s[nt][0] + s[nt][1];
        r1 += s[nt][2] + s[nt][3];
      }
      l0 = l0 * a0 + r0;  // this thread's columns; the quad's sum is taken at the end
      l1 = l1 * a1 + r1;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        oacc[dt][0] *= a0;
        oacc[dt][1] *= a0;
        oacc[dt][2] *= a1;
        oacc[dt][3] *= a1;
      }
      // O += P V, 16 keys per mma.
#pragma unroll
      for (int j = 0; j < BK / 16; ++j) {
        unsigned pa[4] = {pack(s[2 * j][0], s[2 * j][1]), pack(s[2 * j][2], s[2 * j][3]),
                          pack(s[2 * j + 1][0], s[2 * j + 1][1]),
                          pack(s[2 * j + 1][2], s[2 * j + 1][3])};
#pragma unroll
        for (int dt = 0; dt < D / 8; dt += 2) {
          unsigned b[4];
          kc_ldmatrix_x4_trans(
              b, kc_smem_u32(vs + (j * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + dt * 8 +
                             (lane >> 4) * 8));
          kc_mma16816<BF16>(oacc[dt], pa, b[0], b[1]);
          kc_mma16816<BF16>(oacc[dt + 1], pa, b[2], b[3]);
        }
      }
      __syncthreads();  // the stage is refilled by the next iteration's loads
    }
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
      l0 += __shfl_xor_sync(0xffffffffu, l0, off);
      l1 += __shfl_xor_sync(0xffffffffu, l1, off);
    }
    const float i0 = 1.f / l0, i1 = 1.f / l1;
    const int row0 = q0 + warp * 16 + (lane >> 2), row1 = row0 + 8;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const int d = dt * 8 + (lane & 3) * 2;
      if (row0 < tq)
        *reinterpret_cast<unsigned*>(o + (long long)row0 * o_rs + d) =
            pack(oacc[dt][0] * i0, oacc[dt][1] * i0);
      if (row1 < tq)
        *reinterpret_cast<unsigned*>(o + (long long)row1 * o_rs + d) =
            pack(oacc[dt][2] * i1, oacc[dt][3] * i1);
    }
  }
};
