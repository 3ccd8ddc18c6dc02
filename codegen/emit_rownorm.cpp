// RowNorm groups: layernorm / rmsnorm (statistics over the trailing dims from `axis`) and softmax /
// log_softmax (over one axis), with a fused elementwise prologue (applied on load) and epilogue
// (applied on store), and extra outputs for intermediates needed elsewhere.
//
// The layout is heuristics' RowSchedule (heuristics/schedule.cpp): with a static row length the
// whole row is held in registers (codegen/rownorm/registers.cpp), one warp per row for rows of
// <= 1024 elements and one CTA per row for longer rows; symbolic or very long rows use the
// looped form (codegen/rownorm/looped.cpp).
//
// Rows are contiguous when the normalized dims are the trailing dims and every full-size tensor
// is row-major: then dense tensors use vector loads/stores. Otherwise (softmax over a middle
// axis, NHWC tensors) every element is addressed through its coordinates.
#include "codegen/emit.hpp"
#include "codegen/rownorm/rownorm_kernel.hpp"
#include "engine/base/check.hpp"

namespace kiln {

KernelSpec emit_rownorm(const EmitContext& cx, const FusionGroup& grp) {
  KILN_ASSERT(grp.anchor >= 0, "rownorm group {} without anchor", grp.id);
  return RowNormKernel(cx, grp).emit();
}

}  // namespace kiln
