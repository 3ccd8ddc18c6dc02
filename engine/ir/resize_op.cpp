// The resize op's row, shape inference and shared coordinate arithmetic
// (engine/ir/resize_op.hpp).
#include "engine/ir/resize_op.hpp"

#include <cmath>
#include <limits>

#include "engine/base/check.hpp"

namespace kiln {
namespace {

constexpr const char* kModes = "nearest|linear|cubic";
// The first four are supported (ResizeCoord's order); the others are named so that their
// refusal says what they are.
constexpr const char* kCoordModes =
    "half_pixel|pytorch_half_pixel|align_corners|asymmetric|tf_half_pixel_for_nn|"
    "half_pixel_symmetric|tf_crop_and_resize";
constexpr const char* kNearestModes = "round_prefer_floor|round_prefer_ceil|floor|ceil";
constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();

const TensorDesc& in0(const InferArgs& a) {
  return a.in[0]->desc;
}

void check_supported(const InferArgs& a) {
  const Node& n = a.node;
  KILN_CHECK(n.attr_str("mode") != "cubic",
             "{}.mode: unsupported resize mode 'cubic' (nearest and linear are)", a.where);
  const std::string& c = n.attr_str("coordinate_transformation_mode");
  KILN_CHECK(
      c == "half_pixel" || c == "pytorch_half_pixel" || c == "align_corners" || c == "asymmetric",
      "{}.coordinate_transformation_mode: unsupported coordinate transformation mode '{}' "
      "(half_pixel, pytorch_half_pixel, align_corners and asymmetric are)",
      a.where, c);
  KILN_CHECK(n.attr_int("exclude_outside") == 0,
             "{}.exclude_outside: only 0 is supported (a cubic-mode option), found {}", a.where,
             n.attr_int("exclude_outside"));
  KILN_CHECK(n.attr_float("extrapolation_value") == 0.0,
             "{}.extrapolation_value: only 0 is supported (a tf_crop_and_resize option), found {}",
             a.where, n.attr_float("extrapolation_value"));
  KILN_CHECK(n.attr_int("antialias") == 0,
             "{}.antialias: only 0 is supported (no antialiasing filter), found {}", a.where,
             n.attr_int("antialias"));
  const TensorDesc& d = in0(a);
  KILN_CHECK(d.rank() >= 3 && d.rank() <= 5,
             "{}: input 0 ('{}') must be [N, C, spatial...] with 1 to 3 spatial dims (rank 3..5), "
             "found {}",
             a.where, a.in[0]->name, d.str());
  KILN_CHECK(n.attr_str("mode") != "linear" || is_float(d.dtype),
             "{}: linear resize takes a floating tensor, found {} '{}' (nearest takes any dtype)",
             a.where, dtype_name(d.dtype), a.in[0]->name);
}

// Output dims from `scales`: floor(in * scale) in f32 (as onnxruntime); a symbolic dim takes an
// integer scale only (in * k).
Shape from_scales(const InferArgs& a, const std::vector<double>& scales) {
  const Shape& x = in0(a).shape;
  Shape out = x;
  for (size_t d = 0; d < x.size(); ++d) {
    const double s = scales[d];
    KILN_CHECK(s > 0.0 && s <= kMaxDim, "{}.scales[{}]: expected a positive scale, found {}",
               a.where, d, s);
    if (d < kResizeFirstSpatial) {
      KILN_CHECK(s == 1.0,
                 "{}.scales[{}]: resizing the {} dim is not supported (scale {}; only the spatial "
                 "dims from dim 2 on resize)",
                 a.where, d, d == 0 ? "batch" : "channel", s);
      continue;
    }
    const float sf = static_cast<float>(s);
    if (!x[d].is_static()) {
      KILN_CHECK(sf >= 1.0f && sf == std::floor(sf),
                 "{}.scales[{}]: the symbolic dim '{}' of '{}' resizes by integer scales only, "
                 "found {}",
                 a.where, d, x[d].str(), a.in[0]->name, s);
      out[d] = sf == 1.0f ? x[d] : x[d] * Dim(static_cast<int64_t>(sf));
      continue;
    }
    const double o = std::floor(static_cast<double>(static_cast<float>(x[d].value()) * sf));
    KILN_CHECK(o >= 1.0 && o <= kMaxDim,
               "{}.scales[{}]: dim {} of size {} times {} gives {} (expected 1..2147483647)",
               a.where, d, d, x[d].value(), s, o);
    out[d] = Dim(static_cast<int64_t>(o));
  }
  return out;
}

Shape from_sizes(const InferArgs& a, const Shape& sizes) {
  const Shape& x = in0(a).shape;
  for (size_t d = 0; d < x.size(); ++d) {
    if (sizes[d].is_static())
      KILN_CHECK(sizes[d].value() >= 1 && sizes[d].value() <= kMaxDim,
                 "{}.sizes[{}]: expected a size in 1..2147483647 or a symbol, found {}", a.where, d,
                 sizes[d].value());
    if (d < kResizeFirstSpatial)
      KILN_CHECK(sizes[d] == x[d],
                 "{}.sizes[{}]: resizing the {} dim is not supported ({} to {}; only the spatial "
                 "dims from dim 2 on resize)",
                 a.where, d, d == 0 ? "batch" : "channel", x[d].str(), sizes[d].str());
  }
  return sizes;
}

std::vector<TensorDesc> infer_resize(const InferArgs& a) {
  check_supported(a);
  const TensorDesc& d = in0(a);
  const std::vector<double>& scales = a.node.attr_floats("scales");
  const Shape& sizes = a.node.attr_dims("sizes");
  KILN_CHECK(scales.empty() != sizes.empty(),
             "{}: give scales or sizes (one per dim of '{}'), found {}", a.where, a.in[0]->name,
             scales.empty() ? "neither" : "both");
  const size_t n = scales.empty() ? sizes.size() : scales.size();
  KILN_CHECK(static_cast<int>(n) == d.rank(),
             "{}.{}: expected {} values (one per dim of '{}' {}), found {}", a.where,
             scales.empty() ? "sizes" : "scales", d.rank(), a.in[0]->name, shape_str(d.shape), n);
  TensorDesc o;
  o.dtype = d.dtype;
  o.shape = scales.empty() ? from_sizes(a, sizes) : from_scales(a, scales);
  o.layout = d.layout == Layout::NHWC ? Layout::NHWC : Layout::NCHW;
  return {o};
}

}  // namespace

std::vector<OpInfo> resize_rows() {
  std::vector<AttrSpec> attrs = {
      {"mode", AttrKind::Enum, AttrValue(std::string("nearest")), kModes},
      {"coordinate_transformation_mode", AttrKind::Enum, AttrValue(std::string("half_pixel")),
       kCoordModes},
      {"nearest_mode", AttrKind::Enum, AttrValue(std::string("round_prefer_floor")), kNearestModes},
      {"scales", AttrKind::Floats, AttrValue(std::vector<double>{})},
      {"sizes", AttrKind::Dims, AttrValue(std::vector<Dim>{})},
      {"exclude_outside", AttrKind::Int, AttrValue(int64_t{0})},
      {"extrapolation_value", AttrKind::Float, AttrValue(0.0)},
      {"antialias", AttrKind::Int, AttrValue(int64_t{0})},
  };
  return {OpInfo{OpKind::Resize, op_name(OpKind::Resize), OpCategory::Movement,
                 FusionRole::Movement, 1, 1, attrs, infer_resize}};
}

ResizeSpec resize_spec(const Node& n) {
  const std::vector<AttrSpec>& attrs = op_info(OpKind::Resize).attrs;
  ResizeSpec s;
  s.linear = n.attr_str("mode") == "linear";
  const int c = enum_index(attrs[1], n.attr_str("coordinate_transformation_mode"));
  KILN_ASSERT(c >= 0 && c < 4, "resize {}: coordinate mode {}", n.name, c);
  s.coord = static_cast<ResizeCoord>(c);
  s.nearest = static_cast<ResizeNearest>(enum_index(attrs[2], n.attr_str("nearest_mode")));
  return s;
}

float resize_scale(const Node& n, size_t d, int64_t in, int64_t out) {
  const std::vector<double>& scales = n.attr_floats("scales");
  if (!scales.empty()) return static_cast<float>(scales[d]);
  return static_cast<float>(out) / static_cast<float>(in);
}

// The arithmetic (and its order) is that of the CUDA expressions in codegen/copy_source.cpp.
float resize_source(ResizeCoord c, int64_t o, float scale, int64_t in, int64_t out) {
  const float x = static_cast<float>(o);
  switch (c) {
    case ResizeCoord::HalfPixel:
      return (x + 0.5f) / scale - 0.5f;
    case ResizeCoord::PytorchHalfPixel:
      return out > 1 ? (x + 0.5f) / scale - 0.5f : 0.0f;
    case ResizeCoord::AlignCorners:
      return out > 1 ? x * static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
    case ResizeCoord::Asymmetric:
      return x / scale;
  }
  return 0.0f;
}

int64_t resize_nearest_index(ResizeNearest r, float x, int64_t in) {
  float v = 0.0f;
  switch (r) {
    case ResizeNearest::PreferFloor:  // ties (k + 0.5) to k, else the nearest
      v = std::ceil(x - 0.5f);
      break;
    case ResizeNearest::PreferCeil:
      v = std::floor(x + 0.5f);
      break;
    case ResizeNearest::Floor:
      v = std::floor(x);
      break;
    case ResizeNearest::Ceil:
      v = std::ceil(x);
      break;
  }
  // Clamped as a float first: a far coordinate never overflows the integer conversion.
  v = std::fmin(std::fmax(v, 0.0f), static_cast<float>(in - 1));
  return static_cast<int64_t>(v);
}

ResizeTap resize_linear_tap(float x, int64_t in) {
  const float c = std::fmin(std::fmax(x, 0.0f), static_cast<float>(in - 1));
  ResizeTap t;
  t.i0 = static_cast<int64_t>(c);
  t.i1 = t.i0 + 1 < in ? t.i0 + 1 : in - 1;
  t.w1 = c - static_cast<float>(t.i0);
  return t;
}

}  // namespace kiln
