// The fused attention kernel's score functor (codegen/attention_scores.hpp).
#include "codegen/attention_scores.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "codegen/writer.hpp"
#include "engine/base/check.hpp"
#include "engine/base/half.hpp"

namespace kiln {
namespace {

// A CUDA float literal of `f` (always with a point or an exponent: "2f" does not parse).
std::string float_literal(float f) {
  if (std::isinf(f)) return f < 0 ? "-KILN_INF" : "KILN_INF";
  std::string t = fmt::format("{:.9g}", f);
  if (t.find_first_of(".e") == std::string::npos) t += ".0";
  return t + "f";
}

// `v` rounded to the scores' dtype (the where's result holds it), as a CUDA float literal.
std::string fill_literal(double v, DType dt) {
  float f = static_cast<float>(v);
  if (dt == DType::F16) f = f16_bits_to_f32(f32_to_f16_bits(f));
  if (dt == DType::BF16) f = bf16_bits_to_f32(f32_to_bf16_bits(f));
  return float_literal(f);
}

// The batch offset of a tensor with element strides `st` over [batch..., Sq, Sk].
std::string batch_offset(const std::vector<Dim>& st, contraction::ArgList& a) {
  std::string off = "0";
  for (size_t i = 0; i + 2 < st.size(); ++i)
    if (!(st[i] == Dim(0))) off += fmt::format(" + b{} * {}", i, a.dim(st[i]));
  return off;
}

}  // namespace

AttentionScores attention_scores(const Graph& g, const AttentionChain& c, contraction::ArgList& a) {
  const DType dt = g.tensor(c.q).desc.dtype;
  AttentionScores out;
  Writer w;
  // Natural-log logits as soon as a mask takes part: a finite large negative mask value times
  // log2(e) may overflow to -inf, which would turn a fully masked row into zeros where the
  // graph's softmax sees equal logits.
  bool natural = false;
  for (const ScoreStep& st : c.steps) natural |= st.tensor >= 0;
  w.open("struct KcScores {{");
  w.line("static constexpr bool CAUSAL = {};", c.causal ? "true" : "false");
  w.line("static constexpr bool WINDOW = {};", c.window ? "true" : "false");
  w.line("static constexpr bool NATURAL = {};", natural ? "true" : "false");
  w.line("int coff, wlo;");
  std::vector<std::string> members, loads;
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const ScoreStep& st = c.steps[i];
    if (st.tensor < 0) continue;
    const DType mt = g.tensor(st.tensor).desc.dtype;
    const std::string p = a.tensor(g, st.tensor, true);
    const size_t r = st.strides.size();
    w.line("const {}* m{}; long long m{}_rs, m{}_ks;", contraction::raw_type(mt), i, i, i);
    out.body.push_back(fmt::format("sc.m{} = {} + ({}); sc.m{}_rs = {}; sc.m{}_ks = {};", i, p,
                                   batch_offset(st.strides, a), i, a.dim(st.strides[r - 2]), i,
                                   a.dim(st.strides[r - 1])));
  }
  w.open("__device__ __forceinline__ float operator()(float s, int row, int key) const {{");
  if (!natural) {
    w.line("return s * {};",
           float_literal(static_cast<float>(c.operand_scale * c.scale_value * 1.4426950408889634)));
  } else {
    if (c.operand_scale != 1.0)
      w.line("s *= {};", float_literal(static_cast<float>(c.operand_scale)));
    for (size_t i = 0; i < c.steps.size(); ++i) {
      const ScoreStep& st = c.steps[i];
      const std::string at =
          fmt::format("m{}[(long long)row * m{}_rs + (long long)key * m{}_ks]", i, i, i);
      switch (st.kind) {
        case ScoreStep::Kind::Scale:
          w.line("s *= {};", float_literal(static_cast<float>(st.value)));
          break;
        case ScoreStep::Kind::AddMask:
          if (st.tensor >= 0) {
            w.line("s += {}(&{});", contraction::load_fn(g.tensor(st.tensor).desc.dtype), at);
            // The add's result is of the scores' dtype: what overflows it is -inf, as in the
            // graph (a finfo(f32).min mask on f16 scores masks a row fully, not uniformly).
            w.line("if (s <= {}) s = -KILN_INF;",
                   dt == DType::F16 ? "-65520.f" : "-3.39617753e38f");
          }
          break;  // a causal additive mask adds 0 where visible (the kernel masks the rest)
        case ScoreStep::Kind::Where:
          if (st.tensor >= 0)
            w.line("s = ({} != 0) == {} ? s : {};", at, st.keep_if_true ? "true" : "false",
                   fill_literal(st.value, dt));
          break;  // a causal where keeps every visible score
      }
    }
    w.line("return s;");
  }
  w.close();
  w.close("};");
  out.device = w.str();
  for (const ScoreStep& st : c.steps) {
    if (st.tensor < 0) continue;
    out.name_suffix += st.kind == ScoreStep::Kind::AddMask ? "_maskadd" : "_maskbool";
  }
  if (c.window) out.name_suffix = "_window" + out.name_suffix;
  if (c.causal) out.name_suffix = "_causal" + out.name_suffix;
  out.body.insert(out.body.begin(), fmt::format("KcScores sc; sc.coff = {}; sc.wlo = {};",
                                                c.causal_offset, c.window_offset));
  return out;
}

}  // namespace kiln
