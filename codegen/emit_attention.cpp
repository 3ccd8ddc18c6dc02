// Attention groups: q @ k^T -> [scale, mask, where] -> softmax -> @ v as one flash-attention
// kernel (codegen/device/kiln_attention.cuh). One CTA per (batch element, block of query rows,
// heuristics/attention_layout.hpp), or for decode shapes (few of those, many keys) grid.y CTAs
// per block each over a share of the keys, combined through the executor's workspace and
// counters (flash-decoding: KcAttention::run_split); the operands are read through their strides
// (symbolic where the shapes are), so head splits and merges that are views cost nothing and K / V
// broadcast over query heads (grouped-query attention) are read without copies.
#include <fmt/format.h>

#include <algorithm>

#include "codegen/attention_scores.hpp"
#include "codegen/contraction_common.hpp"
#include "codegen/emit.hpp"
#include "codegen/kernel_assembly.hpp"
#include "codegen/writer.hpp"
#include "engine/base/check.hpp"
#include "engine/planner/attention_pattern.hpp"
#include "heuristics/attention_layout.hpp"

namespace kiln {

int64_t attention_split_blocks(const EmitContext& cx, const FusionGroup& grp) {
  const AttentionChain& c = *grp.attention;
  AttentionSplitProblem p;
  p.q_len = c.q_len.is_static() ? c.q_len.value() : 0;
  for (const Dim& b : c.batch) p.batch *= b.is_static() ? b.value() : 1;
  p.k_len = c.k_len.is_static() ? c.k_len.value() : 0;
  p.sm = cx.opts.sm;
  p.sm_count = cx.opts.sm_count;
  p.force = cx.opts.schedule.attention_splits;
  return choose_attention_split(choose_attention_layout(c.head_dim), p);
}

KernelSpec emit_attention(const EmitContext& cx, const FusionGroup& grp) {
  const Graph& g = cx.graph;
  KILN_ASSERT(grp.attention.has_value(), "attention group {} carries no chain", grp.id);
  KILN_ASSERT(cx.opts.sm >= 80, "attention group {}: the fused kernel needs sm_80+", grp.id);
  if (std::optional<KernelSpec> wg = emit_attention_wgmma(cx, grp)) return *wg;
  const AttentionChain& c = *grp.attention;
  const TensorDesc& qd = g.tensor(c.q).desc;
  const size_t r = c.batch.size() + 2;
  const bool bf16 = qd.dtype == DType::BF16;
  const int64_t d = c.head_dim;
  const Dim tq = c.q_len, tk = c.k_len;
  const AttentionLayout lay = choose_attention_layout(d);

  contraction::ArgList a;
  const std::string qs = a.tensor(g, c.q, true), ks = a.tensor(g, c.k, true),
                    vs = a.tensor(g, c.v, true), os = a.tensor(g, c.o, false);
  const std::string tq_c = a.dim(tq), tk_c = a.dim(tk);
  Dim batch(1);
  for (const Dim& b : c.batch) batch = batch * b;
  const Dim qtiles = (tq + Dim(lay.query_rows - 1)) / Dim(lay.query_rows);
  const std::string qt_c = a.dim(qtiles);
  std::vector<std::string> bdim(r - 2);  // registered outermost first (the loop reads innermost)
  for (size_t i = 0; i + 2 < r; ++i) bdim[i] = a.dim(c.batch[i]);
  const AttentionScores sc = attention_scores(g, c, a);

  std::string name = fmt::format("attention_{}_d{}_q{}{}{}", dtype_name(qd.dtype), d,
                                 lay.query_rows, sc.name_suffix, c.kv_broadcast() ? "_gqa" : "");
  // Flash-decoding: `bps` key blocks a split, ceil(tk / (bps key_rows)) splits at launch.
  const int64_t bps = attention_split_blocks(cx, grp);
  const Dim split_keys(bps * lay.key_rows);
  const Dim splits = bps > 0 ? (tk + split_keys - Dim(1)) / split_keys : Dim(1);
  std::string ws, cnt;
  int64_t split_rows = 0;
  if (bps > 0) {
    // Rows a split stores: the static query length (at most one block, the rule's condition).
    split_rows = std::min<int64_t>(tq.value(), lay.query_rows);
    const Dim part(split_rows * (lay.padded_dim + 2));  // KA::ROW floats a row
    ws = a.scratch(false, qtiles * batch * splits * part * Dim(4));
    cnt = a.scratch(true, qtiles * batch);
    name += splits.is_static() ? fmt::format("_split{}", splits.value())
                               : fmt::format("_splitby{}", bps * lay.key_rows);
  }
  if (tq.is_static() && tk.is_static()) name += fmt::format("_s{}x{}", tq.value(), tk.value());

  Writer dev;
  dev.raw(sc.device);
  dev.line("typedef KcAttention<{}, {}, {}, {}, {}, KcScores> KA;", d, bf16 ? "true" : "false",
           lay.warps, lay.key_rows, lay.q_in_registers ? "true" : "false");
  dev.line("static_assert(KA::SMEM_BYTES == {}, \"attention shared memory\");", lay.smem_bytes);
  if (bps > 0)
    dev.line("static_assert(KA::ROW == {}, \"attention split record\");", lay.padded_dim + 2);
  Writer w;
  w.line("extern __shared__ __align__(128) unsigned short kc_smem[];");
  w.line("const long long qt = (long long)blockIdx.x % {};", qt_c);
  w.line("long long bz = (long long)blockIdx.x / {};", qt_c);
  // Offsets: where Q, K and V start in the tensor they are read from (slices of one projection).
  auto offset = [&](const Dim& o) { return o == Dim(0) ? std::string("0") : a.dim(o); };
  std::string qo = offset(c.q_offset), ko = offset(c.k_offset), vo = offset(c.v_offset), oo = "0";
  auto term = [&](size_t i, const Dim& s) {
    return s == Dim(0) ? std::string() : fmt::format(" + b{} * {}", i, a.dim(s));
  };
  for (size_t i = r - 2; i-- > 0;) {  // innermost batch dim first
    w.line("const long long b{} = bz % {}; bz /= {};", i, bdim[i], bdim[i]);
    qo += term(i, c.q_strides[i]);
    ko += term(i, c.k_strides[i]);
    vo += term(i, c.v_strides[i]);
    oo += term(i, c.o_strides[i]);
  }
  for (const std::string& l : sc.body) w.put(l);
  const std::string split_args =
      bps > 0 ? fmt::format(", {}, {}, {}, {}", ws, cnt, bps, split_rows) : "";
  w.line(
      "KA::{}(kc_smem, {} + ({}), {}, {} + ({}), {}, {} + ({}), {}, {} + ({}), {}, (int){}, "
      "(int){}, (int)(qt * {}), sc{});",
      bps > 0 ? "run_split" : "run", qs, qo, a.dim(c.q_strides[r - 2]), ks, ko,
      a.dim(c.k_strides[r - 2]), vs, vo, a.dim(c.v_strides[r - 2]), os, oo,
      a.dim(c.o_strides[r - 2]), tq_c, tk_c, lay.query_rows, split_args);

  KernelSpec k;
  k.name = k.entry = name;
  const std::string device = contraction::device_preamble() +
                             contraction::device_text("contraction_mma.cuh") + "\n" +
                             contraction::device_text("kiln_attention_mask.cuh") + "\n" +
                             contraction::device_text("kiln_attention.cuh") + "\n" + dev.str();
  k.source = assemble_kernel(device, {name, "KA::THREADS", 0, 0, a.params()}, w.str());
  k.args = a.args();
  k.grid = {qtiles * batch, splits, Dim(1)};
  k.block = {32 * lay.warps, 1, 1};
  k.smem_bytes = lay.smem_bytes;
  // Q, K, V read once, O written once (masks: at most one element a score); both products.
  Dim kv_batch(1);
  for (size_t i = 0; i + 2 < r; ++i)
    if (!(c.k_strides[i] == Dim(0))) kv_batch = kv_batch * c.batch[i];
  k.bytes_moved = batch * tq * Dim(4 * d) + kv_batch * tk * Dim(4 * d);
  k.flops = batch * tq * tk * Dim(4 * d);
  return k;
}

}  // namespace kiln
