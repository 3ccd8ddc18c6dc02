// Movement ops that move nothing (engine/passes/passes.hpp: drop_identity_movements).
#include <algorithm>

#include "engine/ir/graph_queries.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

// A pad of zero width on every side, or a slice with unit steps whose result has its input's
// shape (so it starts at 0 along every axis and keeps every element), in the input's layout.
bool is_identity_movement(const Graph& g, const Node& n) {
  if (n.op != OpKind::Pad && n.op != OpKind::Slice) return false;
  const TensorDesc& in = g.tensor(n.inputs[0]).desc;
  const TensorDesc& out = g.tensor(n.outputs[0]).desc;
  if (is_graph_output(g, n.outputs[0]) || in.layout != out.layout || in.shape != out.shape ||
      in.dtype != out.dtype)
    return false;
  if (n.op == OpKind::Pad) {
    const auto& pads = n.attr_ints("pads");
    return std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
  }
  // A slice takes its data operand alone (starts, ends, axes and steps are attributes).
  if (n.inputs.size() != 1) return false;
  const auto& steps = n.attr_ints("steps");
  return std::all_of(steps.begin(), steps.end(), [](int64_t s) { return s == 1; });
}

}  // namespace

bool has_identity_movement(const Graph& g) {
  for (const Node& n : g.nodes())
    if (is_identity_movement(g, n)) return true;
  return false;
}

int drop_identity_movements(Graph& g, std::vector<std::string>* dropped) {
  int count = 0;
  for (const Node& n : g.nodes()) {
    if (!is_identity_movement(g, n)) continue;
    replace_uses(g, n.outputs[0], n.inputs[0]);
    if (dropped) dropped->push_back(n.name);
    ++count;
  }
  if (count > 0) g.prune();
  return count;
}

}  // namespace kiln
