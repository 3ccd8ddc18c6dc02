// The fusion plan: the graph partitioned into groups, each of which becomes one kernel.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/planner/attention_pattern.hpp"
#include "kiln/graph.hpp"

namespace kiln {

// The schedule family a group needs; codegen emits one kernel template per kind.
enum class GroupKind {
  Pointwise,    // elementwise DAG (with broadcasting) over one output shape
  RowNorm,      // row statistics over the innermost (contiguous) dims: layernorm, rmsnorm, softmax
  ChannelNorm,  // statistics over groups of channels x spatial: groupnorm, instancenorm
  Reduction,    // reduce_* (with pointwise prologue/epilogue)
  Window,       // pooling
  Contraction,  // conv2d / matmul anchor + epilogue (the contraction issue fills these in)
  Copy,         // movement that could not be folded (transpose/reshape materialized)
  Attention,    // q @ k^T (scaled), softmax, @ v in one kernel: the scores stay on chip
  View,         // a movement node made a view by the engine passes: no kernel
  Scan,         // cumsum along one axis (with pointwise prologue/epilogue): a block-wide scan
  // attention_varlen alone: a ragged batch's attention, sequences found from the offsets at run
  // time (nothing fuses into it: its operands are read as they are in memory)
  AttentionVarlen,
};
const char* group_kind_name(GroupKind k);

struct FusionGroup {
  int id = 0;
  GroupKind kind = GroupKind::Pointwise;
  int anchor = -1;           // node index of the reduction/norm/contraction/window op, -1 if none
  std::vector<int> nodes;    // node indices in topological order
  std::vector<int> inputs;   // tensor ids read from outside the group (inputs, constants, others)
  std::vector<int> outputs;  // tensor ids written to memory (graph outputs or used outside)
  std::string name;          // readable kernel-name stem: "layernorm_bf16_add_gelu"
  std::vector<std::string> why;  // one line per boundary decision ("gelu -> matmul: contraction")
  // Attention groups: the chain the planner matched (codegen reads it, never matches again).
  std::optional<AttentionChain> attention;
};

struct PlanOptions {
  bool fusion = true;  // false: one group per node (KILN_DISABLE=fusion)
  // Attention chains (engine/attention_pattern.hpp) as one kernel: needs mma.sync (sm_80+);
  // KILN_SCHEDULE attention.fused=2 switches it off.
  bool fused_attention = true;
  int sm = 90;
};

struct Plan {
  std::vector<FusionGroup> groups;  // in a valid execution order
};

Plan plan_fusion(const Graph& g, const PlanOptions& opts = {});
// Human-readable plan (kiln plan): groups, their nodes, and why each boundary is there.
std::string plan_to_string(const Graph& g, const Plan& p);

}  // namespace kiln
