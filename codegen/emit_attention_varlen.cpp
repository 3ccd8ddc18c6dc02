// attention_varlen groups: a ragged batch's attention in one launch, on the mma.sync flash
// attention of codegen/device/kiln_attention.cuh. The grid is (query blocks summed over the
// sequences + B + 1, Hq): each CTA finds its sequence by a binary search over cu_seqlens_q
// (codegen/device/kiln_attention_varlen.cuh) and runs KcAttention::run on that sequence alone,
// as one batch element of lq queries and lk keys, so rows past the sequence's end are neither
// loaded nor stored and keys stop at its own. The lengths are read at run time: a new mix of
// lengths, token counts or batch sizes never recompiles.
#include <fmt/format.h>

#include "codegen/contraction_common.hpp"
#include "codegen/emit.hpp"
#include "codegen/kernel_assembly.hpp"
#include "codegen/writer.hpp"
#include "engine/base/check.hpp"
#include "engine/ir/attention_ops.hpp"
#include "engine/ir/op_table.hpp"
#include "engine/planner/attention_pattern.hpp"
#include "heuristics/attention_varlen_layout.hpp"

namespace kiln {
namespace {

constexpr double kLog2e = 1.4426950408889634;

// The [tokens, heads] element strides of rank-3 operand `t`, checked to be what the kernel's
// 16-byte row loads need: the head dim contiguous, the other strides multiples of 8.
std::pair<Dim, Dim> token_head_strides(const Graph& g, int t, const std::string& where) {
  const TensorInfo& ti = g.tensor(t);
  std::optional<std::vector<Dim>> s = dim_strides(ti.desc);
  auto mult8 = [](const Dim& d) { return d.is_static() && d.value() % 8 == 0; };
  KILN_CHECK(s && (*s)[2] == Dim(1) && mult8((*s)[0]) && mult8((*s)[1]),
             "{}: the ragged attention kernel reads '{}' ({}) by 16-byte rows: its head dim must "
             "be contiguous and its other strides multiples of 8 elements",
             where, ti.name, ti.desc.str());
  return {(*s)[0], (*s)[1]};
}

AttentionVarlenProblem problem_of(const Graph& g, const Node& n, int sm) {
  const TensorDesc& q = g.tensor(n.inputs[kVarlenQ]).desc;
  const Dim& offsets = g.tensor(n.inputs[kVarlenCuQ]).desc.shape[0];
  AttentionVarlenProblem p;
  p.head_dim = q.shape[2].value();
  p.v_head_dim = g.tensor(n.inputs[kVarlenV]).desc.shape[2].value();
  p.half = q.dtype == DType::F16 || q.dtype == DType::BF16;
  p.sm = sm;
  if (q.shape[0].is_static() && offsets.is_static())
    p.mean_q_len = q.shape[0].value() / std::max<int64_t>(1, offsets.value() - 1);
  return p;
}

// The score functor of kiln_attention_mask.cuh: the scale (times log2 e) and the band's flags;
// the band's offsets depend on the sequence's lengths and are set per CTA.
std::string score_functor(const VarlenBand& band) {
  Writer w;
  w.open("struct KcScores {{");
  w.line("static constexpr bool CAUSAL = {};", band.has_upper() ? "true" : "false");
  w.line("static constexpr bool WINDOW = {};", band.has_lower() ? "true" : "false");
  w.line("static constexpr bool NATURAL = false;");
  w.line("int coff, wlo;");
  w.open("__device__ __forceinline__ float operator()(float s, int row, int key) const {{");
  w.line("return s * {};", cuda_float(band.scale * kLog2e));
  w.close();
  w.close("};");
  return w.str();
}

}  // namespace

KernelSpec emit_attention_varlen(const EmitContext& cx, const FusionGroup& grp) {
  const Graph& g = cx.graph;
  KILN_ASSERT(grp.anchor >= 0 && g.nodes()[grp.anchor].op == OpKind::AttentionVarlen,
              "attention_varlen group {} has no attention_varlen anchor", grp.id);
  const Node& n = g.nodes()[grp.anchor];
  const std::string where = fmt::format("node '{}' (attention_varlen)", n.name);
  const AttentionVarlenLayout lay = choose_attention_varlen_layout(problem_of(g, n, cx.opts.sm));
  KILN_CHECK(lay.path != AttentionVarlenPath::None, "{}: {}", where, lay.why);
  const AttentionLayout& t = lay.tile;
  const int q = n.inputs[kVarlenQ], k = n.inputs[kVarlenK], v = n.inputs[kVarlenV];
  const int o = n.outputs[0];
  const TensorDesc& qd = g.tensor(q).desc;
  const int64_t d = t.head_dim, hq = qd.shape[1].value();
  const int64_t hkv = g.tensor(k).desc.shape[1].value();
  const VarlenBand band = varlen_band(n, d);

  contraction::ArgList a;
  const std::string qs = a.tensor(g, q, true), ks = a.tensor(g, k, true), vs = a.tensor(g, v, true);
  const std::string os = a.tensor(g, o, false);
  const std::string cuq = a.tensor(g, n.inputs[kVarlenCuQ], true);
  const std::string cuk = a.tensor(g, n.inputs[kVarlenCuK], true);
  const Dim offsets = g.tensor(n.inputs[kVarlenCuQ]).desc.shape[0];
  const Dim tq = qd.shape[0], tk = g.tensor(k).desc.shape[0];
  const std::string tq_c = a.dim(tq), tk_c = a.dim(tk), b_c = a.dim(offsets - Dim(1));
  const auto [q_ts, q_hs] = token_head_strides(g, q, where);
  const auto [k_ts, k_hs] = token_head_strides(g, k, where);
  const auto [v_ts, v_hs] = token_head_strides(g, v, where);
  const auto [o_ts, o_hs] = token_head_strides(g, o, where);
  const std::string err = a.error_word(o);

  const bool gqa = hkv != hq;
  std::string name =
      fmt::format("attention_varlen_{}_d{}_q{}{}{}{}", dtype_name(qd.dtype), d, t.query_rows,
                  band.causal        ? "_causal"
                  : band.has_upper() ? "_right"
                                     : "",
                  band.has_lower() ? "_window" : "", gqa ? "_gqa" : "");
  Writer dev;
  dev.raw(score_functor(band));
  dev.line("typedef KcAttention<{}, {}, {}, {}, {}, KcScores> KA;", d,
           qd.dtype == DType::BF16 ? "true" : "false", t.warps, t.key_rows,
           t.q_in_registers ? "true" : "false");
  dev.line("static_assert(KA::SMEM_BYTES == {}, \"attention shared memory\");", t.smem_bytes);
  Writer w;
  w.line("extern __shared__ __align__(128) unsigned short kc_smem[];");
  w.line("kc_varlen_check({}, {}, (int){}, {}, {}, {});", cuq, cuk, b_c, tq_c, tk_c, err);
  w.line("KcVarlenBlock blk;");
  w.line("if (!kc_varlen_block<KA::BQ>({}, {}, (int){}, {}, {}, blockIdx.x, blk)) return;", cuq,
         cuk, b_c, tq_c, tk_c);
  w.line("const long long h = blockIdx.y, kh = h / {};", hq / hkv);
  w.line("KcScores sc;");
  // The diagonal is bottom-right aligned: query i sits at key i + lk - lq.
  w.line("sc.coff = blk.lk - blk.lq + {};", band.has_upper() ? band.right : 0);
  w.line("sc.wlo = blk.lk - blk.lq - {};", band.has_lower() ? band.left : 0);
  auto at = [&](const std::string& p, const char* row, const char* head, const Dim& ts,
                const Dim& hs) {
    return fmt::format("{} + (blk.{} * {} + {} * {})", p, row, a.dim(ts), head, a.dim(hs));
  };
  w.line("KA::run(kc_smem, {}, {}, {}, {}, {}, {}, {}, {}, blk.lq, blk.lk, blk.qb, sc);",
         at(qs, "q0", "h", q_ts, q_hs), a.dim(q_ts), at(ks, "k0", "kh", k_ts, k_hs), a.dim(k_ts),
         at(vs, "k0", "kh", v_ts, v_hs), a.dim(v_ts), at(os, "q0", "h", o_ts, o_hs), a.dim(o_ts));

  const std::string device =
      contraction::device_preamble() + contraction::device_text("contraction_mma.cuh") + "\n" +
      contraction::device_text("kiln_attention_mask.cuh") + "\n" +
      contraction::device_text("kiln_attention.cuh") + "\n" +
      contraction::device_text("kiln_attention_varlen.cuh") + "\n" + dev.str();
  KernelSpec spec;
  spec.name = spec.entry = name;
  spec.source = assemble_kernel(device, {name, "KA::THREADS", 0, 0, a.params()}, w.str());
  spec.args = a.args();
  spec.grid = {tq / Dim(t.query_rows) + offsets, Dim(hq), Dim(1)};
  spec.block = {32 * t.warps, 1, 1};
  spec.smem_bytes = t.smem_bytes;
  // Q, K, V read once, O written once, the offsets; the products as for sequences of the mean
  // lengths (Tq / (B + 1) queries against Tk keys each, a slight underestimate).
  spec.bytes_moved = tq * Dim(4 * d * hq) + tk * Dim(4 * d * hkv) + offsets * Dim(8);
  spec.flops = tq * tk * Dim(4 * d * hq) / offsets;
  return spec;
}

}  // namespace kiln
