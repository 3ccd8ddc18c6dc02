// Ragged-batch attention graphs (attention_varlen) for the CPU and GPU tests: the graph of a case,
// seeded inputs for a mix of sequence lengths, and an independent expected output computed
// sequence by sequence on the CPU reference of the plain attention chain (matmul, scale, an
// additive band mask, softmax, matmul) over padded-free per-sequence tensors, with K / V heads
// repeated for grouped-query attention.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "kiln/graph.hpp"
#include "kiln/reference.hpp"
#include "tests/random_input.hpp"

namespace kiln::test {

struct VarlenCase {
  std::string name = "varlen";
  DType dt = DType::F16;
  int64_t hq = 4, hkv = 4, d = 64;
  int64_t dv = 0;                                 // 0: d
  std::vector<int64_t> lq = {1, 17, 64, 300, 0};  // query lengths a sequence
  std::vector<int64_t> lk;                        // key lengths; empty: lq
  AttentionVarlenOptions opt;
  bool symbolic = true;  // Tq, Tk and the offsets' count as symbols (T, Tk, Bp1)

  int64_t v_dim() const { return dv ? dv : d; }
  const std::vector<int64_t>& k_lens() const { return lk.empty() ? lq : lk; }
};

inline int64_t total(const std::vector<int64_t>& l) {
  int64_t t = 0;
  for (int64_t x : l) t += x;
  return t;
}
inline std::vector<int64_t> offsets_of(const std::vector<int64_t>& l) {
  std::vector<int64_t> cu{0};
  for (int64_t x : l) cu.push_back(cu.back() + x);
  return cu;
}

inline Graph varlen_graph(const VarlenCase& c) {
  Graph g(c.name);
  const int64_t b1 = static_cast<int64_t>(c.lq.size()) + 1;
  Dim tq = c.symbolic ? Dim("T") : Dim(total(c.lq));
  Dim tk = c.symbolic ? Dim("Tk") : Dim(total(c.k_lens()));
  Dim bp1 = c.symbolic ? Dim("Bp1") : Dim(b1);
  Tensor q = g.input("q", c.dt, {tq, c.hq, c.d});
  Tensor k = g.input("k", c.dt, {tk, c.hkv, c.d});
  Tensor v = g.input("v", c.dt, {tk, c.hkv, c.v_dim()});
  Tensor cq = g.input("cu_q", DType::I32, {bp1});
  Tensor ck = g.input("cu_k", DType::I32, {bp1});
  g.output(g.attention_varlen(q, k, v, cq, ck, c.opt));
  return g;
}

inline std::map<std::string, HostTensor> varlen_inputs(const VarlenCase& c, uint64_t seed) {
  const int64_t tq = total(c.lq), tk = total(c.k_lens());
  std::map<std::string, HostTensor> in;
  in["q"] = random_input(c.dt, {tq, c.hq, c.d}, Layout::NCHW, seed);
  in["k"] = random_input(c.dt, {tk, c.hkv, c.d}, Layout::NCHW, seed + 1);
  in["v"] = random_input(c.dt, {tk, c.hkv, c.v_dim()}, Layout::NCHW, seed + 2);
  const int64_t b1 = static_cast<int64_t>(c.lq.size()) + 1;
  in["cu_q"] = HostTensor::from_i64(DType::I32, {b1}, offsets_of(c.lq));
  in["cu_k"] = HostTensor::from_i64(DType::I32, {b1}, offsets_of(c.k_lens()));
  return in;
}

// The visible keys written out independently of engine/ir/attention_ops.hpp: FlashAttention's
// varlen rule, the diagonal at key i + lk - lq; causal is a right window of 0.
inline bool expected_visible(const VarlenCase& c, int64_t i, int64_t j, int64_t lq, int64_t lk) {
  int64_t right = c.opt.window_right;
  if (c.opt.causal) right = right < 0 ? 0 : std::min<int64_t>(right, 0);
  const int64_t diag = i + lk - lq;
  if (right >= 0 && j > diag + right) return false;
  if (c.opt.window_left >= 0 && j < diag - c.opt.window_left) return false;
  return true;
}

// [Tq, Hq, Dv] in f64: per sequence a plain attention graph on the CPU reference (f32 values of
// the inputs); rows with no visible key are 0.
inline std::vector<double> padded_attention(const VarlenCase& c,
                                            const std::map<std::string, HostTensor>& in) {
  const int64_t hq = c.hq, d = c.d, dv = c.v_dim(), grp = c.hq / c.hkv;
  const std::vector<double> q = in.at("q").to_f64(), k = in.at("k").to_f64(),
                            v = in.at("v").to_f64();
  const double scale = c.opt.scale != 0.0 ? c.opt.scale : 1.0 / std::sqrt(double(d));
  std::vector<double> out(static_cast<size_t>(total(c.lq) * hq * dv), 0.0);
  int64_t q0 = 0, k0 = 0;
  for (size_t b = 0; b < c.lq.size(); ++b) {
    const int64_t lq = c.lq[b], lk = c.k_lens()[b];
    if (lq > 0 && lk > 0) {
      Graph g("seq");
      Tensor qt = g.input("q", DType::F32, {hq, lq, d});
      Tensor kt = g.input("k", DType::F32, {hq, lk, d});
      Tensor vt = g.input("v", DType::F32, {hq, lk, dv});
      Tensor mt = g.input("m", DType::F32, {lq, lk});
      Tensor st = g.constant("scale", {DType::F32, {1}, Layout::NCHW, {}},
                             HostTensor::from_f64(DType::F32, {1}, {scale}));
      Tensor s = g.add(g.mul(g.matmul(qt, kt, {}, false, true), st), mt);
      g.output(g.matmul(g.softmax(s), vt));
      std::vector<double> qb(hq * lq * d), kb(hq * lk * d), vb(hq * lk * dv), mb(lq * lk);
      for (int64_t h = 0; h < hq; ++h) {
        for (int64_t i = 0; i < lq; ++i)
          for (int64_t x = 0; x < d; ++x) qb[(h * lq + i) * d + x] = q[((q0 + i) * hq + h) * d + x];
        for (int64_t j = 0; j < lk; ++j) {
          for (int64_t x = 0; x < d; ++x)
            kb[(h * lk + j) * d + x] = k[((k0 + j) * c.hkv + h / grp) * d + x];
          for (int64_t x = 0; x < dv; ++x)
            vb[(h * lk + j) * dv + x] = v[((k0 + j) * c.hkv + h / grp) * dv + x];
        }
      }
      for (int64_t i = 0; i < lq; ++i)
        for (int64_t j = 0; j < lk; ++j)
          mb[i * lk + j] =
              expected_visible(c, i, j, lq, lk) ? 0.0 : -std::numeric_limits<double>::infinity();
      std::map<std::string, HostTensor> sin;
      sin["q"] = HostTensor::from_f64(DType::F32, {hq, lq, d}, qb);
      sin["k"] = HostTensor::from_f64(DType::F32, {hq, lk, d}, kb);
      sin["v"] = HostTensor::from_f64(DType::F32, {hq, lk, dv}, vb);
      sin["m"] = HostTensor::from_f64(DType::F32, {lq, lk}, mb);
      const std::vector<double> o = run_reference(g, sin).begin()->second.to_f64();
      for (int64_t h = 0; h < hq; ++h)
        for (int64_t i = 0; i < lq; ++i)
          for (int64_t x = 0; x < dv; ++x) {
            const double val = o[(h * lq + i) * dv + x];  // NaN: a row with every key masked
            out[((q0 + i) * hq + h) * dv + x] = std::isnan(val) ? 0.0 : val;
          }
    }
    q0 += lq;
    k0 += lk;
  }
  return out;
}

}  // namespace kiln::test
