// The CPU reference of attention_varlen (engine/ir/attention_ops.hpp) in f64: per sequence, per
// query head, per query row, the scores against the visible keys of its own sequence, their
// softmax and the weighted sum of V. Offsets that do not describe a partition of the tokens
// (negative, decreasing, not starting at 0 or not ending at the token count) are a located user
// error naming the node, the operand and the position, before anything is read.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "engine/base/check.hpp"
#include "engine/base/thread_pool.hpp"
#include "engine/ir/attention_ops.hpp"
#include "runtime/reference_ops.hpp"

namespace kiln::ref {
namespace {

// The B + 1 offsets of operand `op`, checked to run from 0 up to `tokens` without decreasing.
std::vector<int64_t> checked_offsets(const NodeArgs& a, int op, int64_t tokens) {
  const char* name = op == kVarlenCuQ ? "cu_seqlens_q" : "cu_seqlens_k";
  const char* axis = op == kVarlenCuQ ? "q" : "k";
  const int64_t n = a.in_shapes[op][0];
  std::vector<int64_t> cu(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) cu[i] = slot_int(a.in[op][i]);
  KILN_CHECK(cu[0] == 0, "{}: {}[0] is {}: the offsets must start at 0", a.where, name, cu[0]);
  for (int64_t i = 1; i < n; ++i)
    KILN_CHECK(cu[i] >= cu[i - 1], "{}: {}[{}] = {} is below {}[{}] = {}: offsets never decrease",
               a.where, name, i, cu[i], name, i - 1, cu[i - 1]);
  KILN_CHECK(cu[n - 1] == tokens,
             "{}: {}[{}] = {} must be the token count of {} ({}): every row belongs to a sequence",
             a.where, name, n - 1, cu[n - 1], axis, tokens);
  return cu;
}

}  // namespace

void attention_varlen(const NodeArgs& a) {
  const Dims &qs = a.in_shapes[kVarlenQ], &ks = a.in_shapes[kVarlenK], &vs = a.in_shapes[kVarlenV];
  const int64_t tq = qs[0], hq = qs[1], d = qs[2], tk = ks[0], hkv = ks[1], dv = vs[2];
  const std::vector<int64_t> cq = checked_offsets(a, kVarlenCuQ, tq);
  const std::vector<int64_t> ck = checked_offsets(a, kVarlenCuK, tk);
  const VarlenBand band = varlen_band(a.node, d);
  const int64_t group = hq / hkv;
  const int64_t batch = static_cast<int64_t>(cq.size()) - 1;
  std::vector<int64_t> seq_of(static_cast<size_t>(tq), 0);  // each query row's sequence
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = cq[b]; r < cq[b + 1]; ++r) seq_of[r] = b;
  const double *q = a.in[kVarlenQ], *k = a.in[kVarlenK], *v = a.in[kVarlenV];
  // One (query row, head) a task: out[r, h, :] = sum_j p_j v[j, h / group, :].
  parallel_for(
      tq * hq, a.threads,
      [&](int64_t task) {
        const int64_t r = task / hq, h = task % hq, kh = h / group, b = seq_of[r];
        const int64_t lq = cq[b + 1] - cq[b], lk = ck[b + 1] - ck[b], i = r - cq[b];
        const double* qr = q + (r * hq + h) * d;
        std::vector<double> s(static_cast<size_t>(lk), -INFINITY);
        double mx = -INFINITY;
        for (int64_t j = 0; j < lk; ++j) {
          if (!varlen_visible(band, i, j, lq, lk)) continue;
          const double* kr = k + ((ck[b] + j) * hkv + kh) * d;
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c) dot += qr[c] * kr[c];
          s[j] = dot * band.scale;
          mx = std::max(mx, s[j]);
        }
        double* o = a.out + (r * hq + h) * dv;
        if (mx == -INFINITY) return;  // no visible key: the row stays 0
        double sum = 0.0;
        for (int64_t j = 0; j < lk; ++j) {
          s[j] = s[j] == -INFINITY ? 0.0 : std::exp(s[j] - mx);
          sum += s[j];
        }
        for (int64_t j = 0; j < lk; ++j) {
          if (s[j] == 0.0) continue;
          const double* vr = v + ((ck[b] + j) * hkv + kh) * dv;
          for (int64_t c = 0; c < dv; ++c) o[c] += s[j] / sum * vr[c];
        }
      },
      16);
}

}  // namespace kiln::ref
