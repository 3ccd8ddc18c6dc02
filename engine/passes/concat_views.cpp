// Concat elimination (engine/passes/passes.hpp: fold_concat_views): the producers of a concat's
// inputs store straight into their place in its output, and the concat costs no copy.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "engine/base/check.hpp"
#include "engine/ir/graph_queries.hpp"
#include "engine/ir/movement_ops.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"
#include "engine/passes/strided_views.hpp"

namespace kiln {

namespace {

// The element offsets of concat node `i`'s inputs in a root where its output starts at `base`
// with `strides`; none where one would not be 16-byte aligned.
std::optional<std::vector<Dim>> places(const Graph& g, int i, const std::vector<int64_t>& strides,
                                       const Dim& base) {
  const Node& n = g.nodes()[i];
  const TensorDesc& od = g.tensor(n.outputs[0]).desc;
  const int64_t axis = movement_axis(n, od.rank());
  const int64_t es = static_cast<int64_t>(dtype_size(od.dtype));
  const int64_t st = strides[axis];
  std::vector<Dim> offsets;
  Dim start(0);
  for (int t : n.inputs) {
    if (!offset_aligned(start, st, es)) return std::nullopt;
    offsets.push_back(base + start * Dim(st));
    start = start + g.tensor(t).desc.shape[axis];
  }
  return offsets;
}

// Inserts `identity(src)` as node `at` (before the concat that reads it: nodes stay in
// topological order) and returns its output, a fresh intermediate like `src`.
int insert_identity(Graph& g, int at, int src, const std::string& name) {
  const std::string nn = fresh_name(g, name);
  const Tensor out = g.add_node("identity", {Tensor{src}}, {}, nn, {nn})[0];
  move_last_node_to(g, at);
  return out.id;
}

// Whether concat input `t` (input `k` of node `i`, placed at `offset` with `strides`) can be
// written in place: by a kernel that stores through strides, or by an earlier concat that
// becomes a view node too (its own inputs then land in this buffer); its other readers take it
// at any strides, and no earlier input of the same concat already takes it.
bool written_in_place(const Graph& g, int i, size_t k, const std::vector<int64_t>& strides,
                      const Dim& offset) {
  const Node& n = g.nodes()[i];
  const int t = n.inputs[k];
  if (std::find(n.inputs.begin(), n.inputs.begin() + static_cast<long>(k), t) !=
      n.inputs.begin() + static_cast<long>(k))
    return false;
  if (!may_become_view(g, t)) return false;
  for (int c : consumers_of(g, t))
    if (c != i && op_info(g.nodes()[c].op).role != FusionRole::Elementwise) return false;
  const int p = g.tensor(t).producer;
  if (p >= 0 && g.nodes()[p].op == OpKind::Concat)
    return g.nodes()[p].inputs.size() >= 2 && places(g, p, strides, offset).has_value();
  return writer_stores_strided(g, p);
}

// Concat node `i` as a view node: every input becomes a view of the output (through an
// identity copy where its producer cannot write in place). False (nothing changed) where the
// output's strides are not static or an input's place would not be aligned.
bool eliminate(Graph& g, int i, std::vector<std::string>* what) {
  const Node& n = g.nodes()[i];
  const int out = n.outputs[0];
  const TensorInfo& to = g.tensor(out);
  if (to.role != TensorRole::Intermediate || n.inputs.size() < 2) return false;
  // A view of a concat output (a reshape folded earlier) was laid out against its own memory.
  if (to.view_of < 0)
    for (const TensorInfo& o : g.tensors())
      if (o.view_of == out) return false;
  auto strides = static_strides(to.desc);
  if (!strides) return false;
  // The output's own offset is aligned (0, or placed by this pass in a later concat).
  const auto offsets = places(g, i, *strides, to.view_offset);
  if (!offsets) return false;
  // Where no input can be written in place, one concat kernel beats one copy per input.
  bool any = false;
  for (size_t k = 0; k < offsets->size() && !any; ++k)
    any = written_in_place(g, i, k, *strides, (*offsets)[k]);
  if (!any) return false;
  const int root = memory_root(g, out);
  const std::string name = n.name;
  int copies = 0;
  for (size_t k = 0; k < offsets->size(); ++k) {
    if (!written_in_place(g, i, k, *strides, (*offsets)[k])) {
      const int src = g.nodes()[i].inputs[k];
      const int c = insert_identity(g, i, src, fmt::format("{}.in{}", name, k));
      ++i;  // the concat moved down by one
      g.mutable_nodes()[i].inputs[k] = c;
      ++copies;
    }
    make_view(g, g.nodes()[i].inputs[k], root, *strides, (*offsets)[k]);
  }
  what->push_back(
      copies == 0 ? name
                  : fmt::format("{} ({} of {} inputs copied in)", name, copies, offsets->size()));
  return true;
}

}  // namespace

bool has_concat(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Concat) return true;
  return false;
}

int fold_concat_views(Graph& g, std::vector<std::string>* eliminated) {
  std::vector<std::string> what;
  int count = 0;
  // Consumers first: a concat whose output feeds a later concat (DenseNet's growing features)
  // becomes that one's view before its own inputs are placed, so every producer writes into
  // the last buffer.
  for (int i = static_cast<int>(g.nodes().size()); i-- > 0;) {
    const Node& n = g.nodes()[i];
    if (n.op != OpKind::Concat) continue;
    if (eliminate(g, i, &what)) ++count;
  }
  if (eliminated) *eliminated = std::move(what);
  return count;
}

}  // namespace kiln
