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
// Score is the generated score functor of kiln_attention_mask.cuh: the logits, the causal and
// sliding-window bands, the key blocks skipped.
// Rows with no visible key keep the row max at -inf: their exponentials and the final 1 / l are
// guarded, so they come out as zeros, never NaN.
//
// run: one CTA a query block over all its keys. run_split (flash-decoding, for few query blocks
// and many keys): grid.y CTAs a query block, each over BPS key blocks, combined through an f32
// workspace by the last to finish (needs the split-K helpers of contraction_mma.cuh).
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

  // The running state of one thread's rows (row0 = lane / 4 and row0 + 8 of its warp's 16):
  // the unnormalized output, the row maxima of the logits and the row sums.
  struct Acc {
    float o[DP / 8][4];
    float m0, m1, l0, l1;
  };

  // One key block kb (K rows at ks, V rows at vs in shared memory) into the warp's rows.
  __device__ static __forceinline__ void block(const unsigned short* sq, const unsigned short* ks,
                                               const unsigned short* vs,
                                               const unsigned (&qa)[QREG ? DP / 16 : 1][4], int kb,
                                               int row0, int tq, int tk, const Score& sc,
                                               Acc& acc) {
    constexpr float E = Score::NATURAL ? 1.4426950408889634f : 1.f;  // to the log2 domain
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
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
        kc_ldmatrix_x4(b, kc_smem_u32(ks + ((nt + (lane >> 4)) * 8 + (lane & 7)) * LD + kk * 16 +
                                      ((lane >> 3) & 1) * 8));
        kc_mma16816<BF16>(s[nt], a, b[0], b[1]);
        kc_mma16816<BF16>(s[nt + 1], a, b[2], b[3]);
      }
    }
    float mx0, mx1;
    kc_attn_logits<BK>(s, sc, kb, row0, tq, tk, mx0, mx1);
    const float n0 = fmaxf(acc.m0, mx0), n1 = fmaxf(acc.m1, mx1);
    // A row with no visible key so far keeps its max at -inf: subtract 0 instead.
    const float z0 = n0 == -KILN_INF ? 0.f : n0, z1 = n1 == -KILN_INF ? 0.f : n1;
    const float a0 = exp2f((acc.m0 - z0) * E), a1 = exp2f((acc.m1 - z1) * E);
    acc.m0 = n0;
    acc.m1 = n1;
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
    acc.l0 = acc.l0 * a0 + r0;  // this thread's columns; the quad's sum is taken at the end
    acc.l1 = acc.l1 * a1 + r1;
