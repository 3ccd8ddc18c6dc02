// Rolls as gathers (engine/passes/passes.hpp: rolls_as_gathers).
//
// torch.roll exports as two slices of one tensor along an axis, the tail then the head,
// concatenated along that axis: two copy kernels for the slices and one for the concat, each a
// pass over the map (Swin's shifted windows roll the map along H and then W before and after
// every shifted block: 6 copies a roll). A roll is a gather of the axis's positions in a rotated
// order: one copy; and a roll along H then W is one gather of the flattened H x W positions
// (the map viewed as [N, H W, C]).
#include <fmt/format.h>

#include <optional>

#include "engine/ir/graph_queries.hpp"
#include "engine/ir/movement_ops.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

struct Roll {
  int x = -1;          // the rolled tensor
  int64_t axis = 0;    // along
  int64_t shift = 0;   // output position i reads input position (i + shift) mod length
  int64_t length = 0;  // the axis's size
};

// Concat node `n` as a roll of one row-major tensor: [slice(x, s, L), slice(x, 0, s)] along its
// axis, both slices read by it alone.
std::optional<Roll> roll_of(const Graph& g, const Node& n) {
  if (n.op != OpKind::Concat || n.inputs.size() != 2) return std::nullopt;
  const int64_t rank = g.tensor(n.outputs[0]).desc.rank();
  const int64_t axis = movement_axis(n, static_cast<int>(rank));
  int x = -1;
  std::vector<SliceAxis> parts;
  for (int t : n.inputs) {
    const int p = g.tensor(t).producer;
    if (p < 0 || consumers_of(g, t).size() != 1 || is_graph_output(g, t)) return std::nullopt;
    const Node& s = g.nodes()[p];
    if (s.op != OpKind::Slice) return std::nullopt;
    if (x >= 0 && s.inputs[0] != x) return std::nullopt;
    x = s.inputs[0];
    const TensorDesc& xd = g.tensor(x).desc;
    if (xd.layout != Layout::NCHW || !xd.shape[static_cast<size_t>(axis)].is_static() ||
        slice_axis_list(s, static_cast<int>(rank), s.name) != std::vector<int64_t>{axis})
      return std::nullopt;
    std::vector<int64_t> dims(static_cast<size_t>(rank), 1);
    dims[static_cast<size_t>(axis)] = xd.shape[static_cast<size_t>(axis)].value();
    parts.push_back(slice_axes(s, dims)[static_cast<size_t>(axis)]);
  }
  const int64_t len = g.tensor(x).desc.shape[static_cast<size_t>(axis)].value();
  const SliceAxis &a = parts[0], &b = parts[1];
  if (a.step != 1 || b.step != 1 || b.start != 0 || a.len + b.len != len || a.start != b.len ||
      a.len == 0 || b.len == 0)
    return std::nullopt;
  return Roll{x, axis, a.start, len};
}

// Replaces concat node `ci` (roll `r`, or, `inner` given, that roll of inner's output along the
// axis before) by one gather; the new nodes go before it. Returns their number.
int to_gather(Graph& g, int ci, const Roll& r, const std::optional<Roll>& inner) {
  const std::string name = g.nodes()[ci].name;
  const int out = g.nodes()[ci].outputs[0];
  const Shape shape = g.tensor(out).desc.shape;
  const size_t before = g.nodes().size();
  Tensor y;
  if (!inner) {
    std::vector<int64_t> idx(static_cast<size_t>(r.length));
    for (int64_t i = 0; i < r.length; ++i) idx[static_cast<size_t>(i)] = (i + r.shift) % r.length;
    Tensor k = index_constant(g, name + "_positions", idx);
    const std::string gn = fresh_name(g, name + ".gather");
    y = g.add_node("gather", {Tensor{r.x}, k}, {{"axis", AttrValue(r.axis)}}, gn, {gn})[0];
  } else {
    // [.., A, B, ..] viewed as [.., A B, ..]: position (i, j) reads ((i + sa) mod A, (j + sb)
    // mod B).
    const int64_t A = inner->length, B = r.length;
    std::vector<int64_t> idx(static_cast<size_t>(A * B));
    for (int64_t i = 0; i < A; ++i)
      for (int64_t j = 0; j < B; ++j)
        idx[static_cast<size_t>(i * B + j)] = ((i + inner->shift) % A) * B + (j + r.shift) % B;
    Shape flat;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (static_cast<int64_t>(d) == r.axis) continue;
      flat.push_back(static_cast<int64_t>(d) == inner->axis ? Dim(A * B) : shape[d]);
    }
    const std::string fn = fresh_name(g, name + ".flat");
    Tensor f = g.add_node("reshape", {Tensor{inner->x}}, {{"shape", flat}}, fn, {fn})[0];
    const std::string gn = fresh_name(g, name + ".gather");
    Tensor k = index_constant(g, name + "_positions", idx);
    Tensor t = g.add_node("gather", {f, k}, {{"axis", AttrValue(inner->axis)}}, gn, {gn})[0];
    const std::string un = fresh_name(g, name + ".unflat");
    y = g.add_node("reshape", {t}, {{"shape", shape}}, un, {un})[0];
  }
  const int added = static_cast<int>(g.nodes().size() - before);
  for (int i = 0; i < added; ++i) move_last_node_to(g, ci + 1);
  replace_uses(g, out, y.id);
  return added;
}

// Whether the roll that concat node `n` is, is itself rolled along the next axis by a roll that
// alone reads it (that roll then gathers both at once).
bool rolled_again(const Graph& g, const Node& n, const Roll& r) {
  const int out = n.outputs[0];
  const std::vector<int> readers = consumers_of(g, out);
  if (readers.size() != 2 || is_graph_output(g, out)) return false;
  const std::vector<int> cs = consumers_of(g, g.nodes()[readers[0]].outputs[0]);
  if (cs.size() != 1) return false;
  const auto outer = roll_of(g, g.nodes()[cs[0]]);
  return outer && outer->x == out && outer->axis == r.axis + 1;
}

}  // namespace

bool has_roll(const Graph& g) {
  for (const Node& n : g.nodes())
    if (roll_of(g, n)) return true;
  return false;
}

int rolls_as_gathers(Graph& g, std::vector<std::string>* rewritten) {
  int count = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    const auto r = roll_of(g, n);
    if (!r || is_graph_output(g, n.outputs[0]) || rolled_again(g, n, *r)) continue;
    // A roll of a roll along the axis just before, whose result only this roll reads: one gather.
    std::optional<Roll> inner;
    const int p = g.tensor(r->x).producer;
    if (p >= 0 && !is_graph_output(g, r->x) && consumers_of(g, r->x).size() == 2) {
      inner = roll_of(g, g.nodes()[p]);
      if (inner && inner->axis + 1 != r->axis) inner.reset();
    }
    const std::string name = n.name;
    to_gather(g, static_cast<int>(i), *r, inner);
    if (rewritten)
      rewritten->push_back(inner ? fmt::format("{} (with {})", name, g.nodes()[p].name) : name);
    ++count;
  }
  if (count > 0) g.prune();
  return count;
}

}  // namespace kiln
