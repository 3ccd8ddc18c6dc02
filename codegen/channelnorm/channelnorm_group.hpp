// What every channel-norm emitter (codegen/channelnorm/*.cpp) starts from: the group's facts
// (anchor, channels, groups, spatial dims, prologue, epilogue), the kernel preamble (name,
// heading, device helpers), and the per-element pieces they share. The layout, which form and its
// geometry, comes from heuristics/channelnorm_layout.hpp.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/emit.hpp"
#include "codegen/pointwise_expr.hpp"
#include "heuristics/channelnorm_layout.hpp"

namespace kiln {

struct ChannelNormGroup {
  ChannelNormGroup(const Graph& g, const FusionGroup& grp);

  const Graph& g;
  const FusionGroup& grp;
  const Node& A;  // the groupnorm / instancenorm
  const int in_t, out_t;
  const TensorDesc& xd;
  const Shape X;
  const int r;
  int64_t C = 0, G = 0, Cg = 0;  // channels, groups, channels per group
  Shape spatial;                 // X's dims 2..
  Dim S;                         // their product
  Shape strides;                 // X's element strides
  bool channels_last = false;    // channel innermost in memory (NHWC)
  // Dense channels-last (strides C*S, 1, then row-major spatial times C) with static C and S,
  // every output of X's shape: what the cluster and split forms need.
  bool dense = false;
  Shape dense_strides;  // those strides (when C and S are static)
  std::vector<int> prologue, epilogue;
  std::vector<int> ident;  // 0..r-1: a tensor of X's shape read at the element's coordinates

  bool is_out(int t) const;
  bool from_prologue(int t) const;
  // The ElementLoader key of tensor t read at the element's own coordinates.
  std::string identity_key(int t) const;
  // The dense inputs of the input's vector width the split form holds in registers: the
  // anchor's input or the prologue's.
  std::vector<int> register_inputs() const;
  // The layout's view of the group.
  ChannelNormProblem problem() const;

  // The kernel preamble every form shares: the name with `detail` ("g32_cluster8"), the heading
  // comment naming the group (and `extra` comment lines), the device helpers of
  // codegen/device/kiln_channelnorm.cuh when `helpers`.
  GroupKernel kernel(const std::string& detail, const std::string& extra, bool helpers) const;
  // The load (as f32) of the norm's per-channel parameter `slot` (1: scale, 2: shift) at element
  // coordinates `c`: only the channel coordinate (dim 1) indexes it.
  std::string channel_param(size_t slot, const std::vector<std::string>& c, DimParams& dp) const;
  // The prologue for one element: its values in `vals`, the anchor input's value returned (a
  // register-held or loaded input where no prologue computes it). Prologue outputs are stored
  // when `store`.
  std::string element(Writer& w, ElementLoader& ld, std::map<int, std::string>* vals,
                      bool store) const;
  // The epilogue from `seed` (the normalized value as the anchor's output, "y"), then every group
  // output: into o<t>[l] for those in `vector_outs`, else stored; prologue outputs skipped when
  // `skip_prologue`.
  void outputs(Writer& w, ElementLoader& ld, const std::map<int, std::string>& seed,
               const std::vector<int>& vector_outs, bool skip_prologue) const;
};

// The forms (codegen/channelnorm/cluster.cpp with onewave.cpp, split.cpp, pergroup.cpp).
KernelSpec emit_channelnorm_cluster(const ChannelNormGroup& cn, const ChannelNormCluster& l);
std::vector<KernelSpec> emit_channelnorm_split(const ChannelNormGroup& cn,
                                               const ChannelNormSplit& l);
KernelSpec emit_channelnorm_pergroup(const ChannelNormGroup& cn, int threads);

}  // namespace kiln
