// The sm_90a attention kernel (codegen/device/kiln_attention_wgmma.cuh) where the rule of
// heuristics/attention_layout.hpp picks it: one CTA per (batch element, block of 128 query
// rows), Q, K and V read by TMA through maps over their own dims (the batch dims they broadcast
// left out, so grouped-query K / V are read without copies), the output stored from the
// accumulator fragments through its strides. Symbolic lengths and batch dims are map dims
// evaluated at launch.
#include <fmt/format.h>

#include "codegen/attention_scores.hpp"
#include "codegen/contraction/tensor_core.hpp"
#include "codegen/contraction_common.hpp"
#include "codegen/emit.hpp"
#include "codegen/kernel_assembly.hpp"
#include "codegen/writer.hpp"
#include "engine/base/check.hpp"
#include "engine/planner/attention_pattern.hpp"
#include "heuristics/attention_layout.hpp"

namespace kiln {
namespace {

// The batch dims (indices into the chain's, innermost first) an operand with element strides `st`
// (batch dims, then rows) does not broadcast: its TMA map's dims after {D, rows}.
std::vector<size_t> map_batch_dims(const std::vector<Dim>& st) {
  std::vector<size_t> out;
  for (size_t i = st.size() - 1; i-- > 0;)
    if (!(st[i] == Dim(0))) out.push_back(i);
  return out;
}

int map_rank(const std::vector<Dim>& st) {
  return 2 + static_cast<int>(map_batch_dims(st).size());
}

// Registers the map of one operand ({D, rows, batch dims}, boxes of 64 columns x `rows_box`
// rows, starting `offset` elements into its tensor) and returns {map name, "{b.., 0}": the CTA's
// coordinates on the map's batch dims}.
std::pair<std::string, std::string> operand_map(contraction::ArgList& a, const Graph& g, int id,
                                                const AttentionChain& c, const std::vector<Dim>& st,
                                                const Dim& len, const Dim& offset, int rows_box) {
  a.tensor(g, id, true);  // the executor's pointer of the map's tensor
  std::vector<Dim> dims{Dim(c.head_dim), len}, strides{st.back()};
  std::vector<int> box{64, rows_box}, es{1, 1};
  std::vector<std::string> coords;
  for (size_t i : map_batch_dims(st)) {
    dims.push_back(c.batch[i]);
    strides.push_back(st[i]);
    box.push_back(1);
    es.push_back(1);
    coords.push_back(fmt::format("(int)b{}", i));
  }
  KILN_ASSERT(coords.size() <= 3, "attention map of rank {}", dims.size());
  while (coords.size() < 3) coords.push_back("0");
  const std::string name = a.tensor_map(id, dims, strides, box, es, 128, offset);
  return {name, fmt::format("{{{}, {}, {}}}", coords[0], coords[1], coords[2])};
}

}  // namespace

std::optional<KernelSpec> emit_attention_wgmma(const EmitContext& cx, const FusionGroup& grp) {
  const Graph& g = cx.graph;
  const AttentionChain& c = *grp.attention;
  const int rank = std::max({map_rank(c.q_strides), map_rank(c.k_strides), map_rank(c.v_strides)});
  // The matcher takes only 16-byte row strides (multiples of 8 elements) and D contiguous.
  if (choose_attention_kernel(cx.opts.sm, cx.opts.arch_specific, c.head_dim, true, rank,
                              cx.opts.schedule.attention_wgmma,
                              attention_split_blocks(cx, grp) > 0) != AttentionKernel::Wgmma)
    return std::nullopt;
  // Operands read at an offset into their tensor (q, k, v thirds of one projection) start their
  // maps there: a static multiple of 8 elements, the 16-byte alignment TMA needs.
  for (const Dim* off : {&c.q_offset, &c.k_offset, &c.v_offset})
    if (!off->is_static() || off->value() % 8 != 0) return std::nullopt;
  const TensorDesc& qd = g.tensor(c.q).desc;
  const size_t r = c.batch.size() + 2;
  const bool bf16 = qd.dtype == DType::BF16;
  const int64_t d = c.head_dim;
  const AttentionWgmmaLayout lay = choose_attention_wgmma_layout(d);

  contraction::ArgList a;
  const auto [qm, qb] = operand_map(a, g, c.q, c, c.q_strides, c.q_len, c.q_offset, lay.query_rows);
  const auto [km, kb] = operand_map(a, g, c.k, c, c.k_strides, c.k_len, c.k_offset, lay.key_rows);
  const auto [vm, vb] = operand_map(a, g, c.v, c, c.v_strides, c.k_len, c.v_offset, lay.key_rows);
  const std::string os = a.tensor(g, c.o, false);
  const std::string tq_c = a.dim(c.q_len), tk_c = a.dim(c.k_len);
  Dim batch(1);
  for (const Dim& b : c.batch) batch = batch * b;
  const Dim qtiles = (c.q_len + Dim(lay.query_rows - 1)) / Dim(lay.query_rows);
  const std::string qt_c = a.dim(qtiles);
  std::vector<std::string> bdim(r - 2);
  for (size_t i = 0; i + 2 < r; ++i) bdim[i] = a.dim(c.batch[i]);
  const AttentionScores sc = attention_scores(g, c, a);

  const bool pingpong = cx.opts.schedule.attention_pingpong == 1;
  std::string name =
      fmt::format("attention_{}_d{}_wg{}x{}{}{}", dtype_name(qd.dtype), d, lay.query_rows,
                  lay.key_rows, sc.name_suffix, c.kv_broadcast() ? "_gqa" : "");
  if (pingpong) name += "_pingpong";
  if (c.q_len.is_static() && c.k_len.is_static())
    name += fmt::format("_s{}x{}", c.q_len.value(), c.k_len.value());

  Writer dev;
  dev.raw(contraction::wgmma_instruction(lay.key_rows, bf16, true));
  dev.raw(contraction::wgmma_rs_instruction(lay.padded_dim, bf16));
  dev.raw(sc.device);
  dev.open("struct KcAttnMma {{");
  dev.line(
      "__device__ static __forceinline__ void s(const unsigned long long (&da)[4], const unsigned "
      "long long (&db)[4], float (&acc)[1][{}][4]) {{ kc_wgmma4_n{}(da, db, acc); }}",
      lay.key_rows / 8, lay.key_rows);
  dev.line(
      "__device__ static __forceinline__ void o(const unsigned (&pa)[4][4], const unsigned long "
      "long (&db)[4], float (&acc)[1][{}][4]) {{ kc_wgmma_rs4_n{}(pa, db, acc); }}",
      lay.padded_dim / 8, lay.padded_dim);
  dev.close("};");
  dev.line("typedef KcAttentionWg<{}, {}, {}, {}, {}, {}, {}, KcScores, KcAttnMma, {}> KA;", d,
           bf16 ? "true" : "false", lay.key_rows, lay.stages, map_rank(c.q_strides),
           map_rank(c.k_strides), map_rank(c.v_strides), pingpong ? "true" : "false");
  dev.line("static_assert(KA::SMEM_BYTES == {} && KA::THREADS == {}, \"attention layout\");",
           lay.smem_bytes, lay.threads);

  Writer w;
  w.line("extern __shared__ __align__(1024) unsigned short kc_smem[];");
  w.line("const long long qt = (long long)blockIdx.x % {};", qt_c);
  w.line("long long bz = (long long)blockIdx.x / {};", qt_c);
  std::string oo = "0";
  for (size_t i = r - 2; i-- > 0;) {  // innermost batch dim first
    w.line("const long long b{} = bz % {}; bz /= {};", i, bdim[i], bdim[i]);
    if (!(c.o_strides[i] == Dim(0))) oo += fmt::format(" + b{} * {}", i, a.dim(c.o_strides[i]));
  }
  for (const std::string& l : sc.body) w.put(l);
  w.line("const int kc_qb[3] = {}, kc_kb[3] = {}, kc_vb[3] = {};", qb, kb, vb);
  w.line(
      "KA::run(kc_smem, &{}, &{}, &{}, kc_qb, kc_kb, kc_vb, {} + ({}), {}, (int){}, (int){}, "
      "(int)(qt * {}), sc);",
      qm, km, vm, os, oo, a.dim(c.o_strides[r - 2]), tq_c, tk_c, lay.query_rows);

  KernelSpec k;
  k.name = k.entry = name;
  const std::string device =
      contraction::device_preamble() + contraction::device_text("contraction_mma.cuh") + "\n" +
      contraction::device_text("contraction_wgmma.cuh") + "\n" +
      contraction::device_text("kiln_attention_mask.cuh") + "\n" +
      contraction::device_text("kiln_attention_wgmma.cuh") + "\n" + dev.str();
  // Launch bounds (THREADS, 1): the register cap setmaxnreg needs to take effect.
  k.source = assemble_kernel(device, {name, "KA::THREADS", 1, 0, a.params()}, w.str());
  k.args = a.args();
  k.grid = {qtiles * batch, Dim(1), Dim(1)};
  k.block = {lay.threads, 1, 1};
  k.smem_bytes = lay.smem_bytes;
  k.arch = "sm_90a";
  Dim kv_batch(1);
  for (size_t i = 0; i + 2 < r; ++i)
    if (!(c.k_strides[i] == Dim(0))) kv_batch = kv_batch * c.batch[i];
  k.bytes_moved = batch * c.q_len * Dim(4 * d) + kv_batch * c.k_len * Dim(4 * d);
  k.flops = batch * c.q_len * c.k_len * Dim(4 * d);
  return k;
}

}  // namespace kiln
