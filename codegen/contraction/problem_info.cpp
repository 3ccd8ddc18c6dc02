// The heuristics' view of a conv2d / matmul problem (heuristics/contraction_config.hpp): the GEMM
// dims with symbolic ones estimated, and which kernel paths its operands allow.
#include <algorithm>

#include "codegen/contraction_common.hpp"
#include "heuristics/device_info.hpp"

namespace kiln::contraction {

int64_t symbol_guess(const Problem& p) {
  // Symbolic dims are estimated: tiles are chosen once per graph. A conv's symbol is the batch
  // size (32 is typical for inference serving); a matmul's is usually tokens (batch x sequence).
  return p.is_conv ? 32 : 2048;
}

ContractionProblemInfo problem_info(const Problem& p_in, int sm, bool arch_specific) {
  const Problem p = fold_matmul_batch(p_in);  // as emit_mma() sees it
  const int64_t guess = symbol_guess(p);
  auto est = [&](const Dim& d, bool* estimated) {
    if (d.is_static()) return d.value();
    *estimated = true;
    std::vector<std::string> syms;
    d.symbols(&syms);
    Bindings b;
    for (auto& s : syms) b[s] = guess;
    return std::max<int64_t>(1, d.eval(b));
  };
  ContractionProblemInfo info;
  DeviceInfo dev = default_device_info(fmt::format("sm_{}", sm));
  info.sm = sm;
  info.sm_count = dev.sm_count;
  info.smem_optin = dev.smem_per_block_optin;
  info.dtype = p.dtype;
  info.mma_ok = mma_supported(p);
  info.simt_ok = simt_supported(p);
  info.grouped_ok = grouped_supported(p, sm);
  info.wgmma_ok = arch_specific && sm == 90 && wgmma_supported(p);
  info.tma_gemm = info.wgmma_ok && tma_supported(p);
  info.tma_spatial = info.wgmma_ok && !info.tma_gemm && tma_spatial_supported(p);
  info.tma_im2col = info.tma_spatial && p.im2col_allowed && tma_im2col_supported(p);
  info.tma_rowfold =
      info.wgmma_ok && !info.tma_gemm && p.rowfold_allowed && tma_rowfold_supported(p);
  bool e = false;
  if (p.is_conv) {
    info.m = est(p.conv.n * p.conv.oh * p.conv.ow, &e);
    if (info.tma_spatial || info.tma_rowfold) {
      info.images = est(p.conv.n, &e);
      info.oh = p.conv.oh.value();
      info.ow = p.conv.ow.value();
    }
    info.n = p.conv.k;
    info.k = p.conv.r * p.conv.s * p.conv.c / p.conv.groups;
  } else {
    info.m = est(p.mm.m, &e);
    info.n = est(p.mm.n, &e);
    info.k = est(p.mm.k, &e);
    Dim b(1);
    for (const Dim& d : p.mm.batch) b = b * d;
    info.batch = est(b, &e);
  }
  info.m_is_estimate = e;
  return info;
}

}  // namespace kiln::contraction
