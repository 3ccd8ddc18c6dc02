// Rows, shape inference and shared index arithmetic of the byte-moving movement ops (ONNX
// semantics; engine/ir/movement_ops.hpp).
#include "engine/ir/movement_ops.hpp"

#include <algorithm>
#include <limits>

#include "engine/base/check.hpp"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;

// A concat's inputs are all kernel parameters of its copy kernel (8 bytes each, within CUDA's
// 4 KiB of parameters with room for the dims).
constexpr int kMaxConcatInputs = 256;

Layout kept_layout(const TensorDesc& d) {
  return d.layout == Layout::Strided ? Layout::NCHW : d.layout;
}

TensorDesc like(const TensorDesc& d, Shape shape, Layout layout) {
  TensorDesc o;
  o.dtype = d.dtype;
  o.shape = std::move(shape);
  o.layout = (layout == Layout::NHWC && o.shape.size() != 4) ? Layout::NCHW : layout;
  return o;
}

void require_min_rank(const InferArgs& a, int lo, const char* what) {
  KILN_CHECK(in(a, 0).rank() >= lo, "{}: input 0 ('{}') must be {} (rank >= {}), found {}", a.where,
             in_name(a, 0), what, lo, in(a, 0).str());
}

int64_t checked_axis(const InferArgs& a, int64_t axis, int rank, const char* attr) {
  KILN_CHECK(axis >= -rank && axis < rank, "{}.{}: axis {} out of range for rank {}", a.where, attr,
             axis, rank);
  return axis < 0 ? axis + rank : axis;
}

int64_t static_dim(const InferArgs& a, size_t input, int64_t d, const char* what) {
  const Dim& dim = in(a, input).shape[d];
  KILN_CHECK(dim.is_static(), "{}: {} (dim {} of '{}') must be a static size, found symbolic '{}'",
             a.where, what, d, in_name(a, input), dim.str());
  return dim.value();
}

std::vector<TensorDesc> infer_concat(const InferArgs& a) {
  require_min_rank(a, 1, "a tensor");
  const TensorDesc& d0 = in(a, 0);
  const int r = d0.rank();
  const int64_t axis = checked_axis(a, a.node.attr_int("axis"), r, "axis");
  Shape out = d0.shape;
  bool same_layout = true;
  for (size_t i = 1; i < a.in.size(); ++i) {
    const TensorDesc& di = in(a, i);
    KILN_CHECK(di.dtype == d0.dtype,
               "{}: dtype mismatch: input {} ('{}') is {} but input 0 ('{}') is {}; concat joins "
               "tensors of one dtype (insert a cast)",
               a.where, i, in_name(a, i), dtype_name(di.dtype), in_name(a, 0),
               dtype_name(d0.dtype));
    KILN_CHECK(di.rank() == r, "{}: input {} ('{}') has rank {} but input 0 ('{}') has rank {}",
               a.where, i, in_name(a, i), di.rank(), in_name(a, 0), r);
    for (int d = 0; d < r; ++d) {
      if (d == axis) continue;
      KILN_CHECK(di.shape[d] == d0.shape[d],
                 "{}: input {} ('{}') has shape {} but input 0 ('{}') has {}: dim {} differs ({} "
                 "vs {}; only the concat axis {} may)",
                 a.where, i, in_name(a, i), shape_str(di.shape), in_name(a, 0), shape_str(d0.shape),
                 d, di.shape[d].str(), d0.shape[d].str(), axis);
    }
    out[axis] = out[axis] + di.shape[axis];
    same_layout &= kept_layout(di) == kept_layout(d0);
  }
  return {like(d0, out, same_layout ? kept_layout(d0) : Layout::NCHW)};
}

std::vector<TensorDesc> infer_split(const InferArgs& a) {
  require_min_rank(a, 1, "a tensor");
  const TensorDesc& d0 = in(a, 0);
  const int64_t axis = checked_axis(a, a.node.attr_int("axis"), d0.rank(), "axis");
  const int64_t dim = static_dim(a, 0, axis, "the split axis");
  std::vector<TensorDesc> outs;
  for (int64_t s : split_sizes(a.node, dim, a.where)) {
    Shape sh = d0.shape;
    sh[axis] = Dim(s);
    outs.push_back(like(d0, sh, kept_layout(d0)));
  }
  return outs;
}

