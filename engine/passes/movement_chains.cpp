// Chains of reshapes and transposes as one transpose (engine/passes/passes.hpp:
// compose_movement_chains).
//
// A chain's elements are described by "atoms": the input's dims, split where a later reshape
// splits them. Each tensor of the chain is a list of dims, each dim a list of atoms (outer
// first). A transpose permutes the dims; a reshape regroups the atoms in their row-major order,
// splitting an atom where a new dim's boundary falls inside it (the split applies to the input
// too: splitting a dim of dense memory is free). The whole chain then reads the input's atoms in
// its memory order and writes them in the output's row-major order: one transpose of the input
// viewed as atoms, between reshapes that are views. Atoms next to each other in both orders merge.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>

#include "engine/base/check.hpp"
#include "engine/ir/graph_queries.hpp"
#include "engine/ir/op_table.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"
#include "kiln/error.hpp"

namespace kiln {
namespace {

bool is_one(const Dim& d) {
  return d.is_static() && d.value() == 1;
}

struct Atoms {
  std::vector<Dim> size;               // by atom id
  std::vector<int> input;              // the chain input's atoms in its memory order
  std::vector<std::vector<int>> dims;  // the current tensor's logical dims, as atoms

  // The current tensor's atoms in its row-major order, unit atoms left out.
  std::vector<int> flat() const {
    std::vector<int> f;
    for (const auto& d : dims)
      for (int a : d)
        if (!is_one(size[a])) f.push_back(a);
    return f;
  }

  // Atom `a` becomes two atoms, `outer` x size / outer, wherever it is listed.
  void split(int a, int64_t outer) {
    const int64_t s = size[a].value();
    const int o = static_cast<int>(size.size());
    size.push_back(Dim(outer));
    size.push_back(Dim(s / outer));
    auto replace = [&](std::vector<int>& v) {
      auto it = std::find(v.begin(), v.end(), a);
      if (it == v.end()) return;
      *it = o + 1;
      v.insert(it, o);
    };
    replace(input);
    for (auto& d : dims) replace(d);
  }

  void transpose(const std::vector<int64_t>& perm) {
    std::vector<std::vector<int>> d(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) d[i] = dims[static_cast<size_t>(perm[i])];
    dims = std::move(d);
  }

