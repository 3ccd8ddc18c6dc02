// ChannelNorm groups: groupnorm / instancenorm (statistics per (n, group) over the group's
// channels and all spatial positions), NCHW or NHWC, with an elementwise prologue and epilogue.
// The layout (heuristics/channelnorm_layout.hpp) picks the form and its geometry; each form has
// its emitter in codegen/channelnorm/: the sm_90 cluster form and its one-wave variant
// (cluster.cpp, onewave.cpp), the split statistics + apply kernels (split.cpp) and the per-group
// kernel every shape can take (pergroup.cpp).
#include "codegen/channelnorm/channelnorm_group.hpp"
#include "codegen/emit.hpp"
#include "engine/base/check.hpp"

namespace kiln {

std::vector<KernelSpec> emit_channelnorm(const EmitContext& cx, const FusionGroup& grp) {
  KILN_ASSERT(grp.anchor >= 0, "channelnorm group {} without anchor", grp.id);
  const ChannelNormGroup cn(cx.graph, grp);
  const ChannelNormTarget target{cx.opts.sm, cx.opts.sm_count, cx.opts.l2_bytes};
  const ChannelNormLayout l = choose_channelnorm_layout(cn.problem(), target, cx.opts.schedule);
  switch (l.form) {
    case ChannelNormForm::Cluster:
    case ChannelNormForm::ClusterOneWave:
      return {emit_channelnorm_cluster(cn, l.cluster)};
    case ChannelNormForm::Split:
      return emit_channelnorm_split(cn, l.split);
    case ChannelNormForm::PerGroup:
      break;
  }
  return {emit_channelnorm_pergroup(cn, l.pergroup_threads)};
}

}  // namespace kiln
