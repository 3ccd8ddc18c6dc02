// Per-group-kind kernel emitters, dispatched by generate_kernels (codegen/generate.cpp).
#pragma once

#include <optional>

#include "codegen/kernel_spec.hpp"

namespace kiln {

struct EmitContext {
  const Graph& graph;
  const CodegenOptions& opts;
};

KernelSpec emit_pointwise(const EmitContext& cx, const FusionGroup& g);
KernelSpec emit_rownorm(const EmitContext& cx, const FusionGroup& g);
// Two kernels (statistics, apply) for the split schedule, else one.
std::vector<KernelSpec> emit_channelnorm(const EmitContext& cx, const FusionGroup& g);
KernelSpec emit_reduction(const EmitContext& cx, const FusionGroup& g);
// argmax / argmin anchors (codegen/emit_argreduce.cpp; emit_reduction dispatches to it).
KernelSpec emit_arg_reduction(const EmitContext& cx, const FusionGroup& g);
KernelSpec emit_window(const EmitContext& cx, const FusionGroup& g);
KernelSpec emit_copy(const EmitContext& cx, const FusionGroup& g);
// conv2d / matmul anchor + fused epilogue (codegen/contraction/).
KernelSpec emit_contraction(const EmitContext& cx, const FusionGroup& g);
// q @ k^T -> softmax -> @ v in one kernel (codegen/emit_attention.cpp).
KernelSpec emit_attention(const EmitContext& cx, const FusionGroup& g);
// The sm_90a wgmma kernel of an attention group where heuristics/attention_layout.hpp's rule
// picks it, else nothing (codegen/emit_attention_wgmma.cpp; emit_attention asks it first).
std::optional<KernelSpec> emit_attention_wgmma(const EmitContext& cx, const FusionGroup& g);
// Key blocks a split of the mma.sync attention kernel covers (flash-decoding,
// heuristics/attention_layout.hpp: choose_attention_split), 0 when its keys are not split.
int64_t attention_split_blocks(const EmitContext& cx, const FusionGroup& g);
// attention_varlen: a ragged batch's attention, the sequences found from their offsets at run
// time (codegen/emit_attention_varlen.cpp).
KernelSpec emit_attention_varlen(const EmitContext& cx, const FusionGroup& g);
// cumsum along one axis, a CTA per row (codegen/emit_scan.cpp).
KernelSpec emit_scan(const EmitContext& cx, const FusionGroup& g);

}  // namespace kiln
