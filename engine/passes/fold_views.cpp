// Movement ops as views (engine/passes_contraction.hpp): reshapes and transposes that need no
// copy kernel.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "engine/base/check.hpp"
#include "engine/ir/graph_queries.hpp"
#include "engine/ir/op_table.hpp"
#include "engine/passes/passes.hpp"
#include "engine/passes/strided_views.hpp"

namespace kiln {

namespace {

// Row-major strides of a shape whose dims are static except possibly the first.
std::optional<std::vector<int64_t>> row_major(const Shape& s) {
  TensorDesc d;
  d.shape = s;
  d.layout = Layout::NCHW;  // row-major at every rank
  return static_strides(d);
}

// A channels-last [N, C, H, W] with H = W = 1 (a pooled map, squeeze-excite's [N, C, 1, 1]) or
// C = 1 has its elements in row-major order too.
bool nhwc_in_row_major_order(const Shape& s) {
  auto one = [](const Dim& d) { return d.is_static() && d.value() == 1; };
  return s.size() == 4 && ((one(s[2]) && one(s[3])) || one(s[1]));
}

bool is_row_major(const TensorDesc& d) {
  if (d.layout == Layout::NCHW) return true;
  if (d.layout == Layout::NHWC) return nhwc_in_row_major_order(d.shape);
  auto want = row_major(d.shape);
  if (!want) return false;
  for (size_t i = 0; i < d.shape.size(); ++i)  // unit dims may carry any stride
    if (!(d.shape[i].is_static() && d.shape[i].value() == 1) && d.strides[i] != (*want)[i])
      return false;
  return true;
}

// True when `strides` are the dense channels-last strides of a 4-D `shape` (unit dims may carry
// any stride).
bool is_nhwc_dense(const std::vector<int64_t>& strides, const Shape& shape) {
  if (shape.size() != 4) return false;
  TensorDesc d;
  d.shape = shape;
  d.layout = Layout::NHWC;
  auto want = static_strides(d);
  if (!want) return false;
  for (size_t i = 0; i < 4; ++i)
    if (!(shape[i].is_static() && shape[i].value() == 1) && strides[i] != (*want)[i]) return false;
  return true;
}

Layout strided_or_dense(const std::vector<int64_t>& strides, const Shape& shape) {
  TensorDesc d;
  d.shape = shape;
  d.layout = Layout::Strided;
  d.strides = strides;
  if (is_row_major(d)) return Layout::NCHW;
  return is_nhwc_dense(strides, shape) ? Layout::NHWC : Layout::Strided;
}

void set_view(Graph& g, int view, int root, const std::vector<int64_t>& strides) {
  TensorInfo& t = g.mutable_tensors()[view];
  t.view_of = root;
  t.desc.layout = strided_or_dense(strides, t.desc.shape);
  t.desc.strides = t.desc.layout == Layout::Strided ? strides : std::vector<int64_t>{};
}

void set_row_major_view(Graph& g, int view, int root) {
  TensorInfo& t = g.mutable_tensors()[view];
  t.view_of = root;
  t.desc.layout = Layout::NCHW;
  t.desc.strides.clear();
}

// Whether channels-last tensors `a` and `b` (shapes equal but for unit dims) hold their elements
// at the same offsets: b's strides are a's, unit dims left out.
bool same_channels_last_memory(const TensorDesc& a, const TensorDesc& b) {
  auto as = static_strides(a), bs = static_strides(b);
  if (!as || !bs) return false;
  auto rv = reshape_view_strides(a.shape, *as, b.shape);
  if (!rv) return false;
  for (size_t k = 0; k < b.shape.size(); ++k)
    if (!(b.shape[k].is_static() && b.shape[k].value() == 1) && (*rv)[k] != (*bs)[k]) return false;
  return true;
}

bool all_consumers_matmul(const Graph& g, int t) {
  std::vector<int> cs = consumers_of(g, t);
  if (cs.empty()) return false;
  for (int c : cs) {
    const Node& n = g.nodes()[c];
    if (n.op != OpKind::Matmul || (n.inputs[0] != t && n.inputs[1] != t)) return false;
    if (n.inputs.size() > 2 && n.inputs[2] == t) return false;
  }
  return true;
}

// The movement node `i` as a view, if it can be one: its output in its input's memory (forward),
// or its input in its output's memory (backward: a matmul writes the transposed layout directly).
bool try_view(Graph& g, int i, std::string* what) {
  const Node& n = g.nodes()[i];
  if (n.op != OpKind::Reshape && n.op != OpKind::Transpose) return false;
  const int in = n.inputs[0], out = n.outputs[0];
  const TensorInfo& ti = g.tensor(in);
  const TensorInfo& to = g.tensor(out);
  if (to.role != TensorRole::Intermediate || to.view_of >= 0) return false;
  if (ti.desc.dtype != to.desc.dtype) return false;
  const int root = memory_root(g, in);
  // Constants are uploaded one by one for the kernels that read them.
  if (g.tensor(root).role == TensorRole::Constant) return false;

  if (n.op == OpKind::Reshape) {
    // A channels-last map with a unit dim dropped or added, channels-last (a 1-D conv's [N, C, W]
    // and [N, C, 1, W]: conv1d_channels_last), is the same memory in the same order.
    if (ti.desc.layout == Layout::NHWC && to.desc.layout == Layout::NHWC &&
        !is_graph_output(g, out) && same_channels_last_memory(ti.desc, to.desc)) {
      g.mutable_tensors()[out].view_of = root;
      *what = fmt::format("{} (reshape of channels-last memory)", n.name);
      return true;
    }
    // A row-major input read in another row-major shape is the same memory: the output is a
    // view of the input, or, when the output is a graph output (the caller's buffer), the
    // input, if only this reshape reads it, is a view of the output.
    // Dense row-major memory needs no strides, so symbolic dims anywhere are fine (ViT's
    // [S, N, 3*E] -> [S, N, 3, E] under a dynamic batch).
    if (!is_row_major(ti.desc) || to.desc.layout != Layout::NCHW) return false;
    if (!is_graph_output(g, out)) {
      set_row_major_view(g, out, root);
      *what = fmt::format("{} (reshape)", n.name);
      return true;
    }
    if (ti.role != TensorRole::Intermediate || ti.view_of >= 0 || is_graph_output(g, in) ||
        consumers_of(g, in) != std::vector<int>{i})
      return false;
    set_row_major_view(g, in, out);
    *what = fmt::format("{} (reshape into a graph output)", n.name);
    return true;
  }
  const auto& perm = n.attr_ints("perm");
  // Forward: the output's strides are the input's, permuted. A view where that is the dense
  // memory of a layout every consumer takes (a channels-last [N, C, H, W] permuted to
  // [N, H, W, C] is row-major as it is, ConvNeXt's permutes around its channel LayerNorms), or
  // where only matmul operands read it (their loaders take any strides; a copy or an elementwise
  // kernel would read it uncoalesced) and it stays contiguous along its last dim.
  if (auto st = static_strides(ti.desc); st && !is_graph_output(g, out)) {
    std::vector<int64_t> os(perm.size());
    for (size_t k = 0; k < perm.size(); ++k) os[k] = (*st)[perm[k]];
    const Layout l = strided_or_dense(os, to.desc.shape);
    if (l == Layout::NCHW || (l == Layout::NHWC && all_consumers_take_nhwc(g, out))) {
      set_view(g, out, root, os);
      *what = fmt::format("{} (transpose of dense memory, {})", n.name,
                          l == Layout::NCHW ? "row-major" : "channels-last");
      return true;
    }
    if (all_consumers_matmul(g, out) && !os.empty() && os.back() == 1) {
      set_view(g, out, root, os);
      *what = fmt::format("{} (transpose of a matmul operand)", n.name);
      return true;
    }
    // Rows kept contiguous for readers that take them at any stride: row norms and matmul
    // operands, also through slices and squeezes (Swin V2's head split: q and k read by their
    // row norms, v by the attention, all in place in the QKV projection's output).
    if (l == Layout::Strided && !os.empty() && os.back() == 1 &&
        readers_take_strided(g, out, os, /*rows_only=*/true)) {
      set_view(g, out, root, os);
      *what = fmt::format("{} (transpose read row by row)", n.name);
      return true;
    }
  }
  // Backward: a matmul's private output (or its epilogue's: a bias add) written straight into
  // the transposed row-major memory of the transpose's result (the epilogue stores through
  // strides).
  if (ti.role != TensorRole::Intermediate || ti.view_of >= 0 || ti.producer < 0) return false;
  if (!from_contraction_epilogue(g, in, OpKind::Matmul) || is_graph_output(g, in)) return false;
  if (consumers_of(g, in) != std::vector<int>{i}) return false;
  if (to.desc.layout != Layout::NCHW) return false;
  auto ost = row_major(to.desc.shape);
  if (!ost) return false;
  std::vector<int64_t> is(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) is[perm[k]] = (*ost)[k];
  if (is.empty() || is.back() != 1) return false;
  set_view(g, in, out, is);
  *what = fmt::format("{} (transpose of a matmul result)", n.name);
  return true;
}

}  // namespace

bool is_view_node(const Graph& g, const Node& n) {
  if (n.inputs.empty() || n.outputs.size() != 1) return false;
  const int root = memory_root(g, n.outputs[0]);
  switch (n.op) {
    case OpKind::Reshape:
    case OpKind::Transpose:
    case OpKind::Slice:
    case OpKind::Expand:
    case OpKind::Gather:  // constant indices (fold_slice_views)
      return memory_root(g, n.inputs[0]) == root;
    case OpKind::Concat:  // every input placed in the output's memory (fold_concat_views)
      for (int t : n.inputs)
        if (g.tensor(t).view_of < 0 || memory_root(g, t) != root) return false;
      return true;
    default:
      return false;
  }
}

int absorb_matmul_transposes(Graph& g, std::vector<std::string>* absorbed) {
  int count = 0;
  std::vector<Node>& nodes = g.mutable_nodes();
  for (size_t mi = 0; mi < nodes.size(); ++mi) {
    if (nodes[mi].op != OpKind::Matmul) continue;
    const int b = nodes[mi].inputs[1];
    const int p = g.tensor(b).producer;
    if (p < 0 || nodes[p].op != OpKind::Transpose || b == nodes[mi].inputs[0]) continue;
    // B = transpose(X, perm) is transpose(X, perm') with its last two dims swapped: the matmul
    // reads transpose(X, perm') with transpose_b flipped. perm' = identity: it reads X itself;
    // otherwise the transpose (when only this matmul reads it) keeps perm', usually a view.
    std::vector<int64_t> perm = nodes[p].attr_ints("perm");
    const size_t r = perm.size();
    if (r < 2) continue;
    std::swap(perm[r - 2], perm[r - 1]);
    bool identity = true;
    for (size_t i = 0; i < r; ++i) identity &= perm[i] == static_cast<int64_t>(i);
    if (!identity) {
      // Only where it turns a B that no view could give (strided along its last dim, a copy)
      // into a view contiguous along its last dim (the head split of k in q @ k^T).
      if (consumers_of(g, b).size() != 1 || is_graph_output(g, b)) continue;
      const int x = nodes[p].inputs[0];
      auto st = static_strides(g.tensor(x).desc);
      if (!st || (*st)[perm[r - 1]] != 1 || (*st)[perm[r - 2]] == 1) continue;
    }
    const std::string what = fmt::format("{} -> {}", nodes[p].name, nodes[mi].name);
    if (identity) {
      nodes[mi].inputs[1] = nodes[p].inputs[0];
    } else {
      nodes[p].attrs["perm"] = perm;
      TensorDesc& d = g.mutable_tensors()[b].desc;
      std::swap(d.shape[r - 2], d.shape[r - 1]);
    }
    nodes[mi].attrs["transpose_b"] = int64_t{nodes[mi].attr_int("transpose_b") != 0 ? 0 : 1};
    if (absorbed) absorbed->push_back(what);
    ++count;
  }
  if (count) g.prune();
  return count;
}

namespace {

// The layouts of node `i`'s intermediate outputs inferred again from its inputs as they are now:
// a transpose that became a channels-last view hands its layout on down the chain (an
// elementwise op's output follows its input), so that the next conv takes channels-last memory
// instead of a copy into NCHW. Graph outputs keep theirs (the caller's buffers), and so do the
// outputs of anything but elementwise ops, convolutions and pools.
void follow_input_layouts(Graph& g, int i) {
  const Node& n = g.nodes()[i];
  const OpInfo& info = op_info(n.op);
  const bool follows = info.role == FusionRole::Elementwise ||
                       info.category == OpCategory::Window || n.op == OpKind::Conv2d;
  if (!follows || n.outputs.size() != 1) return;
  const int out = n.outputs[0];
  const TensorInfo& to = g.tensor(out);
  if (to.role != TensorRole::Intermediate || to.view_of >= 0 || is_graph_output(g, out)) return;
  std::vector<const TensorInfo*> ins;
  for (int t : n.inputs) ins.push_back(&g.tensor(t));
  const std::string where = n.name;
  std::vector<TensorDesc> d = info.infer(InferArgs{where, ins, n});
  if (d.size() != 1 || d[0].shape != to.desc.shape || d[0].dtype != to.desc.dtype) return;
  if (d[0].layout == to.desc.layout || d[0].layout == Layout::Strided) return;
  TensorDesc& od = g.mutable_tensors()[out].desc;
  od.layout = d[0].layout;
  od.strides.clear();
}

}  // namespace

int fold_movement_views(Graph& g, std::vector<std::string>* views) {
  int count = 0;
  // Producers before consumers (a view of a view takes its root), and a backward view is
  // decided before the forward ones after it.
  for (int i = 0; i < static_cast<int>(g.nodes().size()); ++i) {
    follow_input_layouts(g, i);
    std::string what;
    if (!try_view(g, i, &what)) continue;
    if (views) views->push_back(what);
    ++count;
  }
  // A backward view's root may itself become a forward view later (transpose -> reshape): the
  // roots are followed to the end.
  std::vector<TensorInfo>& ts = g.mutable_tensors();
  for (TensorInfo& t : ts)
    while (t.view_of >= 0 && ts[t.view_of].view_of >= 0) t.view_of = ts[t.view_of].view_of;
  return count;
}

bool has_movement(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Reshape || n.op == OpKind::Transpose) return true;
  return false;
}

}  // namespace kiln
