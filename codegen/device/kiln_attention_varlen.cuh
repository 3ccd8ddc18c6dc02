// Ragged-batch attention (attention_varlen, codegen/emit_attention_varlen.cpp): which sequence
// and which block of its query rows a CTA of the flat grid runs, found from the cumulative
// offsets, so that one launch covers sequences of any lengths (KcAttention of kiln_attention.cuh
// then runs the block as one batch element of lq queries and lk keys).
//
// Sequence b owns CTAs [floor(cu_q[b] / BQ) + b, floor(cu_q[b + 1] / BQ) + b + 1): at least
// ceil(lq / BQ) of them, at most one more, and the starts grow with b, so a binary search over
// them finds a CTA's sequence without a table. The whole grid is floor(Tq / BQ) + B + 1 CTAs
// (the last one spare, so that even an empty batch has a CTA to check the offsets).
//
// Bad offsets never read out of bounds: every offset is clamped into [0, T] and a sequence's end
// to at least its start, so its rows lie inside the tensors. CTA (0, 0) checks them all and ORs
// KC_VARLEN_BAD_OFFSETS into the kernel's error word (the executor reports it, naming the node)
// when they do not start at 0, decrease somewhere or do not end at T.
#pragma once

#define KC_VARLEN_BAD_OFFSETS 2u

__device__ __forceinline__ long long kc_varlen_offset(const int* cu, int i, long long t) {
  const long long v = cu[i];
  return v < 0 ? 0 : v > t ? t : v;
}

struct KcVarlenBlock {
  long long q0, k0;  // the sequence's first query and key rows
  int lq, lk;        // its query and key counts
  int qb;            // the CTA's first query row within the sequence
};

// The block of CTA `cta`, or false when the CTA has no rows (past its sequence's last block,
// an empty sequence, the spare CTA). b sequences, tq query and tk key rows.
template <int BQ>
__device__ __forceinline__ bool kc_varlen_block(const int* cu_q, const int* cu_k, int b,
                                                long long tq, long long tk, long long cta,
                                                KcVarlenBlock& blk) {
  if (b <= 0) return false;
  int lo = 0, hi = b - 1;  // the last sequence whose first CTA is at or before `cta`
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (kc_varlen_offset(cu_q, mid, tq) / BQ + mid <= cta)
      lo = mid;
    else
      hi = mid - 1;
  }
  const long long q0 = kc_varlen_offset(cu_q, lo, tq), k0 = kc_varlen_offset(cu_k, lo, tk);
  const long long q1 = max(q0, kc_varlen_offset(cu_q, lo + 1, tq));
  const long long k1 = max(k0, kc_varlen_offset(cu_k, lo + 1, tk));
  const long long first = q0 / BQ + lo;
  const long long qb = (cta - first) * BQ;
  if (cta < first || qb >= q1 - q0) return false;
  blk.q0 = q0;
  blk.k0 = k0;
  blk.lq = (int)(q1 - q0);
  blk.lk = (int)(k1 - k0);
  blk.qb = (int)qb;
  return true;
}

// Whether b + 1 offsets start at 0, never decrease and end at t.
__device__ __forceinline__ bool kc_varlen_offsets_ok(const int* cu, int b, long long t) {
  bool ok = cu[0] == 0 && (long long)cu[b] == t;
  for (int i = 0; i < b; ++i) ok = ok && cu[i + 1] >= cu[i];
  return ok;
}

// CTA (0, 0)'s first thread checks both offset arrays (every CTA clamps what it reads anyway).
__device__ __forceinline__ void kc_varlen_check(const int* cu_q, const int* cu_k, int b,
                                                long long tq, long long tk, unsigned* err) {
  if (blockIdx.x != 0 || blockIdx.y != 0 || threadIdx.x != 0) return;
  if (!kc_varlen_offsets_ok(cu_q, b, tq) || !kc_varlen_offsets_ok(cu_k, b, tk))
    atomicOr(err, KC_VARLEN_BAD_OFFSETS);
}
