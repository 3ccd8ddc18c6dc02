// Means over the spatial dims as global average pools (engine/passes/passes.hpp).
#include <fmt/format.h>

#include <set>

#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

// reduce_mean(x [N, C, H, W], axes {2, 3} in any order or sign, keepdims): what
// adaptive_avg_pool2d(x, 1) lowers to in core ATen and what some ONNX exporters write for it.
bool is_spatial_mean(const Graph& g, const Node& n) {
  if (n.op != OpKind::ReduceMean || n.attr_int("keepdims") == 0) return false;
  const TensorDesc& x = g.tensor(n.inputs[0]).desc;
  if (x.rank() != 4 || (x.layout != Layout::NHWC && x.layout != Layout::NCHW)) return false;
  std::set<int64_t> axes;
  for (int64_t a : n.attr_ints("axes")) axes.insert(a < 0 ? a + 4 : a);
  return axes == std::set<int64_t>{2, 3};
}

}  // namespace

int spatial_means_as_pools(Graph& g, std::vector<std::string>* rewritten) {
  int count = 0;
  for (Node& n : g.mutable_nodes()) {
    if (!is_spatial_mean(g, n)) continue;
    // The same output ([N, C, 1, 1] in the input's layout, its dtype): only the kernel changes,
    // to the window family's parallel pool (the reduction kernel reads a channels-last map
    // across its strided spatial dims).
    n.op = OpKind::GlobalAvgpool;
    n.attrs = {};
    if (rewritten) rewritten->push_back(n.name);
    ++count;
  }
  return count;
}

bool has_spatial_mean(const Graph& g) {
  for (const Node& n : g.nodes())
    if (is_spatial_mean(g, n)) return true;
  return false;
}

}  // namespace kiln
