// What both fused attention kernels (kiln_attention.cuh on mma.sync, kiln_attention_wgmma.cuh on
// wgmma) do alike with a block of scores: which keys a query row sees, which key blocks a block
// of query rows needs at all, and the masked logits with their row maxima.
//
// Score (generated per kernel, codegen/attention_scores.cpp) turns a raw score into the logit
// the softmax sees:
//   float operator()(float s, int row, int key) const  (row < tq, key < tk, visible)
//   static constexpr bool CAUSAL: keys past row + coff are masked;
//   static constexpr bool WINDOW: keys before row + wlo are masked (a sliding window);
//   static constexpr bool NATURAL: logits in the natural-log domain (else already times log2 e);
//   int coff, wlo: the band's offsets.
// Key blocks a whole query block cannot see are never loaded (kc_attn_key_blocks).
#pragma once

template <class Score>
__device__ __forceinline__ bool kc_attn_visible(const Score& sc, int row, int key, int tq, int tk) {
  return key < tk && row < tq && (!Score::CAUSAL || key <= row + sc.coff) &&
         (!Score::WINDOW || key >= row + sc.wlo);
}

// The key blocks [lo, hi) of BK keys that query rows [q0, q0 + BQ) see: all of them, cut above
// the last row's last causal key and below the first row's first key in the window.
template <int BQ, int BK, class Score>
__device__ __forceinline__ void kc_attn_key_blocks(const Score& sc, int q0, int tq, int tk, int& lo,
                                                   int& hi) {
  lo = 0;
  hi = (tk + BK - 1) / BK;
  if (Score::CAUSAL) {
    const int last = min(q0 + BQ, tq) - 1 + sc.coff;
    hi = last < 0 ? 0 : min(hi, last / BK + 1);
  }
  if (Score::WINDOW) {
    const int first = q0 + sc.wlo;
    lo = first <= 0 ? 0 : min(hi, first / BK);
  }
}

// The logits of key block kb in place (masked: -inf) for the rows of an m16n8 accumulator
// fragment (row0 and row0 + 8), and their maxima, reduced over the quad that shares the rows.
template <int BK, class Score>
__device__ __forceinline__ void kc_attn_logits(float (&s)[BK / 8][4], const Score& sc, int kb,
                                               int row0, int tq, int tk, float& mx0, float& mx1) {
  const int lane = threadIdx.x & 31;
  mx0 = mx1 = -KILN_INF;
#pragma unroll
  for (int nt = 0; nt < BK / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = kb * BK + nt * 8 + (lane & 3) * 2 + (e & 1);
      const int row = row0 + (e >> 1) * 8;
      const float x = kc_attn_visible(sc, row, key, tq, tk) ? sc(s[nt][e], row, key) : -KILN_INF;
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
}