std::vector<TensorDesc> infer_slice(const InferArgs& a) {
  require_min_rank(a, 1, "a tensor");
  const TensorDesc& d0 = in(a, 0);
  const Ints axes = slice_axis_list(a.node, d0.rank(), a.where);
  const Ints& starts = a.node.attr_ints("starts");
  const Ints& steps = a.node.attr_ints("steps");
  for (size_t i = 0; i < steps.size(); ++i)
    KILN_CHECK(steps[i] != 0, "{}.steps[{}]: a step must not be 0", a.where, i);
  std::vector<int64_t> dims(d0.rank(), 1);
  for (int64_t ax : axes) dims[ax] = static_dim(a, 0, ax, "a sliced dim");
  std::vector<SliceAxis> sa = slice_axes(a.node, dims);
  Shape out = d0.shape;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t ax = axes[i];
    KILN_CHECK(sa[ax].len > 0,
               "{}.starts[{}]: slice of axis {} (size {}) from {} to {} step {} is empty "
               "(tensors have positive sizes)",
               a.where, i, ax, dims[ax], starts[i], a.node.attr_ints("ends")[i],
               steps.empty() ? 1 : steps[i]);
    out[ax] = Dim(sa[ax].len);
  }
  return {like(d0, out, kept_layout(d0))};
}

std::vector<TensorDesc> infer_expand(const InferArgs& a) {
  const Shape& target = a.node.attr_dims("shape");
  for (size_t i = 0; i < target.size(); ++i)
    KILN_CHECK(!target[i].is_static() || target[i].value() >= 1,
               "{}.shape[{}]: expected a positive size or a symbol, found {}", a.where, i,
               target[i].value());
  Shape out = broadcast_shapes(in(a, 0).shape, target, a.where + ".shape");
  return {like(in(a, 0), out, out == in(a, 0).shape ? kept_layout(in(a, 0)) : Layout::NCHW)};
}

std::vector<TensorDesc> infer_tile(const InferArgs& a) {
  const TensorDesc& d0 = in(a, 0);
  const Ints& rep = a.node.attr_ints("repeats");
  KILN_CHECK(static_cast<int>(rep.size()) == d0.rank(),
             "{}.repeats: expected {} integers (one per dim of '{}' {}), found {} values", a.where,
             d0.rank(), in_name(a, 0), shape_str(d0.shape), rep.size());
  Shape out = d0.shape;
  for (size_t i = 0; i < rep.size(); ++i) {
    KILN_CHECK(rep[i] >= 1 && rep[i] <= std::numeric_limits<int32_t>::max(),
               "{}.repeats[{}]: expected an integer in 1..2147483647, found {}", a.where, i,
               rep[i]);
    if (rep[i] > 1) out[i] = out[i] * Dim(rep[i]);
  }
  return {like(d0, out, rep == Ints(rep.size(), 1) ? kept_layout(d0) : Layout::NCHW)};
}

int64_t blocksize(const InferArgs& a) {
  const int64_t b = a.node.attr_int("blocksize");
  KILN_CHECK(b >= 1 && b <= 1024, "{}.blocksize: expected an integer in 1..1024, found {}", a.where,
             b);
  return b;
}

std::vector<TensorDesc> infer_depth_to_space(const InferArgs& a) {
  const TensorDesc& d0 = in(a, 0);
  KILN_CHECK(d0.rank() == 4, "{}: input 0 ('{}') must be an activation [N, C, H, W], found {}",
             a.where, in_name(a, 0), d0.str());
  const int64_t b = blocksize(a);
  const int64_t c = static_dim(a, 0, 1, "the channel count C");
  KILN_CHECK(c % (b * b) == 0,
             "{}.blocksize: the {} channels of '{}' are not divisible by blocksize^2 = {}", a.where,
             c, in_name(a, 0), b * b);
  const Shape& x = d0.shape;
  return {like(d0, {x[0], Dim(c / (b * b)), x[2] * Dim(b), x[3] * Dim(b)}, Layout::NCHW)};
}