#pragma unroll
    for (int dt = 0; dt < DP / 8; ++dt) {
      acc.o[dt][0] *= a0;
      acc.o[dt][1] *= a0;
      acc.o[dt][2] *= a1;
      acc.o[dt][3] *= a1;
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
        kc_mma16816<BF16>(acc.o[dt], pa, b[0], b[1]);
        kc_mma16816<BF16>(acc.o[dt + 1], pa, b[2], b[3]);
      }
    }
  }

  // The online softmax over key blocks [kb0, kb1) of the query block starting at q0 (none when
  // kb0 >= kb1: the empty state); l ends summed over the quad. A warp whose 16 rows all lie past
  // tq (decode: 1 to 16 query rows in a 64-row block) only helps load the tiles.
  __device__ static __forceinline__ void attend(unsigned short* smem, const unsigned short* q,
                                                long long q_rs, const unsigned short* k,
                                                long long k_rs, const unsigned short* v,
                                                long long v_rs, int tq, int tk, int q0, int kb0,
                                                int kb1, const Score& sc, Acc& acc) {
    unsigned short* sq = smem;
    unsigned short* sk = smem + BQ * LD;  // stage s: K at sk + 2 s KTILE, V after it
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row0 = q0 + warp * 16 + (lane >> 2);
    const bool active = q0 + warp * 16 < tq;
#pragma unroll
    for (int i = 0; i < DP / 8; ++i) acc.o[i][0] = acc.o[i][1] = acc.o[i][2] = acc.o[i][3] = 0.f;
    acc.m0 = acc.m1 = -KILN_INF;
    acc.l0 = acc.l1 = 0.f;
    if (kb0 >= kb1) return;

    load_tile<BQ>(sq, q, q_rs, q0, tq);
    load_tile<BK>(sk, k, k_rs, kb0 * BK, tk);
    load_tile<BK>(sk + KTILE, v, v_rs, kb0 * BK, tk);
    kc_cp_async_commit();

    unsigned qa[QREG ? DP / 16 : 1][4];
    for (int kb = kb0; kb < kb1; ++kb) {
      const int st = (kb - kb0) & 1;
      if (kb + 1 < kb1) {  // the next block streams in while this one is used
        unsigned short* nk = sk + 2 * (st ^ 1) * KTILE;
        load_tile<BK>(nk, k, k_rs, (kb + 1) * BK, tk);
        load_tile<BK>(nk + KTILE, v, v_rs, (kb + 1) * BK, tk);
        kc_cp_async_commit();
        kc_cp_async_wait<1>();
      } else {
        kc_cp_async_wait<0>();
      }
      __syncthreads();
      if (active) {
        if (QREG && kb == kb0) {
#pragma unroll
          for (int kk = 0; kk < DP / 16; ++kk)
            kc_ldmatrix_x4(qa[QREG ? kk : 0], kc_smem_u32(sq + (warp * 16 + (lane & 15)) * LD +
                                                          kk * 16 + (lane >> 4) * 8));
        }
        const unsigned short* ks = sk + 2 * st * KTILE;
        block(sq, ks, ks + KTILE, qa, kb, row0, tq, tk, sc, acc);
      }
      __syncthreads();  // the stage is refilled by the next iteration's loads
    }
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
      acc.l0 += __shfl_xor_sync(0xffffffffu, acc.l0, off);
      acc.l1 += __shfl_xor_sync(0xffffffffu, acc.l1, off);
    }
  }

  // O = acc.o / l for the thread's rows below tq. l is 0 exactly when the row saw no key (a
  // fully masked row): its output is zeros.
  __device__ static __forceinline__ void store(unsigned short* o, long long o_rs, int tq, int row0,
                                               const Acc& acc) {
    const int lane = threadIdx.x & 31;
    const float i0 = acc.l0 > 0.f ? 1.f / acc.l0 : 0.f, i1 = acc.l1 > 0.f ? 1.f / acc.l1 : 0.f;
    const int row1 = row0 + 8;
#pragma unroll
    for (int dt = 0; dt < DP / 8; ++dt) {
      const int d = dt * 8 + (lane & 3) * 2;
      if (d >= D) continue;
      if (row0 < tq)
        *reinterpret_cast<unsigned*>(o + (long long)row0 * o_rs + d) =
            pack(acc.o[dt][0] * i0, acc.o[dt][1] * i0);
      if (row1 < tq)
        *reinterpret_cast<unsigned*>(o + (long long)row1 * o_rs + d) =
            pack(acc.o[dt][2] * i1, acc.o[dt][3] * i1);
    }
  }

  // q, k, v, o: this batch element's matrices; q0 the first query of the block.
  __device__ static __forceinline__ void run(unsigned short* smem, const unsigned short* q,
                                             long long q_rs, const unsigned short* k,
                                             long long k_rs, const unsigned short* v,
                                             long long v_rs, unsigned short* o, long long o_rs,
                                             int tq, int tk, int q0, const Score& sc) {
    int lo, hi;  // the key blocks the query block sees
    kc_attn_key_blocks<BQ, BK>(sc, q0, tq, tk, lo, hi);
    Acc acc;
    attend(smem, q, q_rs, k, k_rs, v, v_rs, tq, tk, q0, lo, hi, sc, acc);
    store(o, o_rs, tq, q0 + (threadIdx.x >> 5) * 16 + ((threadIdx.x & 31) >> 2), acc);
  }

  static constexpr int ROW = DP + 2;

  // Row r's records of every split (`part`, split_floats apart) combined into the thread's
  // columns of half H of the accumulator (elements 2H, 2H + 1 of each 8-column tile: row r0 for
  // H = 0, r0 + 8 for H = 1), which start at zero, and the row sum l.
  template <int H>
  __device__ static __forceinline__ void combine_row(const float* part, size_t split_floats,
                                                     unsigned splits, int r, int c0,
                                                     float (&o)[DP / 8][4], float& l) {
    constexpr float E = Score::NATURAL ? 1.4426950408889634f : 1.f;
    float mx = -KILN_INF;
    for (unsigned z = 0; z < splits; ++z)
      mx = fmaxf(mx, kc_ld_cg_f32(part + z * split_floats + r * ROW + DP));
    const float zm = mx == -KILN_INF ? 0.f : mx;
    for (unsigned z = 0; z < splits; ++z) {
      const float* p = part + z * split_floats + r * ROW;
      const float w = exp2f((kc_ld_cg_f32(p + DP) - zm) * E);
      l += w * kc_ld_cg_f32(p + DP + 1);
#pragma unroll
      for (int dt = 0; dt < DP / 8; ++dt) {
        o[dt][2 * H] += w * kc_ld_cg_f32(p + dt * 8 + c0);
        o[dt][2 * H + 1] += w * kc_ld_cg_f32(p + dt * 8 + c0 + 1);
      }
    }
  }

  // Flash-decoding (grid.y = the key splits of the query block blockIdx.x): this CTA attends
  // to key blocks [blockIdx.y BPS, (blockIdx.y + 1) BPS), those of them the block sees, and stores
  // its partial state to `ws`: `rows` records of ROW floats a split (the first `rows` rows of the
  // block, rows past tq neither written nor read), a record the row's DP unnormalized outputs,
  // its max and its sum. The last split CTA of the block to arrive (its counter in `cnt`, reset
  // to zero by that CTA, so the counters stay zero between launches) combines the partials in
  // split order: O = sum_z 2^(m_z - M) O_z / sum_z 2^(m_z - M) l_z with M = max_z m_z. A split
  // that saw no key (m_z = -inf, l_z = 0) weighs nothing; a row no split saw keeps M = -inf and
  // gives zeros.
  __device__ static __forceinline__ void run_split(
      unsigned short* smem, const unsigned short* q, long long q_rs, const unsigned short* k,
      long long k_rs, const unsigned short* v, long long v_rs, unsigned short* o, long long o_rs,
      int tq, int tk, int q0, const Score& sc, float* ws, unsigned* cnt, int bps, int rows) {
    const int tid = threadIdx.x, lane = tid & 31;
    const int r0 = (tid >> 5) * 16 + (lane >> 2), r1 = r0 + 8;  // rows in the block
    const bool ok0 = q0 + r0 < tq && r0 < rows, ok1 = q0 + r1 < tq && r1 < rows;
    int lo, hi;  // the key blocks the query block sees
    kc_attn_key_blocks<BQ, BK>(sc, q0, tq, tk, lo, hi);
    const int kb0 = blockIdx.y * bps;
    Acc acc;
    attend(smem, q, q_rs, k, k_rs, v, v_rs, tq, tk, q0, max(lo, kb0), min(hi, kb0 + bps), sc, acc);
    const unsigned tile = blockIdx.x, splits = gridDim.y;
    const size_t split_floats = (size_t)rows * ROW;
    float* part = ws + (size_t)tile * splits * split_floats;
    float* mine = part + blockIdx.y * split_floats;
    const int c0 = (lane & 3) * 2;  // this thread's first column of each 8-column tile
#pragma unroll
    for (int dt = 0; dt < DP / 8; ++dt) {
      if (ok0) {
        kc_st_cg_f32(mine + r0 * ROW + dt * 8 + c0, acc.o[dt][0]);
        kc_st_cg_f32(mine + r0 * ROW + dt * 8 + c0 + 1, acc.o[dt][1]);
      }
      if (ok1) {
        kc_st_cg_f32(mine + r1 * ROW + dt * 8 + c0, acc.o[dt][2]);
        kc_st_cg_f32(mine + r1 * ROW + dt * 8 + c0 + 1, acc.o[dt][3]);
      }
    }
    if ((lane & 3) == 0) {  // the quad holds the same max and sum
      if (ok0) {
        kc_st_cg_f32(mine + r0 * ROW + DP, acc.m0);
        kc_st_cg_f32(mine + r0 * ROW + DP + 1, acc.l0);
      }
      if (ok1) {
        kc_st_cg_f32(mine + r1 * ROW + DP, acc.m1);
        kc_st_cg_f32(mine + r1 * ROW + DP + 1, acc.l1);
      }
    }
    if (!kc_split_last(cnt, tile, splits, tid == 0)) return;
    if (!ok0) return;  // ok1 implies ok0: nothing of this thread's is read
#pragma unroll
    for (int i = 0; i < DP / 8; ++i) acc.o[i][0] = acc.o[i][1] = acc.o[i][2] = acc.o[i][3] = 0.f;
    acc.l0 = acc.l1 = 0.f;
    combine_row<0>(part, split_floats, splits, r0, c0, acc.o, acc.l0);
    if (ok1) combine_row<1>(part, split_floats, splits, r1, c0, acc.o, acc.l1);
    store(o, o_rs, tq, q0 + r0, acc);
  }
};
