// Conv filters laid out as their channels-last inputs (engine/passes/passes.hpp).
#include <map>

#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

// A conv2d over NHWC activations whose filter is a constant held [K, C, R, S] (NCHW).
bool has_nchw_filter(const Graph& g, const Node& n) {
  if (n.op != OpKind::Conv2d) return false;
  const TensorInfo& x = g.tensor(n.inputs[0]);
  const TensorInfo& w = g.tensor(n.inputs[1]);
  return x.desc.layout == Layout::NHWC && x.desc.rank() == 4 && w.role == TensorRole::Constant &&
         w.data.has_value() && w.desc.layout == Layout::NCHW && w.desc.rank() == 4;
}

}  // namespace

int channels_last_filters(Graph& g) {
  std::map<int, int> relaid;  // filter -> its NHWC copy (a filter several convs share: once)
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (!has_nchw_filter(g, g.nodes()[i])) continue;
    const int wt = g.nodes()[i].inputs[1];
    if (!relaid.count(wt)) {
      const TensorInfo& w = g.tensor(wt);
      TensorDesc d = w.desc;
      d.layout = Layout::NHWC;
      // Made on first use, like the filter itself may be (a deferred or file-backed constant).
      LazyHostTensor data = w.data;
      Tensor nw = g.constant_deferred(fresh_name(g, w.name + "_krsc"), d,
                                      [data]() { return data->relayout(Layout::NHWC); });
      relaid[wt] = nw.id;
    }
    g.mutable_nodes()[i].inputs[1] = relaid[wt];
  }
  if (!relaid.empty()) g.prune();  // the NCHW filters nothing else reads
  return static_cast<int>(relaid.size());
}

bool has_channels_last_conv_with_nchw_filter(const Graph& g) {
  for (const Node& n : g.nodes())
    if (has_nchw_filter(g, n)) return true;
  return false;
}

}  // namespace kiln
