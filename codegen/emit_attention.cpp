// Attention groups: q @ k^T (scaled) -> softmax -> @ v as one flash-attention kernel
// (codegen/device/kiln_attention.cuh). One CTA per (batch element, 64 query rows); the operands
// are read through their static strides, so head splits and merges that are views cost nothing.
#include <fmt/format.h>

#include <cmath>

#include "codegen/contraction_common.hpp"
#include "codegen/emit.hpp"
#include "codegen/kernel_assembly.hpp"
#include "codegen/writer.hpp"
#include "engine/base/check.hpp"
#include "engine/planner/attention_pattern.hpp"

namespace kiln {

KernelSpec emit_attention(const EmitContext& cx, const FusionGroup& grp) {
  const Graph& g = cx.graph;
  KILN_ASSERT(grp.attention.has_value(), "attention group {} carries no chain", grp.id);
  KILN_ASSERT(cx.opts.sm >= 80, "attention group {}: the fused kernel needs sm_80+", grp.id);
  const AttentionChain& c = *grp.attention;
  const TensorDesc& qd = g.tensor(c.q).desc;
  const size_t r = qd.shape.size();
  const bool bf16 = qd.dtype == DType::BF16;
  const int64_t d = c.head_dim;
  const Dim tq = qd.shape[r - 2];
  const Shape& kd = g.tensor(c.k).desc.shape;
  const Dim tk = c.k_rows ? kd[r - 2] : kd[r - 1];

  contraction::ArgList a;
  const std::string qs = a.tensor(g, c.q, true), ks = a.tensor(g, c.k, true),
                    vs = a.tensor(g, c.v, true), os = a.tensor(g, c.o, false);
  const std::string tq_c = a.dim(tq), tk_c = a.dim(tk);
  Dim batch(1);
  for (size_t i = 0; i + 2 < r; ++i) batch = batch * qd.shape[i];
  const Dim qtiles = (tq + Dim(63)) / Dim(64);
  const std::string qt_c = a.dim(qtiles);
  std::vector<std::string> bdim(r - 2);  // registered outermost first (the loop reads innermost)
  for (size_t i = 0; i + 2 < r; ++i) bdim[i] = a.dim(qd.shape[i]);
  // scores * scale, in the log2 domain of exp2
  const double scale_log2 = c.scale_value * 1.4426950408889634;

  std::string name = fmt::format("attention_{}_d{}", dtype_name(qd.dtype), d);
  if (tq.is_static() && tk.is_static()) name += fmt::format("_q{}_k{}", tq.value(), tk.value());

  const int ld = static_cast<int>(d) + 8;  // KcAttention's layout (the kernel asserts it)
  const int smem = (64 * ld + 4 * 64 * ld) * 2;
  Writer dev;
  dev.line("typedef KcAttention<{}, {}> KA;", d, bf16 ? "true" : "false");
  dev.line("static_assert(KA::SMEM_BYTES == {}, \"attention shared memory\");", smem);
  Writer w;
  w.line("extern __shared__ __align__(128) unsigned short kc_smem[];");
  w.line("const long long qt = (long long)blockIdx.x % {};", qt_c);
  w.line("long long bz = (long long)blockIdx.x / {};", qt_c);
  std::string qo = "0", ko = "0", vo = "0", oo = "0";
  for (size_t i = r - 2; i-- > 0;) {  // innermost batch dim first
    w.line("const long long b{} = bz % {}; bz /= {};", i, bdim[i], bdim[i]);
    qo += fmt::format(" + b{} * {}LL", i, c.q_strides[i]);
    ko += fmt::format(" + b{} * {}LL", i, c.k_strides[i]);
    vo += fmt::format(" + b{} * {}LL", i, c.v_strides[i]);
    oo += fmt::format(" + b{} * {}LL", i, c.o_strides[i]);
  }
  w.line(
      "KA::run(kc_smem, {} + ({}), {}LL, {} + ({}), {}LL, {} + ({}), {}LL, {} + ({}), {}LL, "
      "(int){}, (int){}, (int)(qt * 64), {:.9g}f);",
      qs, qo, c.q_strides[r - 2], ks, ko, c.k_strides[r - 2], vs, vo, c.v_strides[r - 2], os, oo,
      c.o_strides[r - 2], tq_c, tk_c, scale_log2);

  KernelSpec k;
  k.name = k.entry = name;
  const std::string device = contraction::device_preamble() +
                             contraction::device_text("contraction_mma.cuh") + "\n" +
                             contraction::device_text("kiln_attention.cuh") + "\n" + dev.str();
  k.source = assemble_kernel(device, {name, "KA::THREADS", 0, 0, a.params()}, w.str());
  k.args = a.args();
  k.grid = {qtiles * batch, Dim(1), Dim(1)};
  k.block = {128, 1, 1};
  k.smem_bytes = smem;
  // Q, K, V read once, O written once; the FLOPs of both products.
  k.bytes_moved = batch * (tq * Dim(2 * d) + tk * Dim(2 * d) + tk * Dim(2 * d) + tq * Dim(2 * d));
  k.flops = batch * tq * tk * Dim(4 * d);
  return k;
}

}  // namespace kiln
