// Pads of no width (engine/passes/passes.hpp: drop_empty_pads).
#include <algorithm>

#include "engine/ir/graph_queries.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

bool is_empty_pad(const Graph& g, const Node& n) {
  if (n.op != OpKind::Pad) return false;
  const auto& pads = n.attr_ints("pads");
  return std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }) &&
         !is_graph_output(g, n.outputs[0]) &&
         g.tensor(n.inputs[0]).desc.layout == g.tensor(n.outputs[0]).desc.layout;
}

}  // namespace

bool has_empty_pad(const Graph& g) {
  for (const Node& n : g.nodes())
    if (is_empty_pad(g, n)) return true;
  return false;
}

int drop_empty_pads(Graph& g, std::vector<std::string>* dropped) {
  int count = 0;
  for (const Node& n : g.nodes()) {
    if (!is_empty_pad(g, n)) continue;
    replace_uses(g, n.outputs[0], n.inputs[0]);
    if (dropped) dropped->push_back(n.name);
    ++count;
  }
  if (count > 0) g.prune();
  return count;
}

}  // namespace kiln
