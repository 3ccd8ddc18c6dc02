// kiln fused attention (sm_80+): O = softmax(scores(Q K^T)) V for one batch element and a block
// of BQ = 16 WARPS query rows, without the scores ever leaving the SM (the flash-attention
// scheme: key blocks of BK stream through shared memory, a running row max and row sum rescale
// the output). Needs contraction_mma.cuh (cp.async, ldmatrix, mma.sync m16n8k16) and
// kiln_attention_mask.cuh before it.
//
// Each warp owns 16 query rows. Per key block: S = Q K^T by mma (Q fragments in registers when
// QREG, else re-read from shared memory; K rows are the B operand as stored: [key][d]); the S
// accumulator of two adjacent 8-key tiles is exactly the A fragment of the next mma, so
// P = exp2(S - max) goes to O += P V in registers (V by transposed ldmatrix). The head dim is
// padded to DP (a multiple of 16) with zeros in shared memory, so any D that is a multiple of 8
// takes the same mma path. Shared rows are padded by 8 more elements: conflict-free ldmatrix.
//
// Score is the generated score functor of kiln_attention_mask.cuh (which comes before this
// file): the logits, the causal and sliding-window bands, the key blocks skipped.
// Rows with no visible key keep the row max at -inf: their exponentials and the final 1 / l are
// guarded, so they come out as zeros, never NaN.
#pragma once

template <int D, bool BF16, int WARPS, int BK, bool QREG, class Score>
struct KcAttention {
  static_assert(D % 8 == 0 && D >= 8 && D <= 256, "head dim: a multiple of 8 up to 256");
  static_assert(BK == 32 || BK == 64, "key block: 32 or 64");
  static constexpr int DP = (D + 15) / 16 * 16;  // the padded head dim
  static constexpr int BQ = 16 * WARPS, THREADS = 32 * WARPS;
  static constexpr int LD = DP + 8;  // shared row stride, elements
  static constexpr int KTILE = BK * LD;
  // Q, then two stages of (K, V).
  static constexpr int SMEM_BYTES = (BQ * LD + 4 * KTILE) * 2;

  // Rows [r0, r0 + R) of a [rows, D] matrix (row stride `rs` elements); rows past `rows` and
  // the padding columns [D, DP) zero.
  template <int R>
  __device__ static __forceinline__ void load_tile(unsigned short* s, const unsigned short* g,
                                                   long long rs, int r0, int rows) {
    constexpr int CPR = DP / 8, CHUNKS = R * CPR;
#pragma unroll
    for (int i = 0; i < (CHUNKS + THREADS - 1) / THREADS; ++i) {
      const int id = threadIdx.x + i * THREADS;
      if (CHUNKS % THREADS == 0 || id < CHUNKS) {
        const int r = id / CPR, c = (id % CPR) * 8;
        const bool v = r0 + r < rows && c < D;
        kc_cp_async16(kc_smem_u32(s + r * LD + c), v ? g + (long long)(r0 + r) * rs + c : g, v);
      }
    }
  }

  __device__ static __forceinline__ unsigned pack(float lo, float hi) {
    return BF16 ? kc_pack_bf16(lo, hi) : kc_pack_f16(lo, hi);
  }

