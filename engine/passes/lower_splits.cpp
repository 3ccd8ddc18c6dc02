// Splits as slices (engine/passes/passes.hpp): one single-output slice node per split output.
#include <fmt/format.h>

#include "engine/base/check.hpp"
#include "engine/ir/movement_ops.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {

bool has_split(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Split) return true;
  return false;
}

int lower_splits(Graph& g, std::vector<std::string>* lowered) {
  std::vector<Node> nodes;
  int count = 0;
  for (const Node& n : g.nodes()) {
    if (n.op != OpKind::Split) {
      nodes.push_back(n);
      continue;
    }
    const TensorDesc& in = g.tensor(n.inputs[0]).desc;
    const int64_t axis = movement_axis(n, in.rank());
    int64_t at = 0;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const Dim& size = g.tensor(n.outputs[k]).desc.shape[axis];
      KILN_ASSERT(size.is_static(), "split {}: output {} has a symbolic size", n.name, k);
      Node s;
      s.op = OpKind::Slice;
      s.name = fmt::format("{}.{}", n.name, k);
      s.inputs = n.inputs;
      s.outputs = {n.outputs[k]};
      s.attrs = {{"starts", std::vector<int64_t>{at}},
                 {"ends", std::vector<int64_t>{at + size.value()}},
                 {"axes", std::vector<int64_t>{axis}},
                 {"steps", std::vector<int64_t>{1}}};
      at += size.value();
      nodes.push_back(std::move(s));
    }
    if (lowered) lowered->push_back(fmt::format("{} ({} slices)", n.name, n.outputs.size()));
    ++count;
  }
  if (count == 0) return 0;
  g.mutable_nodes() = std::move(nodes);
  std::vector<TensorInfo>& ts = g.mutable_tensors();
  for (size_t i = 0; i < g.nodes().size(); ++i)
    for (int t : g.nodes()[i].outputs) ts[t].producer = static_cast<int>(i);
  return count;
}

}  // namespace kiln
