// Elementwise ops moved above a channels-last relabel (engine/passes/passes.hpp:
// elementwise_before_relabels).
//
// ConvNeXt's block ends in fc2 (a matmul over [N, H, W, C] rows), permute(0, 3, 1, 2) back to
// [N, C, H, W], the layer scale (mul by a [C, 1, 1] constant) and the residual add. The permute
// is a view: the rows are a channels-last map as they are. But the mul and the add index [N, C,
// H, W], not the matmul's [N, H, W, C], so they cannot join its epilogue: a pointwise kernel
// read the map twice and wrote it again. Moved above the permute, in the matmul's coordinates
// (the constant reshaped, the residual read through the inverse permute, also a view), they
// do join it.
#include <fmt/format.h>

#include <optional>

#include "engine/base/check.hpp"
#include "engine/ir/graph_queries.hpp"
#include "engine/ir/op_table.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

// Transpose node `ti` relabels a row-major [N, H, W, C] x as the channels-last [N, C, H, W] z it
// outputs (a view), x from a contraction's epilogue; returns its permutation.
std::optional<std::vector<int64_t>> relabel(const Graph& g, int ti) {
  const Node& t = g.nodes()[ti];
  if (t.op != OpKind::Transpose) return std::nullopt;
  const TensorDesc& xd = g.tensor(t.inputs[0]).desc;
  const TensorDesc& zd = g.tensor(t.outputs[0]).desc;
  if (xd.layout != Layout::NCHW || zd.rank() != 4) return std::nullopt;
  const auto st = static_strides(xd);
  if (!st) return std::nullopt;
  const auto& perm = t.attr_ints("perm");
  std::vector<int64_t> ps(4);
  for (size_t i = 0; i < 4; ++i) ps[i] = (*st)[static_cast<size_t>(perm[i])];
  if (!strides_dense(ps, zd.shape, Layout::NHWC) || strides_dense(ps, zd.shape, Layout::NCHW))
    return std::nullopt;
  if (!read_by_one(g, t.inputs[0]) || !from_contraction_epilogue(g, t.inputs[0]))
    return std::nullopt;
  return perm;
}

// Operand `o` of an elementwise op over z, in x's coordinates (x = z permuted by `inv`): a
// constant whose non-unit dims keep their order is the same data in a new shape; a run-time
// tensor whose memory is x's order is a transpose that is a view. Else nothing.
std::optional<Tensor> in_x_coordinates(Graph& g, int o, const std::vector<int64_t>& inv,
                                       const std::string& stem) {
  const TensorInfo& oi = g.tensor(o);
  Shape o4 = oi.desc.shape;
  if (o4.size() > 4) return std::nullopt;
  while (o4.size() < 4) o4.insert(o4.begin(), Dim(1));
  Shape n4(4);
  for (size_t j = 0; j < 4; ++j) n4[j] = o4[static_cast<size_t>(inv[j])];
  auto unit = [](const Dim& d) { return d.is_static() && d.value() == 1; };
  if (oi.role == TensorRole::Constant) {
    int64_t last = -1;
    for (size_t j = 0; j < 4; ++j)
      if (!unit(n4[j])) {
        if (inv[j] < last) return std::nullopt;
        last = inv[j];
      }
    std::vector<int64_t> shape(4);
    for (size_t j = 0; j < 4; ++j) shape[j] = n4[j].value();
    TensorDesc d = oi.desc;
    d.shape = n4;
    d.layout = Layout::NCHW;
    d.strides.clear();
    const LazyHostTensor data = oi.data;
    return g.constant_deferred(fresh_name(g, stem), d, [data, shape] {
      HostTensor h = *data;
      h.shape = shape;
      h.strides = layout_strides(shape, Layout::NCHW);
      return h;
    });
  }
  // The residual of the block before: the same relabel of row-major memory, which is what x's
  // coordinates read.
  std::vector<int64_t> perm(4);
  for (size_t j = 0; j < 4; ++j) perm[static_cast<size_t>(inv[j])] = static_cast<int64_t>(j);
  if (const int rows = transposed_from_row_major(g, o, perm); rows >= 0) return Tensor{rows};
  const auto st = static_strides(oi.desc);
  if (!st || oi.desc.rank() != 4) return std::nullopt;
  std::vector<int64_t> ps(4);
  for (size_t j = 0; j < 4; ++j) ps[j] = (*st)[static_cast<size_t>(inv[j])];
  if (!strides_dense(ps, n4, Layout::NCHW)) return std::nullopt;
  const std::string nm = fresh_name(g, stem);
  return g.add_node("transpose", {Tensor{o}}, {{"perm", inv}}, nm, {nm})[0];
}