  // Regroups the atoms into the dims of `to`; false where a dim's boundary cannot be placed (a
  // symbolic atom split, sizes that do not divide).
  bool reshape(const Shape& to) {
    std::vector<int> f = flat();
    std::vector<std::vector<int>> out(to.size());
    size_t k = 0;
    for (size_t j = 0; j < to.size(); ++j) {
      Dim prod(1);
      while (!(prod == to[j])) {
        if (k >= f.size()) return false;
        const int a = f[k];
        const Dim next = prod * size[a];
        // A symbolic atom or dim is taken whole: its product either meets the dim exactly or
        // never does (the atoms run out: false).
        if (to[j].is_static() && next.is_static() && next.value() > to[j].value()) {
          if (to[j].value() % prod.value() != 0) return false;
          const int64_t outer = to[j].value() / prod.value();
          if (size[a].value() % outer != 0) return false;
          split(a, outer);
          f = flat();
          continue;
        }
        out[j].push_back(a);
        prod = next;
        ++k;
      }
    }
    if (k != f.size()) return false;
    dims = std::move(out);
    return true;
  }
};

// One transpose of the input viewed as atoms: the view's shape (atoms merged where both orders
// keep them together, in the input's memory order) and the permutation.
struct Composite {
  Shape viewed;
  std::vector<int64_t> perm;
  bool identity() const {
    for (size_t i = 0; i < perm.size(); ++i)
      if (perm[i] != static_cast<int64_t>(i)) return false;
    return true;
  }
};

// The composite of reading the input's atoms in its memory order and writing them in the current
// tensor's row-major order (unit atoms left out).
std::optional<Composite> compose(const Atoms& A) {
  const std::vector<int> out_order = A.flat();
  std::vector<int> in_order;
  for (int a : A.input)
    if (!is_one(A.size[a])) in_order.push_back(a);
  if (std::set<int>(in_order.begin(), in_order.end()) !=
          std::set<int>(out_order.begin(), out_order.end()) ||
      in_order.size() != out_order.size())
    return std::nullopt;
  auto pos = [&](int a) {
    return static_cast<size_t>(std::find(in_order.begin(), in_order.end(), a) - in_order.begin());
  };
  // Runs of the output order whose atoms follow each other in the input order too.
  std::vector<std::pair<size_t, Dim>> runs;  // (input position of the run's first atom, size)
  for (size_t i = 0; i < out_order.size(); ++i) {
    const int a = out_order[i];
    if (i > 0 && pos(a) == pos(out_order[i - 1]) + 1)
      runs.back().second = runs.back().second * A.size[a];
    else
      runs.push_back({pos(a), A.size[a]});
  }
  std::vector<size_t> by_input(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) by_input[i] = i;
  std::sort(by_input.begin(), by_input.end(),
            [&](size_t x, size_t y) { return runs[x].first < runs[y].first; });
  Composite c;
  c.perm.resize(runs.size());
  for (size_t j = 0; j < by_input.size(); ++j) {
    c.viewed.push_back(runs[by_input[j]].second);
    c.perm[by_input[j]] = static_cast<int64_t>(j);
  }
  if (c.viewed.empty()) {  // a single element
    c.viewed = {Dim(1)};
    c.perm = {0};
  }
  return c;
}

struct Chain {
  std::vector<int> nodes;
  int x = -1, y = -1;
  int copies = 0;                   // copy kernels the chain costs as it is
  bool ends_channels_last = false;  // its output is a channels-last view already
};

// The reshape or transpose reading node `n`'s output, when that output is private to it.
int next_in_chain(const Graph& g, int n) {
  const int out = g.nodes()[n].outputs[0];
  const TensorInfo& t = g.tensor(out);
  if (t.role != TensorRole::Intermediate || is_graph_output(g, out)) return -1;
  const std::vector<int> cs = consumers_of(g, out);
  if (cs.size() != 1) return -1;
  const OpKind op = g.nodes()[cs[0]].op;
  return op == OpKind::Reshape || op == OpKind::Transpose ? cs[0] : -1;
}

// Chain `c` cut to its first `n` nodes, with the copy kernels it costs as it is: a reshape or a
// transpose is a view where the memory it reads is already in its output's row-major order (or,
// the chain's last transpose, in channels-last order that its readers take), as fold_views makes
// them; else a copy, whose output is row-major.
void cut(const Graph& g, Chain& c, size_t n) {
  c.nodes.resize(n);
  c.y = g.nodes()[c.nodes.back()].outputs[0];
  c.copies = 0;
  c.ends_channels_last = false;
  // Dense row-major memory is read in any row-major shape without strides (symbolic dims
  // anywhere); a transpose needs the strides.
  bool row_major = g.tensor(c.x).desc.layout == Layout::NCHW;
  std::optional<std::vector<int64_t>> st = static_strides(g.tensor(c.x).desc);
  for (int k : c.nodes) {
    const Node& node = g.nodes()[k];
    const int out = node.outputs[0];
    const Shape& os = g.tensor(out).desc.shape;
    bool view = false;
    if (st && node.op == OpKind::Transpose) {
      const auto& perm = node.attr_ints("perm");
      std::vector<int64_t> ps(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) ps[i] = (*st)[static_cast<size_t>(perm[i])];
      view = strides_dense(ps, os, Layout::NCHW);
      if (!view && out == c.y && os.size() == 4 && strides_dense(ps, os, Layout::NHWC) &&
          all_consumers_take_nhwc(g, out))
        view = c.ends_channels_last = true;
    } else if (node.op == OpKind::Reshape) {
      view = row_major ||
             (st && strides_dense(*st, g.tensor(node.inputs[0]).desc.shape, Layout::NCHW));
    }
    row_major = true;
    if (!view) ++c.copies;
    TensorDesc rm;
    rm.shape = os;
    st = static_strides(rm);
  }
}

// The longest chain starting at node `i`. A node continues the chain of the node before it
// unless that one was made by this pass or `i` is where an earlier chain was cut.
std::optional<Chain> chain_at(const Graph& g, int i, const std::set<std::string>& made,
                              const std::set<std::string>& starts) {
  const Node& n = g.nodes()[i];
  if (n.op != OpKind::Reshape && n.op != OpKind::Transpose) return std::nullopt;
  const int p = g.tensor(n.inputs[0]).producer;
  if (p >= 0 && next_in_chain(g, p) == i && !made.count(g.nodes()[p].name) &&
      (g.nodes()[p].op == OpKind::Reshape || g.nodes()[p].op == OpKind::Transpose) &&
      !starts.count(n.name))
    return std::nullopt;
  Chain c;
  c.x = n.inputs[0];
  for (int k = i; k >= 0; k = next_in_chain(g, k)) c.nodes.push_back(k);
  cut(g, c, c.nodes.size());
  return c;
}

// The atoms of chain `c`'s output, or nothing when its input's layout has no dense order. A
// reshape whose dims the atoms cannot place (two factorizations of one dim that do not nest:
// MaxViT's 8 x 7 windows then 7 x 8 grid cells of 56) ends the chain before it: `*done` says how
// many nodes the atoms cover.
std::optional<Atoms> atoms_of(const Graph& g, const Chain& c, size_t* done) {
  const TensorDesc& xd = g.tensor(c.x).desc;
  Atoms A;
  for (size_t d = 0; d < xd.shape.size(); ++d) {
    A.size.push_back(xd.shape[d]);
    A.dims.push_back({static_cast<int>(d)});
  }
  if (xd.layout == Layout::NHWC && xd.rank() == 4)
    A.input = {0, 2, 3, 1};
  else if (xd.layout == Layout::NCHW)
    for (size_t d = 0; d < xd.shape.size(); ++d) A.input.push_back(static_cast<int>(d));
  else
    return std::nullopt;
  for (*done = 0; *done < c.nodes.size(); ++*done) {
    const Node& n = g.nodes()[c.nodes[*done]];
    if (n.op == OpKind::Transpose) {
      A.transpose(n.attr_ints("perm"));
    } else {
      Atoms next = A;
      if (!next.reshape(g.tensor(n.outputs[0]).desc.shape)) break;
      A = std::move(next);
    }
  }
  return A;
}

// Whether channels-last memory suits `y` ([N, C, H, W]): every reader takes it, and a conv (or,
// unless `convs_only`, a pool) reads it, directly or after elementwise ops; `convs_only` counts
// the convs whose filters are channels-last (the graph's layout for them) alone.
bool wants_channels_last(const Graph& g, int y, bool convs_only = false) {
  const TensorDesc& d = g.tensor(y).desc;
  if (d.rank() != 4 || d.layout != Layout::NCHW || !all_consumers_take_nhwc(g, y)) return false;
  std::vector<int> frontier = {y};
  for (int depth = 0; depth < 8 && !frontier.empty(); ++depth) {
    std::vector<int> next;
    for (int t : frontier)
      for (int c : consumers_of(g, t)) {
        const Node& n = g.nodes()[c];
        if ((n.op == OpKind::Conv2d && n.inputs[0] == t &&
             (!convs_only || g.tensor(n.inputs[1]).desc.layout == Layout::NHWC)) ||
            (!convs_only && op_info(n.op).category == OpCategory::Window))
          return true;
        if (op_info(n.op).role == FusionRole::Elementwise)
          next.insert(next.end(), n.outputs.begin(), n.outputs.end());
      }
    frontier = std::move(next);
  }
  return false;
}

// Replaces chain `c` by the view of its input as atoms, the transpose and the view back to the
// output's shape (then, `channels_last`, a transpose to [N, C, H, W] over that memory). The new
// nodes go where the chain's last node is.
void rewrite(Graph& g, const Chain& c, const Composite& k, bool channels_last,
             std::set<std::string>* made) {
  const Node last = g.nodes()[c.nodes.back()];
  const Layout xl = g.tensor(c.x).desc.layout;
  const Shape ys = g.tensor(c.y).desc.shape;
  int count = 0;
  auto add = [&](const char* op, Tensor in, const Attrs& attrs, const char* what) {
    const std::string nm = fresh_name(g, fmt::format("{}.{}", last.name, what));
    made->insert(nm);
    ++count;
    return g.add_node(op, {in}, attrs, nm, {nm})[0];
  };
  Tensor t{c.x};
  if (xl == Layout::NHWC) {  // dense channels-last memory, read in its order: a view
    // (the row-major [N, H, W, C] itself where the map relabels one)
    const int rows = transposed_from_row_major(g, c.x, {0, 3, 1, 2});
    t = rows >= 0 ? Tensor{rows}
                  : add("transpose", t, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}}, "rows");
  }
  if (!(g.tensor(t.id).desc.shape == k.viewed))
    t = add("reshape", t, {{"shape", k.viewed}}, "atoms");
  if (!k.identity()) t = add("transpose", t, {{"perm", k.perm}}, "perm");
  const Shape out = channels_last ? Shape{ys[0], ys[2], ys[3], ys[1]} : ys;
  if (!(g.tensor(t.id).desc.shape == out)) t = add("reshape", t, {{"shape", out}}, "out");
  if (channels_last) {
    t = add("transpose", t, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}}, "nhwc");
    g.mutable_tensors()[t.id].desc.layout = Layout::NHWC;
  }
  const int at = c.nodes.back() + 1;
  for (int i = 0; i < count; ++i) move_last_node_to(g, at);
  replace_uses(g, c.y, t.id);
}

