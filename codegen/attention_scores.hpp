// The score functor of a fused attention kernel (codegen/device/kiln_attention.cuh's Score):
// the chain's scale, additive mask and where, in graph order, on one raw score; masks read
// through their broadcast strides (stride 0 where they broadcast).
#pragma once

#include <string>
#include <vector>

#include "codegen/contraction_common.hpp"
#include "engine/planner/attention_pattern.hpp"

namespace kiln {

struct AttentionScores {
  std::string device;             // `struct KcScores { ... };`
  std::vector<std::string> body;  // kernel-body lines that fill `KcScores sc` (batch idx b<i>)
  std::string name_suffix;        // "_causal", "_maskadd", "_maskbool" as they apply
};

// The body indexes the scores' batch dims with the variables b0 .. b<n-1> the emitter defines.
AttentionScores attention_scores(const Graph& g, const AttentionChain& c, contraction::ArgList& a);

}  // namespace kiln
