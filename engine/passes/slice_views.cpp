// Slices, expands and gathers of constant indices as views (engine/passes/passes.hpp:
// fold_slice_views): the input's memory read through other strides, at an offset, with no copy
// kernel.
#include <fmt/format.h>

#include <map>
#include <optional>

#include "engine/ir/gather_ops.hpp"
#include "engine/ir/graph_queries.hpp"
#include "engine/ir/movement_ops.hpp"
#include "engine/passes/passes.hpp"
#include "engine/passes/strided_views.hpp"

namespace kiln {

namespace {

// Constant index tensors up to this many elements are read to see whether they are a
// progression (ViT's x[:, 0], a constant row selection).
constexpr int64_t kMaxViewIndices = 4096;

// A gather along `axis` of constant indices start, start + step, ... (step >= 1, every index in
// range; a scalar index drops the axis) reads the data at an offset and strides: a slice.
bool gather_strides(const Graph& g, const Node& n, const std::vector<int64_t>& in_strides,
                    std::vector<int64_t>* strides, int64_t* offset) {
  const TensorDesc& dd = g.tensor(n.inputs[0]).desc;
  const TensorInfo& it = g.tensor(n.inputs[1]);
  if (it.role != TensorRole::Constant || !it.data || it.desc.rank() > 1) return false;
  const int64_t axis = gather_axis(n, dd.rank());
  if (!dd.shape[axis].is_static()) return false;
  const int64_t dim = dd.shape[axis].value();
  if (it.desc.rank() == 1 &&
      (!it.desc.shape[0].is_static() || it.desc.shape[0].value() > kMaxViewIndices))
    return false;
  std::vector<int64_t> idx = it.data->to_i64();
  if (idx.empty()) return false;
  for (int64_t& v : idx) {
    if (v < -dim || v >= dim) return false;  // the kernel reports it
    if (v < 0) v += dim;
  }
  const int64_t step = idx.size() > 1 ? idx[1] - idx[0] : 1;
  if (step < 1) return false;
  for (size_t k = 1; k < idx.size(); ++k)
    if (idx[k] - idx[k - 1] != step) return false;
  *offset = idx[0] * in_strides[axis];
  *strides = in_strides;
  if (it.desc.rank() == 0)
    strides->erase(strides->begin() + axis);
  else
    (*strides)[axis] *= step;
  return true;
}

// The reader of `t` that does not take it laid out with `strides` (readers_take_strided: a
// slice or reshape whose own readers refuse is named itself), as "op 'name'", or "".
std::string dense_reader(const Graph& g, int t, const std::vector<int64_t>& strides) {
  for (int c : consumers_of(g, t)) {
    const Node& n = g.nodes()[c];
    if (!reader_takes_strides(g, n, t, strides) && !matmul_reads_operand(n, t, strides))
      return fmt::format("{} '{}'", op_name(n.op), n.name);
  }
  return "";
}

// A slice along the leading dim alone (step 1) of row-major memory keeps whole rows: dense
// memory at an offset, symbolic where the inner dims are (Swin V2's q, k and v of its head split,
// [3, 49 N, 3, 64, 32]). The offset, and in `*factor` a static factor of it.
std::optional<Dim> leading_slice_offset(const Graph& g, const Node& n, int64_t* factor) {
  const TensorDesc& id = g.tensor(n.inputs[0]).desc;
  if (n.op != OpKind::Slice || id.layout != Layout::NCHW || id.rank() < 2 ||
      !id.shape[0].is_static())
    return std::nullopt;
  std::vector<int64_t> dims(id.rank(), 1);
  dims[0] = id.shape[0].value();
  for (int64_t ax : slice_axis_list(n, id.rank(), n.name))
    if (ax != 0) return std::nullopt;
  const std::vector<SliceAxis> sa = slice_axes(n, dims);
  if (sa[0].step != 1) return std::nullopt;
  Dim inner(1);
  *factor = sa[0].start;
  for (int d = 1; d < id.rank(); ++d) {
    inner = inner * id.shape[d];
    if (id.shape[d].is_static()) *factor *= id.shape[d].value();
  }
  return Dim(sa[0].start) * inner;
}

// How node `n` reads its input as a view: strides (empty: dense row-major) and an offset into
// the input, true; else false with `*why`.
bool view_of_input(const Graph& g, const Node& n, std::vector<int64_t>* strides, Dim* offset,
                   bool* dense, std::string* why) {
  const TensorDesc& id = g.tensor(n.inputs[0]).desc;
  const int64_t es = static_cast<int64_t>(dtype_size(id.dtype));
  int64_t factor = 0;
  if (std::optional<Dim> lead = leading_slice_offset(g, n, &factor)) {
    if (!offset_aligned(Dim(1), factor, es)) {
      *why = fmt::format("it starts {} elements in, not 16 bytes aligned", lead->str());
      return false;
    }
    strides->clear();
    *offset = *lead;
    *dense = true;
    return true;
  }
  auto in_strides = static_strides(id);
  if (!in_strides) {
    *why = "its input's strides are not static";
    return false;
  }
  int64_t off = 0;
  const bool ok = n.op == OpKind::Gather ? gather_strides(g, n, *in_strides, strides, &off)
                                         : slice_view_strides(g, n, *in_strides, strides, &off);
  if (!ok) {
    *why = n.op == OpKind::Gather ? "its indices are no constant progression in range"
                                  : "a negative step or a symbolic sliced dim";
    return false;
  }
  // The input's own offset is aligned (a view made by a pass) or 0.
  if (!offset_aligned(Dim(off), 1, es)) {
    *why = fmt::format("it starts {} elements in, not 16 bytes aligned", off);
    return false;
  }
  *offset = Dim(off);
  *dense = layout_of_strides(*strides, g.tensor(n.outputs[0]).desc.shape) != Layout::Strided;
  return true;
}

// The strides of each view of `out` (a root of views: reshapes of it folded first) once `out`
// is laid out with `strides`, where each is a reshape of `out` at offset 0 that strided memory
// holds (reshape_view_strides: a squeeze after a slice, Swin V2's q, k and v) and its readers
// take those strides; else nothing.
std::optional<std::map<int, std::vector<int64_t>>> strided_views_of(
    const Graph& g, int out, const std::vector<int64_t>& strides) {
  std::map<int, std::vector<int64_t>> vs;
  const TensorDesc& od = g.tensor(out).desc;
  for (int t = 0; t < static_cast<int>(g.tensors().size()); ++t) {
    const TensorInfo& v = g.tensor(t);
    if (v.view_of != out) continue;
    if (!(v.view_offset == Dim(0)) || v.desc.layout != Layout::NCHW) return std::nullopt;
    auto s = reshape_view_strides(od.shape, strides, v.desc.shape);
    if (!s || !readers_take_strided(g, t, *s)) return std::nullopt;
    vs[t] = *s;
  }
  // Every other reader of `out` itself.
  for (int c : consumers_of(g, out)) {
    const Node& n = g.nodes()[c];
    if (vs.count(n.outputs[0])) continue;
    if (!reader_takes_strides(g, n, out, strides) && !matmul_reads_operand(n, out, strides))
      return std::nullopt;
  }
  return vs;
}

// Movement node `i` as a view (true), or, for a slice, expand or gather that stays a copy
// kernel, why (false, `*why`; empty for other nodes).
bool try_view(Graph& g, int i, std::string* what, std::string* why) {
  const Node& n = g.nodes()[i];
  if (n.op != OpKind::Slice && n.op != OpKind::Expand && n.op != OpKind::Gather) return false;
  const int in = n.inputs[0], out = n.outputs[0];
  const TensorInfo& ti = g.tensor(in);
  if (ti.desc.dtype != g.tensor(out).desc.dtype) return false;
  // A root of views (a reshape of it folded first) may still become a view when it is dense:
  // its views then take its root and offset.
  const bool reroot = n.op == OpKind::Slice && !may_become_view(g, out) && is_view_root(g, out);
  if (!may_become_view(g, out) && !reroot) {
    *why = "its output is a graph output or already has views";
    return false;
  }
  if (consumers_of(g, out).empty()) {
    *why = "nothing reads it";
    return false;
  }
  const int root = memory_root(g, in);
  // Constants are uploaded one by one for the kernels that read them.
  if (g.tensor(root).role == TensorRole::Constant) {
    *why = "it reads a constant";
    return false;
  }
  std::vector<int64_t> strides;
  Dim offset(0);
  bool dense = false;
  if (!view_of_input(g, n, &strides, &offset, &dense, why)) return false;
  // Dense memory at an offset is what any kernel reads; strided memory only the readers
  // readers_take_strided names take.
  std::map<int, std::vector<int64_t>> rerooted;
  if (reroot && !dense) {
    auto vs = strided_views_of(g, out, strides);
    if (!vs) {
      *why = "its output already has views and the slice is not dense";
      return false;
    }
    rerooted = *vs;
  } else if (!dense && !readers_take_strided(g, out, strides)) {
    *why = fmt::format("{} reads dense memory only", dense_reader(g, out, strides));
    return false;
  }
  const Dim at = ti.view_offset + offset;
  *what = fmt::format("{} ({})", n.name, op_name(n.op));
  if (reroot)
    for (int v = 0; v < static_cast<int>(g.tensors().size()); ++v) {
      TensorInfo& t = g.mutable_tensors()[v];
      if (t.view_of != out) continue;  // views of `out`, at their offsets into it
      t.view_of = root;
      t.view_offset = at + t.view_offset;
      if (rerooted.count(v)) {
        t.desc.layout = layout_of_strides(rerooted[v], t.desc.shape);
        t.desc.strides = t.desc.layout == Layout::Strided ? rerooted[v] : std::vector<int64_t>{};
      }
    }
  make_view(g, out, root, strides, at);
  return true;
}

}  // namespace

bool has_slice_or_expand(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Slice || n.op == OpKind::Expand || n.op == OpKind::Gather) return true;
  return false;
}

int fold_slice_views(Graph& g, std::vector<std::string>* views, std::vector<std::string>* kept) {
  int count = 0;
  for (int i = 0; i < static_cast<int>(g.nodes().size()); ++i) {
    std::string what, why;
    if (!try_view(g, i, &what, &why)) {
      if (kept && !why.empty())
        kept->push_back(
            fmt::format("{} ({}: {})", g.nodes()[i].name, op_name(g.nodes()[i].op), why));
      continue;
    }
    if (views) views->push_back(what);
    ++count;
  }
  return count;
}

}  // namespace kiln