std::vector<TensorDesc> infer_space_to_depth(const InferArgs& a) {
  const TensorDesc& d0 = in(a, 0);
  KILN_CHECK(d0.rank() == 4, "{}: input 0 ('{}') must be an activation [N, C, H, W], found {}",
             a.where, in_name(a, 0), d0.str());
  const int64_t b = blocksize(a);
  const Shape& x = d0.shape;
  for (int d : {2, 3}) {
    const int64_t v = static_dim(a, 0, d, d == 2 ? "the height H" : "the width W");
    KILN_CHECK(v % b == 0, "{}.blocksize: the {} {} of '{}' is not divisible by blocksize {}",
               a.where, d == 2 ? "height" : "width", v, in_name(a, 0), b);
  }
  return {like(d0, {x[0], x[1] * Dim(b * b), Dim(x[2].value() / b), Dim(x[3].value() / b)},
               Layout::NCHW)};
}

std::vector<TensorDesc> infer_trilu(const InferArgs& a) {
  require_min_rank(a, 2, "a matrix [..., rows, cols]");
  const int64_t k = a.node.attr_int("k");
  KILN_CHECK(k >= std::numeric_limits<int32_t>::min() && k <= std::numeric_limits<int32_t>::max(),
             "{}.k: expected a 32-bit integer, found {}", a.where, k);
  return {like(in(a, 0), in(a, 0).shape, kept_layout(in(a, 0)))};
}

AttrSpec int_attr(const char* n, std::optional<int64_t> d) {
  if (d) return {n, AttrKind::Int, AttrValue(*d)};
  return {n, AttrKind::Int, std::nullopt};
}
AttrSpec ints_attr(const char* n, std::optional<Ints> d) {
  if (d) return {n, AttrKind::Ints, AttrValue(std::move(*d))};
  return {n, AttrKind::Ints, std::nullopt};
}

OpInfo row(OpKind k, int min_in, int max_in, std::vector<AttrSpec> attrs, InferFn f) {
  return OpInfo{k,     op_name(k), OpCategory::Movement, FusionRole::Movement, min_in, max_in,
                attrs, f};
}

OpInfo several_outputs(OpInfo r) {
  r.several_outputs = true;
  return r;
}

}  // namespace

std::vector<OpInfo> movement_rows() {
  return {
      row(OpKind::Concat, 1, kMaxConcatInputs, {int_attr("axis", std::nullopt)}, infer_concat),
      several_outputs(
          row(OpKind::Split, 1, 1,
              {int_attr("axis", 0), ints_attr("split", Ints{}), int_attr("num_outputs", 0)},
              infer_split)),
      row(OpKind::Slice, 1, 1,
          {ints_attr("starts", std::nullopt), ints_attr("ends", std::nullopt),
           ints_attr("axes", Ints{}), ints_attr("steps", Ints{})},
          infer_slice),
      row(OpKind::Expand, 1, 1, {{"shape", AttrKind::Dims, std::nullopt}}, infer_expand),
      row(OpKind::Tile, 1, 1, {ints_attr("repeats", std::nullopt)}, infer_tile),
      row(OpKind::DepthToSpace, 1, 1,
          {int_attr("blocksize", std::nullopt),
           AttrSpec{"mode", AttrKind::Enum, AttrValue(std::string("DCR")), "DCR|CRD"}},
          infer_depth_to_space),
      row(OpKind::SpaceToDepth, 1, 1, {int_attr("blocksize", std::nullopt)}, infer_space_to_depth),
      row(OpKind::Trilu, 1, 1, {int_attr("upper", 1), int_attr("k", 0)}, infer_trilu),
  };
}

