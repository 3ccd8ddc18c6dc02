// Concat elimination (engine/passes/passes.hpp: fold_concat_views): the producers of a concat's
// inputs store straight into their place in its output, and the concat costs no copy.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "engine/ir/graph_queries.hpp"
#include "engine/ir/movement_ops.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"
#include "engine/passes/strided_views.hpp"

namespace kiln {

namespace {

// The element offsets of concat node `i`'s inputs in a root where its output starts at `base`
// with `strides`; none where one would not be 16-byte aligned (`why`, if given, says which).
std::optional<std::vector<Dim>> places(const Graph& g, int i, const std::vector<int64_t>& strides,
                                       const Dim& base, std::string* why = nullptr) {
  const Node& n = g.nodes()[i];
  const TensorDesc& od = g.tensor(n.outputs[0]).desc;
  const int64_t axis = movement_axis(n, od.rank());
  const int64_t es = static_cast<int64_t>(dtype_size(od.dtype));
  const int64_t st = strides[axis];
  std::vector<Dim> offsets;
  Dim start(0);
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const int t = n.inputs[k];
    if (!offset_aligned(start, st, es)) {
      if (why)
        *why = k == 0 ? fmt::format("its place at {} is not 16 bytes aligned", base.str())
                      : fmt::format(
                            "input {} would start at {} of dim {}, not 16 bytes into "
                            "the buffer",
                            k, start.str(), axis);
      return std::nullopt;
    }
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

// Whether concat `b` reads the first inputs of concat `a` (same axis, `b` before `a`): its output
// is the first part of `a`'s. DenseNet as exported concatenates all features so far in every
// layer, so each layer's concat is a prefix of the block's last one.
bool is_prefix_of(const Graph& g, int b, int a) {
  const Node& nb = g.nodes()[b];
  const Node& na = g.nodes()[a];
  if (nb.op != OpKind::Concat || b >= a || nb.inputs.size() > na.inputs.size()) return false;
  const int rank = g.tensor(na.outputs[0]).desc.rank();
  if (g.tensor(nb.outputs[0]).desc.rank() != rank ||
      movement_axis(nb, rank) != movement_axis(na, rank))
    return false;
  return std::equal(nb.inputs.begin(), nb.inputs.end(), na.inputs.begin());
}

// The earlier concats whose outputs become the first part of concat `i`'s in place: prefixes
// whose readers all take strided views (and which `i` does not also read as an input).
std::vector<int> prefix_concats(const Graph& g, int i) {
  const std::vector<int>& ins = g.nodes()[i].inputs;
  std::vector<int> out;
  for (int b = 0; b < i; ++b) {
    const int t = g.nodes()[b].outputs[0];
    if (is_prefix_of(g, b, i) && may_become_view(g, t) && all_readers_strided(g, t) &&
        std::find(ins.begin(), ins.end(), t) == ins.end())
      out.push_back(b);
  }
  return out;
}

// Whether tensor `t` already is the view `make_view(root, strides, offset)` would make (placed
// by a later concat this one is a prefix of).
bool already_placed(const Graph& g, int t, int root, const std::vector<int64_t>& strides,
                    const Dim& offset) {
  const TensorInfo& ti = g.tensor(t);
  if (ti.view_of != root || ti.view_offset != offset) return false;
  const Layout l = layout_of_strides(strides, ti.desc.shape);
  return ti.desc.layout == l && (l != Layout::Strided || ti.desc.strides == strides);
}

// Whether concat input `t` (input `k` of node `i`, placed at `offset` with `strides` in `root`)
// needs no copy: it is there already, or it can be written in place, by a kernel that stores
// through strides or by an earlier concat that becomes a view node too (its own inputs then land
// in this buffer), its other readers taking it at any strides (elementwise ops, the prefixes
// `prefixes`), and no earlier input of the same concat already taking it.
bool written_in_place(const Graph& g, int i, size_t k, int root,
                      const std::vector<int64_t>& strides, const Dim& offset,
                      const std::vector<int>& prefixes) {
  const Node& n = g.nodes()[i];
  const int t = n.inputs[k];
  if (std::find(n.inputs.begin(), n.inputs.begin() + static_cast<long>(k), t) !=
      n.inputs.begin() + static_cast<long>(k))
    return false;
  if (already_placed(g, t, root, strides, offset)) return true;
  if (!may_become_view(g, t)) return false;
  for (int c : consumers_of(g, t))
    if (c != i && op_info(g.nodes()[c].op).role != FusionRole::Elementwise &&
        std::find(prefixes.begin(), prefixes.end(), c) == prefixes.end())
      return false;
  const int p = g.tensor(t).producer;
  if (p >= 0 && g.nodes()[p].op == OpKind::Concat)
    return g.nodes()[p].inputs.size() >= 2 && places(g, p, strides, offset).has_value();
  return writer_stores_strided(g, p);
}

// Concat node `i` as a view node: every input becomes a view of the output (through an
// identity copy where it cannot be written in place; the copy serves the prefixes too, so it
// goes before the first of them that reads it), and so do the outputs of its prefix concats. False
// (nothing changed) where the output's strides are not static, an input's place would not be
// aligned or no input can be written in place, with the reason in `*why`.
bool eliminate(Graph& g, int i, std::vector<std::string>* what, std::string* why) {
  const int out = g.nodes()[i].outputs[0];
  const TensorInfo& to = g.tensor(out);
  if (to.role != TensorRole::Intermediate || g.nodes()[i].inputs.size() < 2) {
    *why = to.role != TensorRole::Intermediate ? "its output is a graph output" : "one input";
    return false;
  }
  // A view of a concat output (a reshape folded earlier) was laid out against its own memory.
  if (to.view_of < 0)
    for (const TensorInfo& o : g.tensors())
      if (o.view_of == out) {
        *why = fmt::format("'{}' is already a view of its output", o.name);
        return false;
      }
  auto strides = static_strides(to.desc);
  if (!strides) {
    *why = "its output's strides are not static";
    return false;
  }
  // The output's own offset is aligned (0, or placed by this pass in a later concat).
  const Dim base = to.view_offset;
  const auto offsets = places(g, i, *strides, base, why);
  if (!offsets) return false;
  const int root = memory_root(g, out);
  std::vector<int> prefixes = prefix_concats(g, i);
  std::vector<bool> in_place(offsets->size());
  for (size_t k = 0; k < in_place.size(); ++k)
    in_place[k] = written_in_place(g, i, k, root, *strides, (*offsets)[k], prefixes);
  // Where no input can be written in place, one concat kernel beats one copy per input.
  if (std::find(in_place.begin(), in_place.end(), true) == in_place.end()) {
    *why = "no input's producer can store into its place";
    return false;
  }
  const std::string name = g.nodes()[i].name;
  int copies = 0;
  for (size_t k = 0; k < in_place.size(); ++k) {
    int t = g.nodes()[i].inputs[k];
    if (!in_place[k]) {
      int at = i;  // before the first concat that reads it
      for (int b : prefixes)
        if (k < g.nodes()[b].inputs.size()) at = std::min(at, b);
      t = insert_identity(g, at, t, fmt::format("{}.in{}", name, k));
      ++i;  // every concat at or after `at` moved down by one
      for (int& b : prefixes)
        if (b >= at) ++b;
      g.mutable_nodes()[i].inputs[k] = t;
      for (int b : prefixes)
        if (k < g.nodes()[b].inputs.size()) g.mutable_nodes()[b].inputs[k] = t;
      ++copies;
    }
    if (!already_placed(g, t, root, *strides, (*offsets)[k]))
      make_view(g, t, root, *strides, (*offsets)[k]);
  }
  for (int b : prefixes) make_view(g, g.nodes()[b].outputs[0], root, *strides, base);
  std::string note = name;
  if (copies > 0) note += fmt::format(" ({} of {} inputs copied in)", copies, offsets->size());
  if (!prefixes.empty())
    note +=
        fmt::format(" with {} prefix concat{}", prefixes.size(), prefixes.size() == 1 ? "" : "s");
  what->push_back(note);
  return true;
}

}  // namespace

bool has_concat(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Concat) return true;
  return false;
}

int fold_concat_views(Graph& g, std::vector<std::string>* eliminated,
                      std::vector<std::string>* kept) {
  std::vector<std::string> what;
  int count = 0;
  // Consumers first: a concat whose output feeds a later concat (DenseNet's growing features)
  // becomes that one's view before its own inputs are placed, so every producer writes into
  // the last buffer.
  // Identity copies go in before a concat (or its first prefix): the concats are visited by
  // their output tensors, whose ids stay put.
  std::vector<int> outs;
  for (int i = static_cast<int>(g.nodes().size()); i-- > 0;)
    if (g.nodes()[i].op == OpKind::Concat) outs.push_back(g.nodes()[i].outputs[0]);
  for (int t : outs) {
    std::string why;
    const std::string name = g.nodes()[g.tensor(t).producer].name;
    if (eliminate(g, g.tensor(t).producer, &what, &why))
      ++count;
    else if (kept)
      kept->push_back(fmt::format("{} ({})", name, why));
  }
  if (eliminated) *eliminated = std::move(what);
  return count;
}

}  // namespace kiln
