// kiln fused attention for sm_90a: O = softmax(scores(Q K^T)) V for one batch element and a block
// of BQ = 128 query rows, on wgmma. Needs contraction_mma.cuh (kc_smem_u32, packing),
// contraction_wgmma.cuh (wgmma fences and descriptors, mbarriers, TMA loads) and
// kiln_attention_mask.cuh (the score functor's bands and the masked logits) before it, and the
// generated MMA: MMA::s(da, db, acc) issues S's four k16 wgmma of one 64-column slab (both
// operands in shared memory, K K-major), MMA::o(a, db, acc) O's four k16 wgmma of 64 keys (P
// from registers, V N-major); codegen/contraction/wgmma_instruction.cpp writes the asm.
//
// Roles (one if / else, so setmaxnreg takes effect): warpgroups 0 and 1 are consumers, 64 query
// rows each; warpgroup 2 is the producer, whose first thread loads the Q block once and then
// K and V tiles of BK keys by TMA into a STAGES-deep ring, each tile completing its own mbarrier
// (full_k, full_v), and each stage's K and V released apart by the consumers' warps (empty_k,
// empty_v). Per key tile a consumer computes S = Q K^T (DP / 16 wgmma k steps), the logits
// through the score functor, the online softmax in exp2 on the accumulator fragments (the m64
// accumulator of a warp is the mma.sync m16n8 layout, so the rows and keys are those of
// kiln_attention.cuh), converts P to 16-bit in registers, where it is already the A fragment of
// the next product, and runs O += P V (BK / 16 k steps, A from registers). K and V of a stage
// are released apart, each once its product is done. (The two products software-pipelined
// within the warpgroup, FlashAttention-3's intra-warpgroup overlap, lost its A/B on the H200 at
// head dim 128: docs/PERFORMANCE.md, run 100.) Masked positions and padding keys
// are -inf before the max; rows with no visible key keep the max at -inf and end as zeros.
//
// Shared tiles: 128-byte swizzled slabs of 64 head columns, as TMA boxes of {64, rows} land them:
// Q is DP / 64 slabs of [BQ][64], each K and V tile DP / 64 slabs of [BK][64], DP the head dim
// D rounded up to 64: a box's columns past the maps' D arrive as zeros (TMA bounds), so the
// padding adds nothing to S or O, and O's padding columns are never stored. K is the K-major B
// of S (descriptor as KcWgmma's K-major B); V is the N-major B of O (slab stride BK * 128 bytes
// as LBO, as KcWgmma's N-major B). Rows past the tensor's end arrive as zeros (TMA bounds).
// The score functor's causal and sliding-window bands also bound the key tiles: tiles outside
// the block's visible keys are neither loaded nor computed.
#pragma once

// A box at (col, row, batch coordinates innermost first) of an R-dimensional map.
template <int R>
__device__ __forceinline__ void kc_attn_box(unsigned dst, const KcTmaDesc* m, int col, int row,
                                            const int (&b)[3], unsigned bar) {
  static_assert(R >= 2 && R <= 5, "attention maps have 2 to 5 dims");
  if constexpr (R == 2) kc_tma_load_2d(dst, m, col, row, bar);
  if constexpr (R == 3) kc_tma_load_3d(dst, m, col, row, b[0], bar);
  if constexpr (R == 4) kc_tma_load_4d(dst, m, col, row, b[0], b[1], bar);
  if constexpr (R == 5) kc_tma_load_5d(dst, m, col, row, b[0], b[1], b[2], bar);
}

template <int D, bool BF16, int BK, int STAGES, int QR, int KR, int VR, class Score, class MMA,
          bool PINGPONG>
struct KcAttentionWg {
  static_assert(D % 8 == 0 && D >= 64 && D <= 256, "wgmma attention: head dim 64 to 256");
  static_assert(BK % 64 == 0 && BK <= 256, "key tile: whole 64-key wgmma groups");
  static constexpr int CONSUMERS = 2, BQ = 64 * CONSUMERS, THREADS = 128 * (CONSUMERS + 1);
  static constexpr int DP = (D + 63) / 64 * 64;  // whole slabs; columns past D arrive as zeros
  static constexpr int SLABS = DP / 64;
  static constexpr int Q_ELEMS = BQ * DP, KV_ELEMS = BK * DP;
  static constexpr int TILES_BYTES = (Q_ELEMS + 2 * STAGES * KV_ELEMS) * 2;
  static constexpr int SMEM_BYTES = TILES_BYTES + 1024 + 8 * (4 * STAGES + 1);
  static constexpr int PRODUCER_REGS = 24, CONSUMER_REGS = 240;

