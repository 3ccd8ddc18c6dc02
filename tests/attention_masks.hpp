// Masked attention graphs (engine/planner/attention_pattern.hpp) shared by the CPU planner and
// NVRTC tests and the GPU tests: q @ k^T, a scale and a mask in the orders exporters write,
// softmax, @ v, with grouped-query K / V, symbolic or static lengths and any head dim.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln::test {

enum class MaskKind {
  None,
  AddInput,    // + mask, an input of `mask_shape` (any float dtype: `mask_dtype`)
  AddCausal,   // + triu(full(-inf), 1): a constant causal additive mask
  WhereConst,  // where(tril(ones) constant bool, S, fill): causal
  WhereTrilu,  // where(trilu(expand(true)), S, fill): causal, computed
  MaskedFill,  // where(triu(ones, 1) constant bool, fill, S): causal (torch masked_fill)
  WhereInput,  // where(cond, S, fill), cond a bool input of `mask_shape`
  // Sliding windows: keys j with window_k <= j - i <= causal_k kept.
  WindowConst,  // where(band constant bool, S, fill)
  WindowTrilu,  // where(and(trilu(all, lower, causal_k), trilu(all, upper, window_k)), S, fill)
  WindowAdd,    // + (triu(full(-inf), causal_k + 1) + tril(full(-inf), window_k - 1))
};

struct MaskCase {
  std::string name;
  DType dt = DType::F16;
  int64_t d = 64;
  std::vector<Dim> q_batch{Dim("N"), Dim(2)};   // Q's batch dims
  std::vector<Dim> kv_batch{Dim("N"), Dim(2)};  // K's and V's (size 1: broadcast over Q's)
  Dim sq = Dim("S"), sk = Dim("S");
  MaskKind mask = MaskKind::None;
  std::vector<Dim> mask_shape;  // AddInput / WhereInput
  DType mask_dtype = DType::F32;
  bool add_first = false;  // the mask before the scale
  double fill = -std::numeric_limits<double>::infinity();
  int64_t causal_k = 0;    // the trilu diagonal of the causal forms
  int64_t window_k = -15;  // the window's lower diagonal (a 16-key window with causal_k 0)
};

inline std::vector<Dim> concat_dims(std::vector<Dim> a, std::vector<Dim> b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The [Sq, Sk] lower-triangular pattern (j <= i + k) as a constant of `dt`: 1 / 0 for a bool,
// 0 / -inf above the diagonal for a float when `additive`; with `window` also j >= i + window_k.
inline Tensor causal_constant(Graph& g, const MaskCase& c, DType dt, bool additive, bool invert,
                              bool window = false) {
  const int64_t rows = c.sq.value(), cols = c.sk.value();
  std::vector<double> v(rows * cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const bool keep = j <= i + c.causal_k && (!window || j >= i + c.window_k);
      v[i * cols + j] = additive ? (keep ? 0.0 : -INFINITY) : static_cast<double>(keep != invert);
    }
  return g.constant("causal", TensorDesc{dt, {Dim(rows), Dim(cols)}, Layout::NCHW, {}},
                    HostTensor::from_f64(dt, {rows, cols}, v));
}

inline Tensor scalar(Graph& g, const std::string& n, DType dt, double v) {
  return g.constant(n, TensorDesc{dt, {}, Layout::NCHW, {}}, HostTensor::from_f64(dt, {}, {v}));
}

// The masked step on scores `s`.
inline Tensor apply_mask(Graph& g, const MaskCase& c, Tensor s) {
  const DType dt = c.dt;
  switch (c.mask) {
    case MaskKind::None:
      return s;
    case MaskKind::AddInput:
      return g.add(s, g.input("mask", c.mask_dtype, c.mask_shape));
    case MaskKind::AddCausal:
      return g.add(s, causal_constant(g, c, dt, true, false));
    case MaskKind::WhereConst:
      return g.where(causal_constant(g, c, DType::Bool, false, false), s,
                     scalar(g, "fill", dt, c.fill));
    case MaskKind::WhereTrilu: {
      Tensor all = g.expand(scalar(g, "yes", DType::Bool, 1.0), {c.sq, c.sk});
      return g.where(g.trilu(all, false, c.causal_k), s, scalar(g, "fill", dt, c.fill));
    }
    case MaskKind::MaskedFill:
      return g.where(causal_constant(g, c, DType::Bool, false, true), scalar(g, "fill", dt, c.fill),
                     s);
    case MaskKind::WhereInput:
      return g.where(g.input("cond", DType::Bool, c.mask_shape), s, scalar(g, "fill", dt, c.fill));
    case MaskKind::WindowConst:
      return g.where(causal_constant(g, c, DType::Bool, false, false, true), s,
                     scalar(g, "fill", dt, c.fill));
    case MaskKind::WindowTrilu: {
      Tensor all = g.expand(scalar(g, "yes", DType::Bool, 1.0), {c.sq, c.sk});
      Tensor band = g.add_node1(
          "and", {g.trilu(all, false, c.causal_k), g.trilu(all, true, c.window_k)}, {}, "band");
      return g.where(band, s, scalar(g, "fill", dt, c.fill));
    }
    case MaskKind::WindowAdd: {
      Tensor ninf = g.expand(scalar(g, "ninf", dt, -INFINITY), {c.sq, c.sk});
      Tensor above = g.trilu(ninf, true, c.causal_k + 1);
      Tensor below = g.trilu(ninf, false, c.window_k - 1);
      return g.add(s, g.add(above, below));
    }
  }
  return s;
}

inline Graph mask_graph(const MaskCase& c) {
  Graph g("attn_" + c.name);
  Tensor q = g.input("q", c.dt, concat_dims(c.q_batch, {c.sq, Dim(c.d)}));
  Tensor k = g.input("k", c.dt, concat_dims(c.kv_batch, {c.sk, Dim(c.d)}));
  Tensor v = g.input("v", c.dt, concat_dims(c.kv_batch, {c.sk, Dim(c.d)}));
  Tensor s = g.add_node1("matmul", {q, k}, {{"transpose_b", int64_t{1}}}, "qk");
  Tensor scale = scalar(g, "scale", c.dt, 1.0 / std::sqrt(static_cast<double>(c.d)));
  if (c.add_first) s = apply_mask(g, c, s);
  s = g.mul(s, scale);
  if (!c.add_first) s = apply_mask(g, c, s);
  g.output(g.add_node1("matmul", {g.softmax(s, -1), v}, {}, "pv"));
  return g;
}

}  // namespace kiln::test

