// Channel shuffles of channels-last maps as one gather of the channels (engine/passes/passes.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "engine/base/check.hpp"
#include "engine/ir/graph_queries.hpp"
#include "engine/ir/movement_ops.hpp"
#include "engine/ir/op_table.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"
#include "kiln/error.hpp"

namespace kiln {
namespace {

struct Shuffle {
  int split = -1, swap = -1, merge = -1;  // nodes: reshape to 5-D, transpose(1, 2), reshape back
  int x = -1;                             // the channels-last map
  int64_t groups = 0, per = 0;            // g, C / g
};

// `t` is an intermediate that only node `reader` reads.
bool private_to(const Graph& g, int t, int reader) {
  return g.tensor(t).role == TensorRole::Intermediate && !is_graph_output(g, t) &&
         consumers_of(g, t) == std::vector<int>{reader};
}

// reshape(x [N, C, H, W] NHWC -> [N, g, C/g, H, W]), transpose(perm 0 2 1 3 4), reshape back to
// x's shape, ending at node `merge`; the two inner tensors read by the next step only.
std::optional<Shuffle> match(const Graph& g, int merge) {
  const Node& m = g.nodes()[merge];
  if (m.op != OpKind::Reshape) return std::nullopt;
  const int u = m.inputs[0];
  const int swap = g.tensor(u).producer;
  if (swap < 0 || g.nodes()[swap].op != OpKind::Transpose || !private_to(g, u, merge))
    return std::nullopt;
  if (g.nodes()[swap].attr_ints("perm") != std::vector<int64_t>{0, 2, 1, 3, 4}) return std::nullopt;
  const int v = g.nodes()[swap].inputs[0];
  const int split = g.tensor(v).producer;
  if (split < 0 || g.nodes()[split].op != OpKind::Reshape || !private_to(g, v, swap))
    return std::nullopt;
  const int x = g.nodes()[split].inputs[0];
  const TensorDesc& xd = g.tensor(x).desc;
  const TensorDesc& vd = g.tensor(v).desc;
  if (xd.layout != Layout::NHWC || xd.rank() != 4 || vd.rank() != 5) return std::nullopt;
  const Shape &xs = xd.shape, &vs = vd.shape;
  if (!(g.tensor(m.outputs[0]).desc.shape == xs)) return std::nullopt;
  if (!(vs[0] == xs[0] && vs[3] == xs[2] && vs[4] == xs[3])) return std::nullopt;
  if (!xs[1].is_static() || !vs[1].is_static() || !vs[2].is_static() ||
      vs[1].value() * vs[2].value() != xs[1].value())
    return std::nullopt;
  return Shuffle{split, swap, merge, x, vs[1].value(), vs[2].value()};
}

// Node `n` becomes gather(x, idx, axis 1), its indices a new constant.
void make_channel_gather(Graph& g, int n, int x, const std::vector<int64_t>& idx) {
  TensorDesc d;
  d.dtype = DType::I64;
  d.shape = {Dim(static_cast<int64_t>(idx.size()))};
  Tensor k = g.constant(fresh_name(g, g.nodes()[n].name + "_channels"), d,
                        HostTensor::from_i64(DType::I64, {static_cast<int64_t>(idx.size())}, idx));
  Node& m = g.mutable_nodes()[n];
  m.op = OpKind::Gather;
  m.inputs = {x, k.id};
  m.attrs = {{"axis", AttrValue(int64_t{1})}};
}

// The channels slice node `n` takes of a [N, C, H, W] map (start, step, count), when it slices
// the channels alone.
std::optional<SliceAxis> channel_slice(const Graph& g, const Node& n, int64_t c) {
  if (n.op != OpKind::Slice || slice_axis_list(n, 4, n.name) != std::vector<int64_t>{1})
    return std::nullopt;
  return slice_axes(n, {1, c, 1, 1})[1];
}

// Output channel j * g + i reads input channel i * (C / g) + j: the node `merge` becomes
// gather(x, those indices, axis 1). Where only channel slices read the shuffled map (ShuffleNet
// splits it in halves), each slice becomes the gather of its part of the indices instead: one
// pass over the channels, not a gather and then slices copying its halves.
// Returns the gathers' outputs.
std::vector<int> to_gather(Graph& g, const Shuffle& s) {
  const int64_t c = s.groups * s.per;
  std::vector<int64_t> idx(static_cast<size_t>(c));
  for (int64_t i = 0; i < s.groups; ++i)
    for (int64_t j = 0; j < s.per; ++j) idx[static_cast<size_t>(j * s.groups + i)] = i * s.per + j;
  const int out = g.nodes()[s.merge].outputs[0];
  const std::vector<int> readers = consumers_of(g, out);
  std::vector<SliceAxis> parts;
  for (int r : readers)
    if (auto p = channel_slice(g, g.nodes()[r], c)) parts.push_back(*p);
  if (is_graph_output(g, out) || readers.empty() || parts.size() != readers.size()) {
    make_channel_gather(g, s.merge, s.x, idx);
    return {out};
  }
  std::vector<int> outs;
  for (size_t k = 0; k < readers.size(); ++k) {
    std::vector<int64_t> part;
    for (int64_t e = 0; e < parts[k].len; ++e)
      part.push_back(idx[static_cast<size_t>(parts[k].start + e * parts[k].step)]);
    make_channel_gather(g, readers[k], s.x, part);
    outs.push_back(g.nodes()[readers[k]].outputs[0]);
  }
  return outs;
}

// The gathers' outputs channels-last (shape inference makes a gather's output row-major), and the
// layouts after them inferred again (graph_edit.hpp: reinfer_layouts); false where a graph
// output's layout would change.
bool reinfer_from(Graph& g, size_t first, const std::vector<int>& gathers) {
  for (int t : gathers) {
    if (is_graph_output(g, t) && g.tensor(t).desc.layout != Layout::NHWC) return false;
    g.mutable_tensors()[t].desc.layout = Layout::NHWC;
  }
  return reinfer_layouts(g, first);
}

}  // namespace

bool has_reshape_of_channels_last(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Reshape && g.tensor(n.inputs[0]).desc.layout == Layout::NHWC) return true;
  return false;
}

int channel_shuffles_as_gathers(Graph& g, std::vector<std::string>* rewritten) {
  int count = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const std::optional<Shuffle> s = match(g, static_cast<int>(i));
    if (!s) continue;
    // On a copy: a rewrite that would change a graph output's layout is not made.
    Graph h = g;
    // An op after it that refuses a channels-last input leaves the shuffle as it is too.
    bool ok = false;
    try {
      ok = reinfer_from(h, i, to_gather(h, *s));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::User) throw;
    }
    if (!ok) continue;
    g = std::move(h);
    if (rewritten)
      rewritten->push_back(
          fmt::format("{} ({} groups of {})", g.nodes()[i].name, s->groups, s->per));
    ++count;
  }
  if (count > 0) g.prune();  // the 5-D reshapes and transposes (and gathers only slices read)
  return count;
}

}  // namespace kiln