  __device__ static __forceinline__ unsigned pack(float lo, float hi) {
    return BF16 ? kc_pack_bf16(lo, hi) : kc_pack_f16(lo, hi);
  }
  template <int N>
  __device__ static __forceinline__ void fence(float (&a)[1][N][4]) {
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) kc_reg_fence(a[0][i][e]);
  }

  // The first of the two query rows (row0, row0 + 8) a thread of consumer warpgroup `wg` holds.
  __device__ static __forceinline__ int first_row(int q0, int wg) {
    return q0 + wg * 64 + ((threadIdx.x >> 5) & 3) * 16 + ((threadIdx.x & 31) >> 2);
  }
  template <int N>
  __device__ static __forceinline__ void zero(float (&a)[1][N][4]) {
#pragma unroll
    for (int i = 0; i < N; ++i) a[0][i][0] = a[0][i][1] = a[0][i][2] = a[0][i][3] = 0.f;
  }
  // O rescaled to the new row maxima (a0: row lane/4, a1: row lane/4 + 8).
  __device__ static __forceinline__ void rescale(float (&oacc)[1][DP / 8][4], float a0, float a1) {
#pragma unroll
    for (int dt = 0; dt < DP / 8; ++dt) {
      oacc[0][dt][0] *= a0;
      oacc[0][dt][1] *= a0;
      oacc[0][dt][2] *= a1;
      oacc[0][dt][3] *= a1;
    }
  }

  // Barrier addresses: full_k[s], full_v[s], empty_k[s], empty_v[s], then the Q barrier.
  __device__ static __forceinline__ unsigned full_k(unsigned bars, int s) {
    return bars + 8 * s;
  }
  __device__ static __forceinline__ unsigned full_v(unsigned bars, int s) {
    return bars + 8 * (STAGES + s);
  }
  __device__ static __forceinline__ unsigned empty_k(unsigned bars, int s) {
    return bars + 8 * (2 * STAGES + s);
  }
  __device__ static __forceinline__ unsigned empty_v(unsigned bars, int s) {
    return bars + 8 * (3 * STAGES + s);
  }
  __device__ static __forceinline__ unsigned q_bar(unsigned bars) {
    return bars + 8 * 4 * STAGES;
  }
  // Stage s's K and V tiles in shared memory.
  __device__ static __forceinline__ unsigned k_tile(unsigned base, int s) {
    return base + Q_ELEMS * 2 + s * 2 * KV_ELEMS * 2;
  }
  __device__ static __forceinline__ unsigned v_tile(unsigned base, int s) {
    return k_tile(base, s) + KV_ELEMS * 2;
  }

  // The producer's thread: Q once, then every key tile's K and V as their stages free up.
  __device__ static __forceinline__ void produce(unsigned base, unsigned bars, const KcTmaDesc* qm,
                                                 const KcTmaDesc* km, const KcTmaDesc* vm,
                                                 const int (&qb)[3], const int (&kb)[3],
                                                 const int (&vb)[3], int q0, int kb0, int nkb) {
    const unsigned qbar = q_bar(bars);
    kc_mbar_arrive_expect_tx(qbar, Q_ELEMS * 2);
#pragma unroll
    for (int j = 0; j < SLABS; ++j) kc_attn_box<QR>(base + j * BQ * 128, qm, j * 64, q0, qb, qbar);
    for (int t = 0; t < nkb - kb0; ++t) {  // stage counter t, key tile kb0 + t
      const int s = t % STAGES;
      const unsigned freed = ((t / STAGES) - 1) & 1, sk = k_tile(base, s), sv = v_tile(base, s);
      if (t >= STAGES) kc_mbar_wait(empty_k(bars, s), freed);
      kc_mbar_arrive_expect_tx(full_k(bars, s), KV_ELEMS * 2);
#pragma unroll
      for (int j = 0; j < SLABS; ++j)
        kc_attn_box<KR>(sk + j * BK * 128, km, j * 64, (kb0 + t) * BK, kb, full_k(bars, s));
      if (t >= STAGES) kc_mbar_wait(empty_v(bars, s), freed);
      kc_mbar_arrive_expect_tx(full_v(bars, s), KV_ELEMS * 2);
#pragma unroll
      for (int j = 0; j < SLABS; ++j)
        kc_attn_box<VR>(sv + j * BK * 128, vm, j * 64, (kb0 + t) * BK, vb, full_v(bars, s));
    }
  }

  // Logits of key tile kb in place (masked: -inf), the new row maxima, the factors a0 / a1 that
  // rescale what came before, and the exponentials (in place) with this thread's row sums
  // added to l0 / l1 (the quad's sum is taken at the end).
  __device__ static __forceinline__ void softmax_tile(float (&s)[1][BK / 8][4], const Score& sc,
                                                      int kb, int row0, int tq, int tk, float& m0,
                                                      float& m1, float& l0, float& l1, float& a0,
                                                      float& a1) {
    constexpr float E = Score::NATURAL ? 1.4426950408889634f : 1.f;  // to the log2 domain
    float mx0, mx1;
    kc_attn_logits<BK>(s[0], sc, kb, row0, tq, tk, mx0, mx1);
    const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
    // A row with no visible key so far keeps its max at -inf: subtract 0 instead.
    const float z0 = n0 == -KILN_INF ? 0.f : n0 * E, z1 = n1 == -KILN_INF ? 0.f : n1 * E;
    a0 = exp2f(m0 * E - z0);
    a1 = exp2f(m1 * E - z1);
    m0 = n0;
    m1 = n1;
    float r0 = 0.f, r1 = 0.f;
#pragma unroll
    for (int nt = 0; nt < BK / 8; ++nt) {
      s[0][nt][0] = exp2f(fmaf(s[0][nt][0], E, -z0));
      s[0][nt][1] = exp2f(fmaf(s[0][nt][1], E, -z0));
      s[0][nt][2] = exp2f(fmaf(s[0][nt][2], E, -z1));
      s[0][nt][3] = exp2f(fmaf(s[0][nt][3], E, -z1));
      r0 += s[0][nt][0] + s[0][nt][1];
      r1 += s[0][nt][2] + s[0][nt][3];
    }
    l0 = l0 * a0 + r0;
    l1 = l1 * a1 + r1;
  }

  // S = Q K^T of the key tile in `sk` into sacc, issued and committed (not waited for).
  __device__ static __forceinline__ void issue_s(unsigned sq, unsigned sk,
                                                 float (&sacc)[1][BK / 8][4]) {
    zero(sacc);
    fence(sacc);
    kc_wg_fence();
#pragma unroll
    for (int j = 0; j < SLABS; ++j) {  // S += Q[:, 64 j ..] K[:, 64 j ..]^T
      unsigned long long da[4], db[4];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        da[kk] = kc_wg_desc(sq + j * BQ * 128 + kk * 32, 16, 1024);
        db[kk] = kc_wg_desc(sk + j * BK * 128 + kk * 32, 16, 1024);
      }
      MMA::s(da, db, sacc);
    }
    kc_wg_commit();
  }

  // O += P V of the key tile in `sv`, issued and committed (not waited for).
  __device__ static __forceinline__ void issue_o(const unsigned (&pa)[BK / 64][4][4], unsigned sv,
                                                 float (&oacc)[1][DP / 8][4]) {
    fence(oacc);
    kc_wg_fence();
#pragma unroll
    for (int c = 0; c < BK / 64; ++c) {  // O += P[:, 64 c ..] V[64 c .., :]
      unsigned long long db[4];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) db[kk] = kc_wg_desc(sv + (c * 4 + kk) * 2048, BK * 128, 1024);
      MMA::o(pa[c], db, oacc);
    }
    kc_wg_commit();
  }

  // P (the exponentials in sacc) as 16-bit A fragments of the 16-key steps.
  __device__ static __forceinline__ void to_p(const float (&sacc)[1][BK / 8][4],
                                              unsigned (&pa)[BK / 64][4][4]) {
#pragma unroll
    for (int j = 0; j < BK / 16; ++j) {
      pa[j / 4][j % 4][0] = pack(sacc[0][2 * j][0], sacc[0][2 * j][1]);
      pa[j / 4][j % 4][1] = pack(sacc[0][2 * j][2], sacc[0][2 * j][3]);
      pa[j / 4][j % 4][2] = pack(sacc[0][2 * j + 1][0], sacc[0][2 * j + 1][1]);
      pa[j / 4][j % 4][3] = pack(sacc[0][2 * j + 1][2], sacc[0][2 * j + 1][3]);
    }
  }

  // The stored output rows: O / l, the head dim's columns only (not the padding).
  __device__ static __forceinline__ void store(const float (&oacc)[1][DP / 8][4], float l0,
                                               float l1, unsigned short* o, long long o_rs,
                                               int row0, int tq) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
      l0 += __shfl_xor_sync(0xffffffffu, l0, off);
      l1 += __shfl_xor_sync(0xffffffffu, l1, off);
    }
    // l is 0 exactly when the row saw no key (a fully masked row): its output is zeros.
    const float i0 = l0 > 0.f ? 1.f / l0 : 0.f, i1 = l1 > 0.f ? 1.f / l1 : 0.f;
    const int row1 = row0 + 8;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const int d = dt * 8 + (lane & 3) * 2;
      if (row0 < tq)
        *reinterpret_cast<unsigned*>(o + (long long)row0 * o_rs + d) =
            pack(oacc[0][dt][0] * i0, oacc[0][dt][1] * i0);
      if (row1 < tq)
        *reinterpret_cast<unsigned*>(o + (long long)row1 * o_rs + d) =
            pack(oacc[0][dt][2] * i1, oacc[0][dt][3] * i1);
    }
  }

  // One consumer warpgroup `wg`, each tile's two products in turn: its 64 rows over every key
  // tile, then the output rows.
  __device__ static __forceinline__ void consume(unsigned base, unsigned bars, int wg,
                                                 unsigned short* o, long long o_rs, int tq, int tk,
                                                 int q0, int kb0, int nkb, const Score& sc) {
    const int lane = threadIdx.x & 31, row0 = first_row(q0, wg);
    const unsigned sq = base + wg * 64 * 128;  // this warpgroup's Q rows
    float oacc[1][DP / 8][4];
    zero(oacc);
    float m0 = -KILN_INF, m1 = -KILN_INF, l0 = 0.f, l1 = 0.f;  // rows lane/4 and lane/4 + 8
    kc_mbar_wait(q_bar(bars), 0);                              // the Q block
    for (int t = 0; t < nkb - kb0; ++t) {                      // stage counter t, key tile kb0 + t
      const int s = t % STAGES;
      const unsigned ph = (t / STAGES) & 1;
      float sacc[1][BK / 8][4];
      kc_mbar_wait(full_k(bars, s), ph);
      issue_s(sq, k_tile(base, s), sacc);
      kc_wg_wait<0>();
      fence(sacc);
      float a0, a1;
      softmax_tile(sacc, sc, kb0 + t, row0, tq, tk, m0, m1, l0, l1, a0, a1);
      rescale(oacc, a0, a1);
      unsigned pa[BK / 64][4][4];
      to_p(sacc, pa);
      kc_mbar_wait(full_v(bars, s), ph);
      issue_o(pa, v_tile(base, s), oacc);
      kc_wg_wait<0>();
      fence(oacc);
      if (lane == 0) {  // this warp is done with the stage
        kc_mbar_arrive(empty_k(bars, s));
        kc_mbar_arrive(empty_v(bars, s));
      }
    }
    store(oacc, l0, l1, o, o_rs, row0, tq);
  }

  // The two consumer warpgroups take turns on the tensor cores (FlashAttention-3's ping-pong):
  // a warpgroup issues its products only between bar.sync on its own named barrier and
  // bar.arrive on the other's, so one warpgroup's softmax runs while the other's products do.
  // Barriers 1 and 2 (0 is __syncthreads), each counting both warpgroups' 256 threads.
  // Immediate barrier ids: a register id makes ptxas reserve all 16.
  __device__ static __forceinline__ void turn_wait(int wg) {
    if (wg == 0)
      asm volatile("bar.sync 1, 256;\n" ::: "memory");
    else
      asm volatile("bar.sync 2, 256;\n" ::: "memory");
  }
  __device__ static __forceinline__ void turn_pass(int wg) {
    if (wg == 0)
      asm volatile("bar.arrive 2, 256;\n" ::: "memory");
    else
      asm volatile("bar.arrive 1, 256;\n" ::: "memory");
  }

  // One consumer warpgroup, software-pipelined and taking turns (KILN_SCHEDULE attention.pingpong
  // until its A/B): each turn issues tile t's S = Q K^T and tile t-1's O += P V; tile t's softmax
  // runs once its S is done, while the PV product (and the other warpgroup's turn) is on the
  // tensor cores. Turns: tile 0's S, tiles 1..n-1, the last tile's PV: n + 1 per warpgroup.
  // Warpgroup 1 passes the first turn to warpgroup 0 and does not pass after its last, so each
  // barrier sees as many arrivals as waits.
  __device__ static __forceinline__ void consume_pingpong(unsigned base, unsigned bars, int wg,
                                                          unsigned short* o, long long o_rs, int tq,
                                                          int tk, int q0, int kb0, int nkb,
                                                          const Score& sc) {
    const int lane = threadIdx.x & 31, row0 = first_row(q0, wg);
    const unsigned sq = base + wg * 64 * 128;  // this warpgroup's Q rows
    float oacc[1][DP / 8][4];
    zero(oacc);
    float m0 = -KILN_INF, m1 = -KILN_INF, l0 = 0.f, l1 = 0.f;  // rows lane/4 and lane/4 + 8
    const int n = nkb - kb0;                                   // stage counter t: key tile kb0 + t
    if (n > 0) {
      if (wg == 1) turn_pass(wg);
      kc_mbar_wait(q_bar(bars), 0);
      float sacc[1][BK / 8][4], a0, a1;
      unsigned pa[BK / 64][4][4];  // P of the tile before the current one
      turn_wait(wg);
      kc_mbar_wait(full_k(bars, 0), 0);
      issue_s(sq, k_tile(base, 0), sacc);
      turn_pass(wg);
      kc_wg_wait<0>();
      fence(sacc);
      if (lane == 0) kc_mbar_arrive(empty_k(bars, 0));
      softmax_tile(sacc, sc, kb0, row0, tq, tk, m0, m1, l0, l1, a0, a1);  // O is still zero
      to_p(sacc, pa);
      for (int t = 1; t < n; ++t) {
        const int s = t % STAGES, ps = (t - 1) % STAGES;
        turn_wait(wg);
        kc_mbar_wait(full_k(bars, s), (t / STAGES) & 1);
        issue_s(sq, k_tile(base, s), sacc);
        kc_mbar_wait(full_v(bars, ps), ((t - 1) / STAGES) & 1);
        issue_o(pa, v_tile(base, ps), oacc);
        turn_pass(wg);
        kc_wg_wait<1>();  // S of tile t (the older group) is done; PV of tile t-1 may still run
        fence(sacc);
        if (lane == 0) kc_mbar_arrive(empty_k(bars, s));  // this warp is done with K of stage s
        softmax_tile(sacc, sc, kb0 + t, row0, tq, tk, m0, m1, l0, l1, a0, a1);
        kc_wg_wait<0>();
        fence(oacc);
        if (lane == 0) kc_mbar_arrive(empty_v(bars, ps));
        rescale(oacc, a0, a1);  // what came before, to tile t's maxima
        to_p(sacc, pa);
      }
      const int ps = (n - 1) % STAGES;  // the last tile's PV
      turn_wait(wg);
      kc_mbar_wait(full_v(bars, ps), ((n - 1) / STAGES) & 1);
      issue_o(pa, v_tile(base, ps), oacc);
      if (wg == 0) turn_pass(wg);
      kc_wg_wait<0>();
      fence(oacc);
      if (lane == 0) kc_mbar_arrive(empty_v(bars, ps));
    }
    store(oacc, l0, l1, o, o_rs, row0, tq);
  }

  // qm, km, vm: TMA maps of Q, K, V ({D, rows, batch dims that do not broadcast}); qb, kb, vb:
  // this CTA's coordinates on those batch dims; o: this batch element's output rows.
  __device__ static __forceinline__ void run(unsigned short* smem, const KcTmaDesc* qm,
                                             const KcTmaDesc* km, const KcTmaDesc* vm,
                                             const int (&qb)[3], const int (&kb)[3],
                                             const int (&vb)[3], unsigned short* o, long long o_rs,
                                             int tq, int tk, int q0, const Score& sc) {
    const unsigned raw = kc_smem_u32(smem);
    const unsigned base = (raw + 1023u) & ~1023u;  // the swizzle pattern repeats every 1024 bytes
    const unsigned bars = base + TILES_BYTES;
    int kb0, nkb;  // the key tiles [kb0, nkb) this query block sees
    kc_attn_key_blocks<BQ, BK>(sc, q0, tq, tk, kb0, nkb);
    if (threadIdx.x == 0) {
      for (int s = 0; s < STAGES; ++s) {
        kc_mbar_init(full_k(bars, s), 1);
        kc_mbar_init(full_v(bars, s), 1);
        kc_mbar_init(empty_k(bars, s), CONSUMERS * 4);
        kc_mbar_init(empty_v(bars, s), CONSUMERS * 4);
      }
      kc_mbar_init(q_bar(bars), 1);
      kc_fence_proxy_async();  // the initialized barriers, visible to the TMA unit
    }
    __syncthreads();
    const int wg = threadIdx.x >> 7;
    if (wg == CONSUMERS) {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
      if (threadIdx.x == CONSUMERS * 128) produce(base, bars, qm, km, vm, qb, kb, vb, q0, kb0, nkb);
    } else {
      asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));
      if constexpr (PINGPONG)
        consume_pingpong(base, bars, wg, o, o_rs, tq, tk, q0, kb0, nkb, sc);
      else
        consume(base, bars, wg, o, o_rs, tq, tk, q0, kb0, nkb, sc);
    }
  }
};