namespace kiln::test {

// Self-attention as the ONNX importer gives it for HF BERT / GPT-2 (eager attention, opset
// 17/18) with symbolic N and S: projections, head split (reshape + transposes, copies for a
// symbolic S), q @ k^T, * 1/sqrt(D), + where(keep, 0, finfo.min) of a computed [N, 1, S, S]
// bool, softmax, @ v, heads merge. `k_direct`: k^T as one transpose [0, 2, 3, 1] (both exporters).
inline Graph imported_attention(DType dt, int64_t heads, int64_t hd) {
  const int64_t c = heads * hd;
  Graph g("imported_attention");
  Tensor x = g.input("x", dt, {Dim("N"), Dim("S"), Dim(c)});
  Tensor keep = g.input("keep", DType::Bool, {Dim("N"), Dim(1), Dim("S"), Dim("S")});
  auto weight = [&](const std::string& n, uint64_t seed) {
    return g.constant_random(n, TensorDesc{dt, {Dim(c), Dim(c)}, Layout::NCHW, {}}, "normal", 0.0,
                             1.0 / std::sqrt(static_cast<double>(c)), seed);
  };
  auto heads_of = [&](Tensor y, std::vector<int64_t> perm) {
    return g.transpose(g.reshape(y, {Dim("N"), Dim("S"), Dim(heads), Dim(hd)}), std::move(perm));
  };
  Tensor q = heads_of(g.matmul(x, weight("wq", 1)), {0, 2, 1, 3});
  Tensor kt = heads_of(g.matmul(x, weight("wk", 2)), {0, 2, 3, 1});
  Tensor v = heads_of(g.matmul(x, weight("wv", 3)), {0, 2, 1, 3});
  Tensor s = g.mul(g.matmul(q, kt), scalar(g, "scale", dt, 1.0 / std::sqrt(double(hd))));
  Tensor mask = g.where(keep, scalar(g, "zero", dt, 0.0), scalar(g, "min", dt, -65504.0));
  Tensor o = g.matmul(g.softmax(g.add(s, mask), -1), v);
  g.output(g.reshape(g.transpose(o, {0, 2, 1, 3}), {Dim("N"), Dim("S"), Dim(c)}));
  return g;
}

}  // namespace kiln::test

namespace kiln::test {

// torch's scaled_dot_product_attention(q, k, v, is_causal=True) as its ONNX export writes it
// (opset 17): q and k^T each times sqrt(1 / sqrt(D)), + where(eq(trilu(expand(1)), 0), -inf, 0)
// over [S, S], softmax, @ v; S symbolic.
inline Graph sdpa_causal(DType dt, int64_t d) {
  Graph g("sdpa_causal");
  const std::vector<Dim> shape{Dim("N"), Dim(2), Dim("S"), Dim(d)};
  Tensor q = g.input("q", dt, shape), k = g.input("k", dt, shape), v = g.input("v", dt, shape);
  Tensor half = scalar(g, "half_scale", dt, std::sqrt(1.0 / std::sqrt(static_cast<double>(d))));
  Tensor ones = g.expand(scalar(g, "one", dt, 1.0), {Dim("S"), Dim("S")});
  Tensor masked = g.add_node1("eq", {g.trilu(ones, false, 0), scalar(g, "zero", dt, 0.0)});
  Tensor mask = g.where(masked, scalar(g, "ninf", dt, -INFINITY), scalar(g, "zero2", dt, 0.0));
  Tensor s = g.matmul(g.mul(q, half), g.mul(g.transpose(k, {0, 1, 3, 2}), half));
  g.output(g.matmul(g.softmax(g.add(s, mask), -1), v));
  return g;
}

}  // namespace kiln::test