// A reader of `t` takes it as a strided view: a matmul or attention operand (the loaders
// take any strides, and the attention matcher follows the chain), or a slice, gather, expand or
// concat (fold_slice_views / fold_concat_views place it in other memory). Those chains stay as
// they are; a reshape or transpose reader continues the chain.
bool strided_reader(const Graph& g, int t) {
  for (int r : consumers_of(g, t)) {
    const OpKind op = g.nodes()[r].op;
    if (op == OpKind::Reshape || op == OpKind::Transpose) continue;
    const OpCategory cat = op_info(op).category;
    if (op == OpKind::Matmul || cat == OpCategory::Attention || cat == OpCategory::Movement)
      return true;
  }
  return false;
}

// Chain `c` (atoms `A`) rewritten to write [N, H, W, C] for a channels-last [N, C, H, W] result,
// where that costs at most `allowed` copies: on a copy of `g`, since inferring the layouts after
// it again may refuse (a graph output's layout would change, an op refuses it). Returns the
// copies it costs then (0 or 1), or nothing, `g` as it was.
std::optional<int> rewrite_channels_last(Graph& g, const Chain& c, const Atoms& A, int allowed,
                                         std::set<std::string>* made) {
  Atoms cl = A;
  cl.dims = {A.dims[0], A.dims[2], A.dims[3], A.dims[1]};
  std::optional<Composite> k = compose(cl);
  if (!k || c.ends_channels_last || (k->identity() ? 0 : 1) > allowed) return std::nullopt;
  Graph h = g;
  std::set<std::string> hm = *made;
  try {
    rewrite(h, c, *k, true, &hm);
    if (!reinfer_layouts(h, c.nodes.back() + 1)) return std::nullopt;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::User) throw;
    return std::nullopt;
  }
  g = std::move(h);
  *made = std::move(hm);
  return k->identity() ? 0 : 1;
}

