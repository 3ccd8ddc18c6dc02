// How many nodes of a graph run one op: what the pass tests count before and after a rewrite.
#pragma once

#include "kiln/graph.hpp"

namespace kiln::test {

inline int count_op(const Graph& g, OpKind op) {
  int n = 0;
  for (const Node& x : g.nodes()) n += x.op == op;
  return n;
}

}  // namespace kiln::test