int64_t movement_axis(const Node& n, int rank) {
  const int64_t axis = n.attr_int("axis");
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> slice_axis_list(const Node& n, int rank, const std::string& where) {
  const Ints& starts = n.attr_ints("starts");
  const Ints& ends = n.attr_ints("ends");
  Ints axes = n.attr_ints("axes");
  const Ints& steps = n.attr_ints("steps");
  KILN_CHECK(!starts.empty(), "{}.starts: expected at least one start", where);
  KILN_CHECK(ends.size() == starts.size(), "{}.ends: expected {} values (one per start), found {}",
             where, starts.size(), ends.size());
  KILN_CHECK(steps.empty() || steps.size() == starts.size(),
             "{}.steps: expected {} values (one per start) or none, found {}", where, starts.size(),
             steps.size());
  if (axes.empty()) {
    KILN_CHECK(static_cast<int>(starts.size()) <= rank,
               "{}.starts: {} starts for an input of rank {} (and no axes)", where, starts.size(),
               rank);
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    return axes;
  }
  KILN_CHECK(axes.size() == starts.size(), "{}.axes: expected {} values (one per start), found {}",
             where, starts.size(), axes.size());
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    KILN_CHECK(axes[i] >= -rank && axes[i] < rank, "{}.axes[{}]: axis {} out of range for rank {}",
               where, i, axes[i], rank);
    if (axes[i] < 0) axes[i] += rank;
    KILN_CHECK(!seen[axes[i]], "{}.axes[{}]: axis {} listed twice", where, i, axes[i]);
    seen[axes[i]] = true;
  }
  return axes;
}

std::vector<SliceAxis> slice_axes(const Node& n, const std::vector<int64_t>& dims) {
  const int rank = static_cast<int>(dims.size());
  std::vector<SliceAxis> out(rank);
  for (int d = 0; d < rank; ++d) out[d] = {0, 1, dims[d]};
  const Ints axes = slice_axis_list(n, rank, n.name);
  const Ints& starts = n.attr_ints("starts");
  const Ints& ends = n.attr_ints("ends");
  const Ints& steps = n.attr_ints("steps");
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t dim = dims[axes[i]];
    const int64_t step = steps.empty() ? 1 : steps[i];
    KILN_ASSERT(step != 0, "slice {}: step 0", n.name);
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s = s < -dim ? -1 : s + dim;  // below -dim: before the start (clamped below)
    if (e < 0) e = e < -dim ? -1 : e + dim;
    int64_t len = 0;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      len = e > s ? (e - s - 1) / step + 1 : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      // -step without overflow: a step beyond the dim takes one element either way.
      len = s > e ? (s - e - 1) / (step < -dim ? dim + 1 : -step) + 1 : 0;
    }
    // One element reads only `s`: step 1 keeps huge steps out of index arithmetic.
    out[axes[i]] = {s, len == 1 ? 1 : step, len};
  }
  return out;
}

std::vector<int64_t> split_sizes(const Node& n, int64_t dim, const std::string& where) {
  const Ints& split = n.attr_ints("split");
  const int64_t parts = n.attr_int("num_outputs");
  if (!split.empty()) {
    KILN_CHECK(parts == 0 || parts == static_cast<int64_t>(split.size()),
               "{}.num_outputs: {} outputs but split lists {} sizes", where, parts, split.size());
    int64_t sum = 0;
    for (size_t i = 0; i < split.size(); ++i) {
      KILN_CHECK(split[i] >= 1 && split[i] <= dim,
                 "{}.split[{}]: expected a size in 1..{} (the split axis), found {}", where, i, dim,
                 split[i]);
      sum += split[i];
    }
    KILN_CHECK(sum == dim, "{}.split: the sizes [{}] sum to {}, not to the split axis's {}", where,
               fmt::join(split, ", "), sum, dim);
    return split;
  }
  KILN_CHECK(parts >= 1,
             "{}: give split (the output sizes) or num_outputs (equal parts), found neither",
             where);
  KILN_CHECK(parts <= dim, "{}.num_outputs: {} parts of an axis of size {} (parts are non-empty)",
             where, parts, dim);
  const int64_t chunk = (dim + parts - 1) / parts;
  KILN_CHECK(chunk * (parts - 1) < dim,
             "{}.num_outputs: {} parts of ceil({} / {}) = {} leave the last one empty", where,
             parts, dim, parts, chunk);
  Ints sizes(parts, chunk);
  sizes.back() = dim - chunk * (parts - 1);
  return sizes;
}

}  // namespace kiln