// Moves the elementwise op `ei` reading relabel `ti`'s output above it. Returns false (the graph
// unchanged) where it does not apply.
bool move_above(Graph& g, int ti, int ei, const std::vector<int64_t>& perm) {
  const Node e = g.nodes()[ei];
  const int z = g.nodes()[ti].outputs[0], x = g.nodes()[ti].inputs[0], out = e.outputs[0];
  if (!(g.tensor(out).desc.shape == g.tensor(z).desc.shape) || is_graph_output(g, out) ||
      !all_consumers_take_nhwc(g, out))
    return false;
  std::vector<int64_t> inv(4);
  for (size_t i = 0; i < 4; ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  Graph h = g;
  std::vector<Tensor> ins;
  int added = 0;
  for (int t : e.inputs) {
    if (t == z) {
      ins.push_back(Tensor{x});
      continue;
    }
    const size_t before = h.nodes().size();
    auto o = in_x_coordinates(h, t, inv, fmt::format("{}.rows", h.tensor(t).name));
    if (!o) return false;
    ins.push_back(*o);
    added += static_cast<int>(h.nodes().size() - before);
  }
  const std::string en = fresh_name(h, e.name + ".rows");
  Tensor y = h.add_node(op_name(e.op), ins, e.attrs, en, {en})[0];
  const std::string tn = fresh_name(h, g.nodes()[ti].name + ".after_" + e.name);
  Tensor r = h.add_node("transpose", {y}, {{"perm", perm}}, tn, {tn})[0];
  h.mutable_tensors()[r.id].desc.layout = Layout::NHWC;  // the view fold_views makes of it
  for (int i = 0; i < added + 2; ++i) move_last_node_to(h, ei + 1);
  replace_uses(h, out, r.id);
  // The readers of the op's output now read channels-last memory: their layouts again.
  if (!reinfer_layouts(h, static_cast<size_t>(ei) + 1)) return false;
  g = std::move(h);
  return true;
}

// Every transpose that relabels dense memory as a channels-last map its readers take (the
// views fold_views makes) gets that layout now, and the layouts after it are inferred again: a
// residual the moved ops read is then known to be channels-last memory (where a graph output's
// layout would change, the transpose is left to fold_views).
void settle_relabels(Graph& g) {
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& t = g.nodes()[i];
    if (t.op != OpKind::Transpose) continue;
    const int out = t.outputs[0];
    const TensorDesc& xd = g.tensor(t.inputs[0]).desc;
    const TensorDesc& zd = g.tensor(out).desc;
    const auto st = static_strides(xd);
    if (!st || zd.rank() != 4 || zd.layout != Layout::NCHW || is_graph_output(g, out) ||
        !all_consumers_take_nhwc(g, out))
      continue;
    const auto& perm = t.attr_ints("perm");
    std::vector<int64_t> ps(4);
    for (size_t k = 0; k < 4; ++k) ps[k] = (*st)[static_cast<size_t>(perm[k])];
    if (!strides_dense(ps, zd.shape, Layout::NHWC) || strides_dense(ps, zd.shape, Layout::NCHW))
      continue;
    Graph h = g;
    h.mutable_tensors()[out].desc.layout = Layout::NHWC;
    if (reinfer_layouts(h, i + 1)) g = std::move(h);
  }
}

}  // namespace

int elementwise_before_relabels(Graph& g, std::vector<std::string>* moved) {
  int count = 0;
  settle_relabels(g);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const auto perm = relabel(g, static_cast<int>(i));
    if (!perm) continue;
    const int z = g.nodes()[i].outputs[0];
    if (!read_by_one(g, z)) continue;
    const int ei = consumers_of(g, z)[0];
    const std::string en = g.nodes()[ei].name;
    if (!is_elementwise(g.nodes()[ei]) || !move_above(g, static_cast<int>(i), ei, *perm)) continue;
    if (moved) moved->push_back(en);
    ++count;
    // The old relabel and op go (the contraction's result has one reader again); the new
    // relabel comes after the moved op, where the scan goes on, so the next op can move too.
    g.prune();
    --i;
  }
  return count;
}

}  // namespace kiln
