// Graph edits shared by the passes (engine/passes/graph_edit.hpp).
#include "engine/passes/graph_edit.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "engine/ir/graph_queries.hpp"
#include "engine/ir/op_table.hpp"

namespace kiln {

std::string fresh_name(const Graph& g, const std::string& stem) {
  std::string n = stem;
  for (int i = 2; g.find(n) >= 0; ++i) n = fmt::format("{}_{}", stem, i);
  return n;
}

void move_last_node_to(Graph& g, int at) {
  std::vector<Node>& nodes = g.mutable_nodes();
  const int last = static_cast<int>(nodes.size()) - 1;
  std::rotate(nodes.begin() + at, nodes.begin() + last, nodes.end());
  for (TensorInfo& t : g.mutable_tensors()) {
    if (t.producer == last)
      t.producer = at;
    else if (t.producer >= at)
      ++t.producer;
  }
}

void replace_uses(Graph& g, int from, int to) {
  for (Node& n : g.mutable_nodes())
    for (int& t : n.inputs)
      if (t == from) t = to;
}

bool rows_dense(const Graph& g, int t) {
  for (;;) {
    const int p = g.tensor(t).producer;
    if (p < 0) return true;
    const Node& n = g.nodes()[p];
    if (n.op == OpKind::Reshape) {
      t = n.inputs[0];
      continue;
    }
    if (n.op == OpKind::Transpose) {
      const int in = n.inputs[0], q = g.tensor(in).producer;
      return q >= 0 && g.nodes()[q].op == OpKind::Matmul && consumers_of(g, in).size() == 1;
    }
    return op_info(n.op).category != OpCategory::Movement;
  }
}

}  // namespace kiln