  // q, k, v, o: this batch element's matrices; q0 the first query of the block.
  __device__ static __forceinline__ void run(unsigned short* smem, const unsigned short* q,
                                             long long q_rs, const unsigned short* k,
                                             long long k_rs, const unsigned short* v,
                                             long long v_rs, unsigned short* o, long long o_rs,
                                             int tq, int tk, int q0, const Score& sc) {
    constexpr float E = Score::NATURAL ? 1.4426950408889634f : 1.f;  // to the log2 domain
    unsigned short* sq = smem;
    unsigned short* sk = smem + BQ * LD;  // stage s: K at sk + 2 s KTILE, V after it
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int kb0, nkb;  // the key blocks [kb0, nkb) this query block sees
    kc_attn_key_blocks<BQ, BK>(sc, q0, tq, tk, kb0, nkb);
    const int row0 = q0 + warp * 16 + (lane >> 2);

    load_tile<BQ>(sq, q, q_rs, q0, tq);
    if (nkb > kb0) {
      load_tile<BK>(sk, k, k_rs, kb0 * BK, tk);
      load_tile<BK>(sk + KTILE, v, v_rs, kb0 * BK, tk);
    }
    kc_cp_async_commit();

    unsigned qa[QREG ? DP / 16 : 1][4];
    float oacc[DP / 8][4];
#pragma unroll
    for (int i = 0; i < DP / 8; ++i) oacc[i][0] = oacc[i][1] = oacc[i][2] = oacc[i][3] = 0.f;
    float m0 = -KILN_INF, m1 = -KILN_INF, l0 = 0.f, l1 = 0.f;  // rows lane/4 and lane/4 + 8

    for (int kb = kb0; kb < nkb; ++kb) {
      const int st = (kb - kb0) & 1;
      if (kb + 1 < nkb) {  // the next block streams in while this one is used
        unsigned short* nk = sk + 2 * (st ^ 1) * KTILE;
        load_tile<BK>(nk, k, k_rs, (kb + 1) * BK, tk);
        load_tile<BK>(nk + KTILE, v, v_rs, (kb + 1) * BK, tk);
        kc_cp_async_commit();
        kc_cp_async_wait<1>();
      } else {
        kc_cp_async_wait<0>();
      }
      __syncthreads();
      if (QREG && kb == kb0) {
#pragma unroll
        for (int kk = 0; kk < DP / 16; ++kk)
          kc_ldmatrix_x4(qa[QREG ? kk : 0], kc_smem_u32(sq + (warp * 16 + (lane & 15)) * LD +
                                                        kk * 16 + (lane >> 4) * 8));
      }
      const unsigned short* ks = sk + 2 * st * KTILE;
      const unsigned short* vs = ks + KTILE;

      float s[BK / 8][4];
#pragma unroll
      for (int nt = 0; nt < BK / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < DP / 16; ++kk) {
        unsigned a[4];
        if (QREG) {
#pragma unroll
          for (int i = 0; i < 4; ++i) a[i] = qa[QREG ? kk : 0][i];
        } else {
          kc_ldmatrix_x4(
              a, kc_smem_u32(sq + (warp * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8));
        }
#pragma unroll
        for (int nt = 0; nt < BK / 8; nt += 2) {  // two 8-key tiles per ldmatrix
          unsigned b[4];
          kc_ldmatrix_x4(b, kc_smem_u32(ks + ((nt + (lane >> 4)) * 8 + (lane & 7)) * LD +
                                        kk * 16 + ((lane >> 3) & 1) * 8));
          kc_mma16816<BF16>(s[nt], a, b[0], b[1]);
          kc_mma16816<BF16>(s[nt + 1], a, b[2], b[3]);
        }
      }
      float mx0, mx1;
      kc_attn_logits<BK>(s, sc, kb, row0, tq, tk, mx0, mx1);
      const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
      // A row with no visible key so far keeps its max at -inf: subtract 0 instead.
      const float z0 = n0 == -KILN_INF ? 0.f : n0, z1 = n1 == -KILN_INF ? 0.f : n1;
      const float a0 = exp2f((m0 - z0) * E), a1 = exp2f((m1 - z1) * E);
      m0 = n0;
      m1 = n1;
      float r0 = 0.f, r1 = 0.f;
#pragma unroll
      for (int nt = 0; nt < BK / 8; ++nt) {
        s[nt][0] = exp2f((s[nt][0] - z0) * E);
        s[nt][1] = exp2f((s[nt][1] - z0) * E);
        s[nt][2] = exp2f((s[nt][2] - z1) * E);
        s[nt][3] = exp2f((s[nt][3] - z1) * E);
        r0 += s[nt][0] + s[nt][1];
        r1 += s[nt][2] + s[nt][3];
      }
      l0 = l0 * a0 + r0;  // this thread's columns; the quad's sum is taken at the end
      l1 = l1 * a1 + r1;
#pragma unroll
      for (int dt = 0; dt < DP / 8; ++dt) {
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
        for (int dt = 0; dt < DP / 8; dt += 2) {
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
    if (nkb <= kb0) kc_cp_async_wait<0>();  // the Q load, issued but never waited for
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
      l0 += __shfl_xor_sync(0xffffffffu, l0, off);
      l1 += __shfl_xor_sync(0xffffffffu, l1, off);
    }
    // l is 0 exactly when the row saw no key (a fully masked row): its output is zeros.
    const float i0 = l0 > 0.f ? 1.f / l0 : 0.f, i1 = l1 > 0.f ? 1.f / l1 : 0.f;
    const int row1 = row0 + 8;
#pragma unroll
    for (int dt = 0; dt < DP / 8; ++dt) {
      const int d = dt * 8 + (lane & 3) * 2;
      if (d >= D) continue;
      if (row0 < tq)
        *reinterpret_cast<unsigned*>(o + (long long)row0 * o_rs + d) =
            pack(oacc[dt][0] * i0, oacc[dt][1] * i0);
      if (row1 < tq)
        *reinterpret_cast<unsigned*>(o + (long long)row1 * o_rs + d) =
            pack(oacc[dt][2] * i1, oacc[dt][3] * i1);
    }
  }
};
