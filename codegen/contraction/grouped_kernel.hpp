// What the grouped / depthwise conv emitters share (grouped.cpp: the sliding-window and chunked
// SIMT kernels; depthwise_tiled.cpp: the shared-memory tile kernel): the argument registry and
// writer of one kernel, and the epilogue and stores of a thread's outputs.
#pragma once

#include <string>
#include <vector>

#include "codegen/contraction_common.hpp"

namespace kiln::contraction {

struct GroupedKernel {
  const Problem& p;
  const GroupedConvLayout& L;
  ArgList a = ArgList();
  Writer b = Writer();
  std::string xs = "", ws = "";
  std::vector<std::string> xst = {}, wst = {};
  int tcv = 0;  // output channels of a CTA
};

// The fused epilogue per pixel and channel, then each output's channel vector: 16-byte (or
// narrower) stores where the output is dense NHWC, else one element at a time. Expects `n`,
// `oh`, `ow0` (the thread's first output column), `k0` (its first channel) and
// `acc[pixels][vec]` in scope.
void emit_grouped_stores(GroupedKernel& k, int vec, int pixels);

// conv_<dtype>_nhwc_{dwRxS|gG_RxS}[_sS][_dD]_<tile>_<epilogue>.
std::string grouped_kernel_name(const Problem& p, const GroupedConvLayout& L);

// The tiled depthwise kernel (L.tile.ok).
KernelSpec emit_depthwise_tiled(const Problem& p, const GroupedConvLayout& L);

}  // namespace kiln::contraction