bool touches(const Graph& g, const Chain& c, const std::set<std::string>& made) {
  for (int k : c.nodes)
    if (made.count(g.nodes()[k].name)) return true;
  return false;
}

}  // namespace

bool has_transpose(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Transpose) return true;
  return false;
}

int compose_movement_chains(Graph& g, std::vector<std::string>* rewritten) {
  int count = 0;
  std::set<std::string> made, starts;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    std::optional<Chain> c = chain_at(g, static_cast<int>(i), made, starts);
    if (!c || touches(g, *c, made) || g.tensor(c->x).role == TensorRole::Constant) continue;
    size_t done = 0;
    std::optional<Atoms> A = atoms_of(g, *c, &done);
    if (!A) continue;
    // Where the atoms stop, the rest is a chain of its own, read channels-last too when that
    // does not feed a matmul (its first reshape reads the memory as it is: composed, the rest
    // costs one copy either way).
    bool rest_takes_nhwc = false;
    if (done < c->nodes.size()) {
      starts.insert(g.nodes()[c->nodes[done]].name);
      if (done == 0) continue;
      rest_takes_nhwc = !strided_reader(g, c->y) && !is_graph_output(g, c->y);
      cut(g, *c, done);
    }
    if (consumers_of(g, c->y).empty() || is_graph_output(g, c->y) || strided_reader(g, c->y))
      continue;
    // A 16-bit view that a conv reads as NCHW (a UNet attention block's result, O^T as
    // [N, C, H, W]) is worth a copy to channels-last: the conv runs on tensor cores over NHWC
    // (in f32 both layouts are SIMT), and the copy often is no kernel (the attention kernel
    // writes its result through it).
    const DType ydt = g.tensor(c->y).desc.dtype;
    const bool nchw_conv = c->copies == 0 && (ydt == DType::F16 || ydt == DType::BF16) &&
                           wants_channels_last(g, c->y, true);
    if (c->copies == 0 && !nchw_conv) continue;
    const std::string name = g.nodes()[c->nodes.back()].name;
    const TensorDesc& yd = g.tensor(c->y).desc;
    if (wants_channels_last(g, c->y) ||
        (rest_takes_nhwc && yd.rank() == 4 && yd.layout == Layout::NCHW)) {
      if (auto k =
              rewrite_channels_last(g, *c, *A, std::max(c->copies, nchw_conv ? 1 : 0), &made)) {
        if (rewritten)
          rewritten->push_back(
              fmt::format("{} ({} copies -> {}, channels-last)", name, c->copies, *k));
        ++count;
        continue;
      }
    }
    std::optional<Composite> k = compose(*A);
    if (!k || (k->identity() ? 0 : 1) >= c->copies) continue;
    rewrite(g, *c, *k, false, &made);
    if (rewritten)
      rewritten->push_back(
          fmt::format("{} ({} copies -> {})", name, c->copies, k->identity() ? 0 : 1));
    ++count;
  }
  if (count > 0) g.prune();
  return count;
}

}  // namespace kiln
