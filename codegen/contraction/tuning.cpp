// The contraction entry points: emit_contraction (the rules' config, or the autotuned one where
// it is a candidate) and the autotuning sites (every candidate's kernel, keyed by shape class).
#include <algorithm>

#include "codegen/canonical_source.hpp"
#include "codegen/contraction_common.hpp"
#include "codegen/emit.hpp"
#include "heuristics/tuning_table.hpp"

namespace kiln {
namespace contraction {

KernelSpec emit_with_config(const Problem& p, const ContractionConfig& cfg, int sm) {
  switch (cfg.kind) {
    case ContractionConfig::Kind::Mma:
    case ContractionConfig::Kind::Wgmma:
      return emit_mma(p, cfg, sm);
    case ContractionConfig::Kind::Simt:
      return emit_simt(p);
    case ContractionConfig::Kind::Grouped:
      return emit_grouped(p, sm);
    case ContractionConfig::Kind::Direct:
      break;
  }
  return emit_direct(p);
}

}  // namespace contraction

namespace {

// What decides a contraction's tiling beyond its GEMM dims (part of the tuning key).
std::string structure_signature(const contraction::Problem& p) {
  if (p.is_conv) {
    const contraction::ConvProblem& c = p.conv;
    return fmt::format("conv_{}_r{}s{}_st{}x{}_p{}x{}_d{}x{}_g{}_c{}",
                       layout_name(p.graph->tensor(p.x).desc.layout), c.r, c.s, c.stride_h,
                       c.stride_w, c.pad_t, c.pad_l, c.dil_h, c.dil_w, c.groups, c.c);
  }
  return fmt::format("matmul_{}{}", p.mm.ta ? "t" : "n", p.mm.tb ? "t" : "n");
}

// The KILN_SCHEDULE contraction switches, onto the problem (before problem_info(): im2col).
void apply_schedule(const ScheduleOverrides& s, contraction::Problem* p) {
  p->im2col_allowed = s.contraction_im2col != 2;
  p->rowfold_allowed = s.contraction_rowfold != 2;
  p->prefetch_residual = s.contraction_prefetch != 2;
  p->tma_store = s.contraction_tmastore != 2;
}

// The symbols of the problem at the estimates problem_info() uses.
std::map<std::string, int64_t> estimate_bindings(const contraction::Problem& p) {
  std::map<std::string, int64_t> b;
  std::vector<std::string> syms;
  for (const std::vector<int>* list : {&p.group->inputs, &p.group->outputs})
    for (int t : *list)
      for (const Dim& d : p.graph->tensor(t).desc.shape) d.symbols(&syms);
  for (const std::string& s : syms) b[s] = contraction::symbol_guess(p);
  return b;
}

}  // namespace

KernelSpec emit_contraction(const EmitContext& cx, const FusionGroup& g) {
  contraction::Problem p = contraction::describe(cx.graph, g);
  // One kernel form (its layout is a pure rule): nothing to choose or tune.
  if (p.is_conv_transpose) return contraction::emit_conv_transpose(p);
  apply_schedule(cx.opts.schedule, &p);
  ContractionProblemInfo info = contraction::problem_info(p, cx.opts.sm, cx.opts.arch_specific);
  ContractionConfig cfg = choose_contraction_config(info);
  if (cx.opts.tuned) {
    std::optional<ContractionConfig> t =
        cx.opts.tuned(contraction_tuning_key(info, structure_signature(p)));
    if (t) {
      std::vector<ContractionConfig> ok = contraction_candidates(info, 64);
      if (std::find(ok.begin(), ok.end(), *t) != ok.end()) cfg = *t;
    }
  }
  return contraction::emit_with_config(p, cfg, cx.opts.sm);
}

std::vector<TuningSite> contraction_tuning_sites(const Graph& g, const Plan& plan,
                                                 const CodegenOptions& opts) {
  std::vector<TuningSite> out;
  for (const FusionGroup& grp : plan.groups) {
    if (grp.kind != GroupKind::Contraction) continue;
    contraction::Problem p = contraction::describe(g, grp);
    if (p.is_conv_transpose) continue;  // one kernel form
    apply_schedule(opts.schedule, &p);
    ContractionProblemInfo info = contraction::problem_info(p, opts.sm, opts.arch_specific);
    TuningSite site;
    site.group = grp.id;
    site.key = contraction_tuning_key(info, structure_signature(p));
    site.configs = contraction_candidates(info);
    if (site.configs.size() < 2) continue;  // one way to run it: nothing to tune
    for (const ContractionConfig& c : site.configs) {
      // As generate_kernels() writes it, so that the winner's compile is reused by the plan.
      KernelSpec k = contraction::emit_with_config(p, c, opts.sm);
      k.source = canonical_source(k.source);
      site.kernels.push_back(std::move(k));
    }
    site.bindings = estimate_bindings(p);
    out.push_back(std::move(site));
  }
  return out;
}

}  // namespace kiln
