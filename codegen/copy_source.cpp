// Source coordinates of the byte-moving movement ops (codegen/copy_source.hpp).
#include "codegen/copy_source.hpp"

#include "engine/base/check.hpp"
#include "engine/ir/movement_ops.hpp"
#include "engine/ir/resize_op.hpp"

namespace kiln {
namespace {

// "(e)" unless e is a plain identifier or literal.
std::string par(const std::string& e) {
  return e.find_first_of(" +-*/%?") == std::string::npos ? e : "(" + e + ")";
}

std::string dim_ref(const Dim& d, DimParams& dp) {
  return d.is_static() ? std::to_string(d.value()) : dp.ref(d);
}

std::vector<CopySource> concat_sources(const Graph& g, const Node& node,
                                       const std::vector<std::string>& oc, DimParams& dp) {
  const int r = static_cast<int>(oc.size());
  const int64_t axis = movement_axis(node, r);
  std::vector<CopySource> out;
  Dim at(0);  // the input's first coordinate along the axis
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    const Dim& size = g.tensor(node.inputs[k]).desc.shape[axis];
    CopySource s;
    s.input = static_cast<int>(k);
    s.coords = oc;
    if (!(at.is_static() && at.value() == 0))
      s.coords[axis] = fmt::format("({} - {})", oc[axis], dim_ref(at, dp));
    at = at + size;
    if (k + 1 < node.inputs.size())
      s.inside = fmt::format("{} < {}", par(oc[axis]), dim_ref(at, dp));
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> slice_coords(const TensorDesc& id, const Node& node,
                                      const std::vector<std::string>& oc) {
  const int r = id.rank();
  std::vector<int64_t> dims(r, 1);
  const std::vector<int64_t> axes = slice_axis_list(node, r, node.name);
  for (int64_t ax : axes) dims[ax] = id.shape[ax].value();  // static (shape inference checked)
  const std::vector<SliceAxis> sa = slice_axes(node, dims);
  std::vector<std::string> c = oc;
  for (int64_t ax : axes) {
    const SliceAxis& s = sa[ax];
    std::string e = s.step == 1 ? par(oc[ax]) : fmt::format("{} * {}", s.step, par(oc[ax]));
    c[ax] = s.start == 0 ? e : fmt::format("({} + {})", s.start, e);
  }
  return c;
}

std::vector<std::string> expand_coords(const TensorDesc& id, const std::vector<std::string>& oc) {
  const size_t off = oc.size() - id.shape.size();
  std::vector<std::string> c;
  for (size_t d = 0; d < id.shape.size(); ++d)
    c.push_back(id.shape[d].is_static() && id.shape[d].value() == 1 ? "0" : oc[off + d]);
  return c;
}

std::vector<std::string> tile_coords(const TensorDesc& id, const Node& node,
                                     const std::vector<std::string>& oc, DimParams& dp) {
  const std::vector<int64_t>& rep = node.attr_ints("repeats");
  std::vector<std::string> c = oc;
  for (size_t d = 0; d < c.size(); ++d)
    if (rep[d] > 1) c[d] = fmt::format("({} % {})", par(oc[d]), dim_ref(id.shape[d], dp));
  return c;
}

std::vector<std::string> depth_to_space_coords(const TensorDesc& id, const Node& node,
                                               const std::vector<std::string>& oc) {
  const int64_t b = node.attr_int("blocksize");
  const int64_t c_out = id.shape[1].value() / (b * b);
  const std::string i = fmt::format("({} % {})", par(oc[2]), b);
  const std::string j = fmt::format("({} % {})", par(oc[3]), b);
  const std::string c = node.attr_str("mode") == "DCR"
                            ? fmt::format("(({} * {} + {}) * {} + {})", i, b, j, c_out, par(oc[1]))
                            : fmt::format("({} * {} + {} * {} + {})", par(oc[1]), b * b, i, b, j);
  return {oc[0], c, fmt::format("({} / {})", par(oc[2]), b),
          fmt::format("({} / {})", par(oc[3]), b)};
}

std::vector<std::string> space_to_depth_coords(const TensorDesc& id, const Node& node,
                                               const std::vector<std::string>& oc) {
  const int64_t b = node.attr_int("blocksize");
  const int64_t c_in = id.shape[1].value();
  const std::string blk = fmt::format("({} / {})", par(oc[1]), c_in);
  return {oc[0], fmt::format("({} % {})", par(oc[1]), c_in),
          fmt::format("({} * {} + {} / {})", par(oc[2]), b, blk, b),
          fmt::format("({} * {} + {} % {})", par(oc[3]), b, blk, b)};
}

// Pad's reflect (mirror without the edge) and edge (repeat the edge) coordinates.
std::vector<std::string> mirror_pad_coords(const TensorDesc& id, const Node& node,
                                           const std::vector<std::string>& oc, DimParams& dp) {
  const std::vector<int64_t>& pads = node.attr_ints("pads");
  const size_t r = oc.size();
  const bool reflect = node.attr_str("mode") == "reflect";
  std::vector<std::string> c;
  for (size_t d = 0; d < r; ++d) {
    if (pads[d] == 0 && pads[r + d] == 0) {
      c.push_back(oc[d]);
      continue;
    }
    const std::string x = pads[d] == 0 ? par(oc[d]) : fmt::format("({} - {})", par(oc[d]), pads[d]);
    const std::string last = id.shape[d].is_static() ? std::to_string(id.shape[d].value() - 1)
                                                     : fmt::format("({} - 1)", dp.ref(id.shape[d]));
    if (reflect)  // the dim is static (shape inference checked)
      c.push_back(fmt::format("({0} < 0 ? -{0} : ({0} > {1} ? {2} - {0} : {0}))", x, last,
                              2 * (id.shape[d].value() - 1)));
    else
      c.push_back(fmt::format("({0} < 0 ? 0 : ({0} > {1} ? {1} : {0}))", x, last));
  }
  return c;
}

// Nearest resize: each spatial coordinate rounded as resize_nearest_index, clamped as a float.
std::vector<std::string> resize_nearest_coords(const TensorDesc& id, const TensorDesc& od,
                                               const Node& node, const std::vector<std::string>& oc,
                                               DimParams& dp) {
  const ResizeNearest r = resize_spec(node).nearest;
  const Dim numel = shape_numel(id.shape);
  const char* ct = numel.is_static() && numel.value() < (int64_t{1} << 31) ? "int" : "long long";
  std::vector<std::string> c = oc;
  for (size_t d = kResizeFirstSpatial; d < oc.size(); ++d) {
    if (resize_identity_dim(node, id, od, d)) continue;
    const std::string x = resize_source_expr(node, id, od, d, oc[d], dp);
    std::string v;
    switch (r) {
      case ResizeNearest::PreferFloor:
        v = fmt::format("ceilf({} - 0.5f)", x);
        break;
      case ResizeNearest::PreferCeil:
        v = fmt::format("floorf({} + 0.5f)", x);
        break;
      case ResizeNearest::Floor:
        v = fmt::format("floorf({})", x);
        break;
      case ResizeNearest::Ceil:
        v = fmt::format("ceilf({})", x);
        break;
    }
    c[d] = fmt::format("static_cast<{}>(fminf(fmaxf({}, 0.0f), (float)({})))", ct, v,
                       dim_minus_one(id.shape[d], dp));
  }
  return c;
}

}  // namespace

bool resize_identity_dim(const Node& node, const TensorDesc& id, const TensorDesc& od, size_t d) {
  const std::vector<double>& scales = node.attr_floats("scales");
  return id.shape[d] == od.shape[d] && (scales.empty() || scales[d] == 1.0);
}

std::string dim_minus_one(const Dim& d, DimParams& dp) {
  return d.is_static() ? std::to_string(d.value() - 1) : fmt::format("({} - 1)", dp.ref(d));
}

std::string resize_source_expr(const Node& node, const TensorDesc& id, const TensorDesc& od,
                               size_t d, const std::string& o, DimParams& dp) {
  const Dim& in = id.shape[d];
  const Dim& out = od.shape[d];
  const std::vector<double>& scales = node.attr_floats("scales");
  std::string scale;
  if (!scales.empty())
    scale = cuda_float(static_cast<float>(scales[d]));
  else if (in.is_static() && out.is_static())
    scale = cuda_float(static_cast<float>(out.value()) / static_cast<float>(in.value()));
  else
    scale = fmt::format("((float){} / (float){})", dim_ref(out, dp), dim_ref(in, dp));
  const std::string x = fmt::format("(float)({})", o);
  // `out > 1` where the mode needs it: decided now for a static size.
  auto beyond_one = [&](const std::string& e) {
    if (out.is_static()) return out.value() > 1 ? e : std::string("0.0f");
    return fmt::format("({} > 1 ? {} : 0.0f)", dp.ref(out), e);
  };
  switch (resize_spec(node).coord) {
    case ResizeCoord::HalfPixel:
      return fmt::format("(({} + 0.5f) / {} - 0.5f)", x, scale);
    case ResizeCoord::PytorchHalfPixel:
      return beyond_one(fmt::format("(({} + 0.5f) / {} - 0.5f)", x, scale));
    case ResizeCoord::AlignCorners:
      return beyond_one(fmt::format("({} * (float)({}) / (float)({}))", x, dim_minus_one(in, dp),
                                    dim_minus_one(out, dp)));
    case ResizeCoord::Asymmetric:
      return fmt::format("({} / {})", x, scale);
  }
  return "0.0f";
}

bool is_gather_copy(const Node& node) {
  switch (node.op) {
    case OpKind::Concat:
    case OpKind::Slice:
    case OpKind::Expand:
    case OpKind::Tile:
    case OpKind::DepthToSpace:
    case OpKind::SpaceToDepth:
    case OpKind::Trilu:
    case OpKind::Gather:
    case OpKind::GatherElements:
      return true;
    case OpKind::Pad:
      return node.attr_str("mode") != "constant";
    case OpKind::Resize:
      return !resize_spec(node).linear;
    default:
      return false;
  }
}

std::vector<CopySource> movement_sources(const Graph& g, const Node& node,
                                         const std::vector<std::string>& oc, DimParams& dp) {
  const TensorDesc& id = g.tensor(node.inputs[0]).desc;
  CopySource s;
  switch (node.op) {
    case OpKind::Concat:
      return concat_sources(g, node, oc, dp);
    case OpKind::Slice:
      s.coords = slice_coords(id, node, oc);
      break;
    case OpKind::Expand:
      s.coords = expand_coords(id, oc);
      break;
    case OpKind::Tile:
      s.coords = tile_coords(id, node, oc, dp);
      break;
    case OpKind::DepthToSpace:
      s.coords = depth_to_space_coords(id, node, oc);
      break;
    case OpKind::SpaceToDepth:
      s.coords = space_to_depth_coords(id, node, oc);
      break;
    case OpKind::Trilu: {
      // Kept where col - row is >= k (upper) or <= k (lower); zero elsewhere.
      const size_t r = oc.size();
      s.coords = oc;
      s.inside = fmt::format("{} - {} {} {}", par(oc[r - 1]), par(oc[r - 2]),
                             node.attr_int("upper") != 0 ? ">=" : "<=", node.attr_int("k"));
      break;
    }
    case OpKind::Pad:
      s.coords = mirror_pad_coords(id, node, oc, dp);
      break;
    case OpKind::Resize:
      s.coords = resize_nearest_coords(id, g.tensor(node.outputs[0]).desc, node, oc, dp);
      break;
    default:
      KILN_ASSERT(false, "gather copy of op {}", op_name(node.op));
  }
  return {s};
}

}  // namespace kiln
