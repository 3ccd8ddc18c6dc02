// One row per op: name, category, fusion role, arity, attributes, shape inference, pointwise math.
#include "engine/ir/op_table.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "engine/base/check.hpp"
#include "engine/ir/attention_ops.hpp"
#include "engine/ir/gather_ops.hpp"
#include "engine/ir/index_ops.hpp"
#include "engine/ir/movement_ops.hpp"
#include "engine/ir/resize_op.hpp"

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
using Ints = std::vector<int64_t>;

// ---------------------------------------------------------------- helpers for inference

Layout out_layout(const TensorDesc& d) {
  return d.layout == Layout::Strided ? Layout::NCHW : d.layout;
}

// The two operands of a contraction must share a dtype (the tensor-core paths read both as
// one type); everywhere else mixed dtypes are fine: math is f32 or wider and, as the format says,
// the output takes the first input's dtype.
void require_same_operand_dtype(const InferArgs& a) {
  KILN_CHECK(in(a, 1).dtype == in(a, 0).dtype,
             "{}: dtype mismatch: input 1 ('{}') is {} but input 0 ('{}') is {}; the two operands "
             "of a contraction must have one dtype (insert a cast)",
             a.where, in_name(a, 1), dtype_name(in(a, 1).dtype), in_name(a, 0),
             dtype_name(in(a, 0).dtype));
}

void require_rank(const InferArgs& a, size_t i, int lo, int hi, const char* what) {
  int r = in(a, i).rank();
  KILN_CHECK(r >= lo && r <= hi, "{}: input {} ('{}') must be {} (rank {}{}), found {}", a.where, i,
             in_name(a, i), what, lo, hi != lo ? fmt::format("..{}", hi) : "", in(a, i).str());
}

int64_t norm_axis(const InferArgs& a, int64_t axis, int rank, const char* attr) {
  KILN_CHECK(axis >= -rank && axis < rank, "{}.{}: axis {} out of range for rank {}", a.where, attr,
             axis, rank);
  return axis < 0 ? axis + rank : axis;
}

// A per-channel parameter input (shape [C]) where C is `c`.
void require_vec(const InferArgs& a, size_t i, const Dim& c, const char* what) {
  const TensorDesc& d = in(a, i);
  KILN_CHECK(d.rank() == 1 && d.shape[0] == c,
             "{}: input {} ('{}', {}) must have shape [{}], found {}", a.where, i, in_name(a, i),
             what, c.str(), shape_str(d.shape));
}

void require_shape(const InferArgs& a, size_t i, const Shape& s, const char* what) {
  KILN_CHECK(in(a, i).shape == s, "{}: input {} ('{}', {}) must have shape {}, found {}", a.where,
             i, in_name(a, i), what, shape_str(s), shape_str(in(a, i).shape));
}

void require_static(const InferArgs& a, const Dim& d, const char* what) {
  KILN_CHECK(d.is_static(), "{}: {} must be a static size, found symbolic '{}'", a.where, what,
             d.str());
}

TensorDesc like(const TensorDesc& d, Shape shape, Layout layout) {
  TensorDesc o;
  o.dtype = d.dtype;
  o.shape = std::move(shape);
  o.layout = (layout == Layout::NHWC && o.shape.size() != 4) ? Layout::NCHW : layout;
  return o;
}

// [top, left, bottom, right] from [ph, pw] or 4 values.
std::array<int64_t, 4> padding4(const InferArgs& a, const Ints& p) {
  KILN_CHECK(p.size() == 2 || p.size() == 4,
             "{}.padding: expected 2 or 4 non-negative integers, found {} values", a.where,
             p.size());
  for (int64_t v : p)
    KILN_CHECK(v >= 0, "{}.padding: expected non-negative integers, found {}", a.where, v);
  if (p.size() == 2) return {p[0], p[1], p[0], p[1]};
  return {p[0], p[1], p[2], p[3]};
}

Ints pair_attr(const InferArgs& a, const char* name, int64_t min_value) {
  const Ints& v = a.node.attr_ints(name);
  KILN_CHECK(v.size() == 2, "{}.{}: expected 2 integers, found {} values", a.where, name, v.size());
  for (int64_t x : v)
    KILN_CHECK(x >= min_value, "{}.{}: expected integers >= {}, found {}", a.where, name, min_value,
               x);
  return v;
}

// out = (in + pads - dil*(k-1) - 1) / stride + 1, checked positive when static.
Dim window_out(const InferArgs& a, const Dim& size, int64_t pad_total, int64_t k, int64_t stride,
               int64_t dil, const char* axis) {
  int64_t span = dil * (k - 1) + 1;
  Dim out = (size + Dim(pad_total - span)) / Dim(stride) + Dim(1);
  if (size.is_static())
    KILN_CHECK(size.value() + pad_total >= span,
               "{}: window of {} (kernel {}, dilation {}) does not fit input {} {} with padding {}",
               a.where, span, k, dil, axis, size.value(), pad_total);
  return out;
}

// ---------------------------------------------------------------- inference per op
std::vector<TensorDesc> infer_unary(const InferArgs& a) {
  TensorDesc o = like(in(a, 0), in(a, 0).shape, out_layout(in(a, 0)));
  if (a.node.op == OpKind::Cast) parse_dtype(a.node.attr_str("dtype"), &o.dtype);
  if (a.node.op == OpKind::Clamp)
    KILN_CHECK(a.node.attr_float("min") <= a.node.attr_float("max"),
               "{}.min: min {} is greater than max {}", a.where, a.node.attr_float("min"),
               a.node.attr_float("max"));
  return {o};
}

// Floating operands: the first one's dtype (as the format has it); integer operands: i64 when
// either is i64, else i32 (exact either way).
std::vector<TensorDesc> infer_binary(const InferArgs& a) {
  Shape s = broadcast_shapes(in(a, 0).shape, in(a, 1).shape, a.where);
  Layout l = Layout::NCHW;
  if (s == in(a, 0).shape)
    l = out_layout(in(a, 0));
  else if (s == in(a, 1).shape)
    l = out_layout(in(a, 1));
  TensorDesc o = like(in(a, 0), s, l);
  if (is_integer(o.dtype) && in(a, 1).dtype == DType::I64) o.dtype = DType::I64;
  return {o};
}

// Comparisons and logical ops: broadcast like binary ops, a bool result.
std::vector<TensorDesc> infer_to_bool(const InferArgs& a) {
  std::vector<TensorDesc> o =
      a.in.size() == 1
          ? std::vector<TensorDesc>{like(in(a, 0), in(a, 0).shape, out_layout(in(a, 0)))}
          : infer_binary(a);
  o[0].dtype = DType::Bool;
  return o;
}

// where(cond, x, y): cond bool, x and y one dtype (the result's), numpy broadcast of all three.
std::vector<TensorDesc> infer_where(const InferArgs& a) {
  KILN_CHECK(in(a, 0).dtype == DType::Bool,
             "{}.inputs[0]: where takes a bool condition, got {} '{}'", a.where,
             dtype_name(in(a, 0).dtype), in_name(a, 0));
  KILN_CHECK(
      in(a, 2).dtype == in(a, 1).dtype,
      "{}.inputs[2]: where's values must have one dtype: '{}' is {} but '{}' is {} (insert a "
      "cast)",
      a.where, in_name(a, 2), dtype_name(in(a, 2).dtype), in_name(a, 1),
      dtype_name(in(a, 1).dtype));
  Shape s = broadcast_shapes(broadcast_shapes(in(a, 0).shape, in(a, 1).shape, a.where),
                             in(a, 2).shape, a.where);
  Layout l = Layout::NCHW;
  for (size_t i : {size_t{1}, size_t{2}, size_t{0}})
    if (l == Layout::NCHW && s == in(a, i).shape) l = out_layout(in(a, i));
  return {like(in(a, 1), s, l)};
}

std::vector<TensorDesc> infer_conv2d(const InferArgs& a) {
  require_same_operand_dtype(a);
  require_rank(a, 0, 4, 4, "an activation [N, C, H, W]");
  require_rank(a, 1, 4, 4, "a filter [K, C/groups, R, S]");
  const Shape& x = in(a, 0).shape;
  const Shape& w = in(a, 1).shape;
  for (int i = 0; i < 4; ++i) require_static(a, w[i], "every filter dim");
  require_static(a, x[1], "the input channel count C");
  int64_t groups = a.node.attr_int("groups");
  KILN_CHECK(groups >= 1, "{}.groups: expected a positive integer, found {}", a.where, groups);
  int64_t c = x[1].value(), k = w[0].value(), cg = w[1].value();
  KILN_CHECK(c % groups == 0, "{}.groups: groups {} does not divide the {} input channels", a.where,
             groups, c);
  KILN_CHECK(k % groups == 0, "{}.groups: groups {} does not divide the {} output channels",
             a.where, groups, k);
  KILN_CHECK(cg * groups == c,
             "{}: filter '{}' has {} channels per group but input '{}' has {} channels / {} groups "
             "= {}",
             a.where, in_name(a, 1), cg, in_name(a, 0), c, groups, c / groups);
  if (a.in.size() == 3) require_vec(a, 2, w[0], "bias");
  Ints stride = pair_attr(a, "stride", 1), dil = pair_attr(a, "dilation", 1);
  auto pad = padding4(a, a.node.attr_ints("padding"));
  Dim oh = window_out(a, x[2], pad[0] + pad[2], w[2].value(), stride[0], dil[0], "height");
  Dim ow = window_out(a, x[3], pad[1] + pad[3], w[3].value(), stride[1], dil[1], "width");
  return {like(in(a, 0), {x[0], w[0], oh, ow}, out_layout(in(a, 0)))};
}

// conv_transpose2d (ONNX ConvTranspose): x [N, C, H, W], w [C, K/groups, R, S], bias [K];
// out = (in - 1) * stride - pad_begin - pad_end + dilation * (k - 1) + output_padding + 1.
Dim transposed_out(const InferArgs& a, const Dim& size, int64_t pad_total, int64_t k,
                   int64_t stride, int64_t dil, int64_t out_pad, const char* axis) {
  const int64_t extra = dil * (k - 1) + out_pad + 1 - pad_total;
  if (size.is_static())
    KILN_CHECK((size.value() - 1) * stride + extra >= 1,
               "{}: the output {} is {} (input {}, stride {}, kernel {}, dilation {}, padding {}, "
               "output_padding {}): the padding crops more than the output has",
               a.where, axis, (size.value() - 1) * stride + extra, size.value(), stride, k, dil,
               pad_total, out_pad);
  return (size - Dim(1)) * Dim(stride) + Dim(extra);
}

std::vector<TensorDesc> infer_conv_transpose2d(const InferArgs& a) {
  require_same_operand_dtype(a);
  require_rank(a, 0, 4, 4, "an activation [N, C, H, W]");
  require_rank(a, 1, 4, 4, "a filter [C, K/groups, R, S]");
  const Shape& x = in(a, 0).shape;
  const Shape& w = in(a, 1).shape;
  for (int i = 0; i < 4; ++i) require_static(a, w[i], "every filter dim");
  require_static(a, x[1], "the input channel count C");
  int64_t groups = a.node.attr_int("groups");
  KILN_CHECK(groups >= 1, "{}.groups: expected a positive integer, found {}", a.where, groups);
  int64_t c = x[1].value(), wc = w[0].value(), kg = w[1].value();
  KILN_CHECK(c % groups == 0, "{}.groups: groups {} does not divide the {} input channels", a.where,
             groups, c);
  KILN_CHECK(wc == c,
             "{}: filter '{}' {} has {} input channels (dim 0) but input '{}' has {} channels",
             a.where, in_name(a, 1), shape_str(w), wc, in_name(a, 0), c);
  const Dim k(kg * groups);
  if (a.in.size() == 3) require_vec(a, 2, k, "bias");
  Ints stride = pair_attr(a, "stride", 1), dil = pair_attr(a, "dilation", 1);
  Ints out_pad = pair_attr(a, "output_padding", 0);
  for (int i = 0; i < 2; ++i)
    KILN_CHECK(out_pad[i] < stride[i] || out_pad[i] < dil[i],
               "{}.output_padding: {} (axis {}) must be smaller than the stride {} or the "
               "dilation {}",
               a.where, out_pad[i], i, stride[i], dil[i]);
  auto pad = padding4(a, a.node.attr_ints("padding"));
  Dim oh = transposed_out(a, x[2], pad[0] + pad[2], w[2].value(), stride[0], dil[0], out_pad[0],
                          "height");
  Dim ow = transposed_out(a, x[3], pad[1] + pad[3], w[3].value(), stride[1], dil[1], out_pad[1],
                          "width");
  return {like(in(a, 0), {x[0], k, oh, ow}, out_layout(in(a, 0)))};
}

std::vector<TensorDesc> infer_matmul(const InferArgs& a) {
  require_same_operand_dtype(a);
  require_rank(a, 0, 2, 8, "a matrix [..., M, K]");
  require_rank(a, 1, 2, 8, "a matrix [..., K, N]");
  Shape sa = in(a, 0).shape, sb = in(a, 1).shape;
  bool ta = a.node.attr_int("transpose_a") != 0, tb = a.node.attr_int("transpose_b") != 0;
  size_t ra = sa.size(), rb = sb.size();
  Dim m = ta ? sa[ra - 1] : sa[ra - 2], ka = ta ? sa[ra - 2] : sa[ra - 1];
  Dim kb = tb ? sb[rb - 1] : sb[rb - 2], n = tb ? sb[rb - 2] : sb[rb - 1];
  KILN_CHECK(ka == kb, "{}: inner dims differ: '{}' gives K={} but '{}' gives K={}", a.where,
             in_name(a, 0), ka.str(), in_name(a, 1), kb.str());
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  Shape out = broadcast_shapes(ba, bb, a.where + " (batch dims)");
  out.push_back(m);
  out.push_back(n);
  if (a.in.size() == 3) require_vec(a, 2, n, "bias");
  return {like(in(a, 0), out, Layout::NCHW)};
}

std::vector<TensorDesc> infer_batchnorm(const InferArgs& a) {
  require_rank(a, 0, 2, 8, "an activation [N, C, ...]");
  const char* names[] = {"", "scale", "bias", "mean", "var"};
  for (size_t i = 1; i < 5; ++i) require_vec(a, i, in(a, 0).shape[1], names[i]);
  KILN_CHECK(a.node.attr_float("eps") >= 0, "{}.eps: expected >= 0, found {}", a.where,
             a.node.attr_float("eps"));
  return {like(in(a, 0), in(a, 0).shape, out_layout(in(a, 0)))};
}

// layernorm / rmsnorm: normalize over dims [axis, rank); scale/bias have that trailing shape.
std::vector<TensorDesc> infer_lastdims_norm(const InferArgs& a) {
  require_rank(a, 0, 1, 8, "a tensor");
  int r = in(a, 0).rank();
  int64_t axis = norm_axis(a, a.node.attr_int("axis"), r, "axis");
  Shape tail(in(a, 0).shape.begin() + axis, in(a, 0).shape.end());
  for (size_t i = 1; i < a.in.size(); ++i) require_shape(a, i, tail, i == 1 ? "scale" : "bias");
  KILN_CHECK(a.node.attr_float("eps") >= 0, "{}.eps: expected >= 0, found {}", a.where,
             a.node.attr_float("eps"));
  return {like(in(a, 0), in(a, 0).shape, out_layout(in(a, 0)))};
}

// groupnorm / instancenorm: statistics per (n, group) over channels of the group and all spatial.
std::vector<TensorDesc> infer_channel_norm(const InferArgs& a) {
  require_rank(a, 0, 3, 8, "an activation [N, C, ...]");
  const Dim& c = in(a, 0).shape[1];
  require_static(a, c, "the channel count C");
  if (a.node.op == OpKind::Groupnorm) {
    int64_t g = a.node.attr_int("groups");
    KILN_CHECK(g >= 1 && c.value() % g == 0,
               "{}.groups: expected a positive divisor of the {} channels, found {}", a.where,
               c.value(), g);
  }
  for (size_t i = 1; i < a.in.size(); ++i) require_vec(a, i, c, i == 1 ? "scale" : "bias");
  KILN_CHECK(a.node.attr_float("eps") >= 0, "{}.eps: expected >= 0, found {}", a.where,
             a.node.attr_float("eps"));
  return {like(in(a, 0), in(a, 0).shape, out_layout(in(a, 0)))};
}

std::vector<TensorDesc> infer_softmax(const InferArgs& a) {
  require_rank(a, 0, 1, 8, "a tensor");
  norm_axis(a, a.node.attr_int("axis"), in(a, 0).rank(), "axis");
  return {like(in(a, 0), in(a, 0).shape, out_layout(in(a, 0)))};
}

std::vector<TensorDesc> infer_reduce(const InferArgs& a) {
  int r = in(a, 0).rank();
  std::vector<bool> reduced(r, false);
  const Ints& axes = a.node.attr_ints("axes");
  for (int64_t ax : axes) {
    int64_t n = norm_axis(a, ax, r, "axes");
    KILN_CHECK(!reduced[n], "{}.axes: axis {} listed twice", a.where, ax);
    reduced[n] = true;
  }
  if (axes.empty()) reduced.assign(r, true);
  bool keep = a.node.attr_int("keepdims") != 0;
  Shape out;
  for (int i = 0; i < r; ++i) {
    if (!reduced[i])
      out.push_back(in(a, 0).shape[i]);
    else if (keep)
      out.push_back(Dim(1));
  }
  return {like(in(a, 0), out, keep ? out_layout(in(a, 0)) : Layout::NCHW)};
}

std::vector<TensorDesc> infer_pool(const InferArgs& a) {
  require_rank(a, 0, 4, 4, "an activation [N, C, H, W]");
  Ints k = pair_attr(a, "kernel", 1);
  Ints s = a.node.attr_ints("stride");
  if (s.empty()) s = k;
  KILN_CHECK(s.size() == 2 && s[0] >= 1 && s[1] >= 1,
             "{}.stride: expected 2 positive integers (or [] for the kernel size)", a.where);
  auto pad = padding4(a, a.node.attr_ints("padding"));
  KILN_CHECK(pad[0] < k[0] && pad[2] < k[0] && pad[1] < k[1] && pad[3] < k[1],
             "{}.padding: padding must be smaller than the kernel", a.where);
  const Shape& x = in(a, 0).shape;
  Dim oh = window_out(a, x[2], pad[0] + pad[2], k[0], s[0], 1, "height");
  Dim ow = window_out(a, x[3], pad[1] + pad[3], k[1], s[1], 1, "width");
  return {like(in(a, 0), {x[0], x[1], oh, ow}, out_layout(in(a, 0)))};
}

std::vector<TensorDesc> infer_global_pool(const InferArgs& a) {
  require_rank(a, 0, 3, 8, "an activation [N, C, ...]");
  Shape out = in(a, 0).shape;
  for (size_t i = 2; i < out.size(); ++i) out[i] = Dim(1);
  return {like(in(a, 0), out, out_layout(in(a, 0)))};
}

std::vector<TensorDesc> infer_reshape(const InferArgs& a) {
  const Shape& x = in(a, 0).shape;
  Shape out = a.node.attr_dims("shape");
  int infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].is_static()) continue;
    int64_t v = out[i].value();
    if (v == -1) {
      KILN_CHECK(infer_at < 0, "{}.shape: more than one -1", a.where);
      infer_at = static_cast<int>(i);
    } else if (v == 0) {
      KILN_CHECK(i < x.size(), "{}.shape: 0 (copy) at position {} but the input has rank {}",
                 a.where, i, x.size());
      out[i] = x[i];
    } else {
      KILN_CHECK(v > 0, "{}.shape: expected positive sizes, -1 or 0, found {}", a.where, v);
    }
  }
  // Element counts in the dims' canonical form, so sizes check and infer through symbols
  // ([N, 64, 56, 56] -> [N, -1]; [N*S, 64] -> [N, S, 64]).
  Shape known;
  for (size_t i = 0; i < out.size(); ++i)
    if (static_cast<int>(i) != infer_at) known.push_back(out[i]);
  const Dim n_in = shape_numel(x), n_known = shape_numel(known);
  auto mismatch = [&] {
    return fmt::format("{}.shape: cannot reshape {} ({} elements) to {}", a.where, shape_str(x),
                       n_in.str(), shape_str(a.node.attr_dims("shape")));
  };
  if (infer_at >= 0) {
    KILN_CHECK(!n_known.is_static() || n_known.value() > 0, "{}", mismatch());
    const Dim d = n_in / n_known;  // exact only where the product checks
    KILN_CHECK(d * n_known == n_in, "{}", mismatch());
    out[infer_at] = d;
  } else {
    KILN_CHECK(n_in == n_known, "{}", mismatch());
  }
  return {like(in(a, 0), out, Layout::NCHW)};
}

std::vector<TensorDesc> infer_transpose(const InferArgs& a) {
  const Shape& x = in(a, 0).shape;
  const Ints& perm = a.node.attr_ints("perm");
  KILN_CHECK(perm.size() == x.size(), "{}.perm: expected {} entries for rank {}, found {}", a.where,
             x.size(), x.size(), perm.size());
  std::vector<bool> seen(x.size(), false);
  Shape out;
  for (int64_t p : perm) {
    KILN_CHECK(p >= 0 && p < static_cast<int64_t>(x.size()) && !seen[p],
               "{}.perm: expected a permutation of 0..{}, found {}", a.where, x.size() - 1, p);
    seen[p] = true;
    out.push_back(x[p]);
  }
  return {like(in(a, 0), out, Layout::NCHW)};
}

// pads = [before_0, ..., before_{r-1}, after_0, ..., after_{r-1}] (ONNX's order, and conv's
// [top, left, bottom, right]); every dim grows by its two amounts.
std::vector<TensorDesc> infer_pad(const InferArgs& a) {
  require_rank(a, 0, 1, 8, "a tensor");
  const Shape& x = in(a, 0).shape;
  const Ints& pads = a.node.attr_ints("pads");
  const size_t r = x.size();
  KILN_CHECK(pads.size() == 2 * r,
             "{}.pads: expected 2 x rank = {} integers [before_0..before_{}, after_0..after_{}] "
             "for input '{}' {}, found {} values",
             a.where, 2 * r, r - 1, r - 1, in_name(a, 0), shape_str(x), pads.size());
  for (size_t i = 0; i < pads.size(); ++i)
    KILN_CHECK(pads[i] >= 0 && pads[i] <= std::numeric_limits<int32_t>::max(),
               "{}.pads[{}]: expected an integer in 0..2147483647 (pad never crops), found {}",
               a.where, i, pads[i]);
  // Reflect mirrors without repeating the edge: one reflection needs pads <= dim - 1 (ONNX).
  if (a.node.attr_str("mode") == "reflect")
    for (size_t d = 0; d < r; ++d) {
      if (pads[d] + pads[r + d] == 0) continue;
      require_static(a, x[d], "a reflect-padded dim");
      KILN_CHECK(std::max(pads[d], pads[r + d]) < x[d].value(),
                 "{}.pads: reflect pads of dim {} ({} before, {} after) must be smaller than its "
                 "size {}",
                 a.where, d, pads[d], pads[r + d], x[d].value());
    }
  Shape out = x;
  for (size_t d = 0; d < r; ++d)
    if (pads[d] + pads[r + d] > 0) out[d] = x[d] + Dim(pads[d] + pads[r + d]);
  return {like(in(a, 0), out, out_layout(in(a, 0)))};
}

// PRelu (ONNX): the slope broadcasts to the input, never the input to the slope.
std::vector<TensorDesc> infer_prelu(const InferArgs& a) {
  const Shape& x = in(a, 0).shape;
  const Shape& s = in(a, 1).shape;
  bool ok = s.size() <= x.size();
  for (size_t i = 0; ok && i < s.size(); ++i) {
    const Dim& sd = s[s.size() - 1 - i];
    ok = sd == x[x.size() - 1 - i] || (sd.is_static() && sd.value() == 1);
  }
  KILN_CHECK(ok,
             "{}: slope '{}' {} does not broadcast to input '{}' {} (the slope broadcasts to the "
             "input's shape, numpy-style from the right; a per-channel slope of [N, C, H, W] is "
             "[C, 1, 1])",
             a.where, in_name(a, 1), shape_str(s), in_name(a, 0), shape_str(x));
  return {like(in(a, 0), x, out_layout(in(a, 0)))};
}

// cumsum: a running sum along one axis, the input's shape.
std::vector<TensorDesc> infer_cumsum(const InferArgs& a) {
  require_rank(a, 0, 1, 8, "a tensor");
  norm_axis(a, a.node.attr_int("axis"), in(a, 0).rank(), "axis");
  for (const char* flag : {"exclusive", "reverse"})
    KILN_CHECK(a.node.attr_int(flag) == 0 || a.node.attr_int(flag) == 1,
               "{}.{}: expected 0 or 1, found {}", a.where, flag, a.node.attr_int(flag));
  return {like(in(a, 0), in(a, 0).shape, out_layout(in(a, 0)))};
}

// ---------------------------------------------------------------- pointwise math
double gelu_ref(double x, bool tanh_approx) {
  if (tanh_approx) {
    const double k = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}
double sigmoid_ref(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
// x * tanh(softplus(x)); softplus is x past 20, where log1p(exp(x)) would overflow far out.
double mish_ref(double x) {
  return x * std::tanh(x > 20 ? x : std::log1p(std::exp(x)));
}

std::string call(const char* f, const std::vector<std::string>& x) {
  return fmt::format("{}({})", f, x[0]);
}
// Cast of a float value to the dtype of choice index `to` (f32|f16|bf16|i32|i64|bool): toward
// zero, saturating, NaN to 0 for the integers (the cvt.rzi forms); x != 0 for bool.
std::string cast_expr(const std::string& x, double to) {
  if (to == 1) return fmt::format("kiln_round_f16({})", x);
  if (to == 2) return fmt::format("kiln_round_bf16({})", x);
  if (to == 3) return fmt::format("__float2int_rz({})", x);
  if (to == 4) return fmt::format("__float2ll_rz({})", x);
  if (to == 5) return fmt::format("({} != 0.0f)", x);
  return x;
}
// Cast of an integer / bool value: int -> float rounds once to f32 (then to 16 bits), narrowing
// integers wrap, bool is x != 0.
std::string int_cast_expr(const std::string& x, double to) {
  if (to == 0) return fmt::format("static_cast<float>({})", x);
  if (to == 1) return fmt::format("kiln_round_f16(static_cast<float>({}))", x);
  if (to == 2) return fmt::format("kiln_round_bf16(static_cast<float>({}))", x);
  if (to == 3) return fmt::format("static_cast<int>({})", x);
  if (to == 4) return fmt::format("static_cast<long long>({})", x);
  return fmt::format("({} != 0)", x);
}

// Two's complement wrapping integer math (no signed overflow), as the kernels' kiln_i* helpers
// (codegen/device/kiln_prelude.cuh) compute it. i32 results wrap when stored.
int64_t wadd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wsub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t wmul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
int64_t wneg(int64_t a) {
  return static_cast<int64_t>(uint64_t{0} - static_cast<uint64_t>(a));
}
// Truncating division (C, ONNX Div); x / 0 is 0 (numpy's answer; ONNX leaves it undefined) and
// MIN / -1 wraps to MIN.
int64_t idiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wneg(a);
  return a / b;
}
// ONNX Mod: fmod = 0 takes the divisor's sign (Python), fmod = 1 the dividend's (C); x mod 0 is 0.
int64_t imod(int64_t a, int64_t b, bool fmod) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
double fmod_ref(double a, double b, bool fmod) {
  double r = std::fmod(a, b);
  if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
std::string call2(const char* f, const std::vector<std::string>& x) {
  return fmt::format("{}({}, {})", f, x[0], x[1]);
}
std::string infix(const std::vector<std::string>& x, const char* op) {
  return fmt::format("({} {} {})", x[0], op, x[1]);
}

#define CUDA_FN(cuda_expr)                                                \
  [](const std::vector<std::string>& x, const double* p) -> std::string { \
    (void)p;                                                              \
    return cuda_expr;                                                     \
  }
#define REF_FN(ref_expr)                           \
  [](const double* x, const double* p) -> double { \
    (void)p;                                       \
    return ref_expr;                               \
  }
#define IREF_FN(ref_expr)                            \
  [](const int64_t* x, const double* p) -> int64_t { \
    (void)p;                                         \
    return ref_expr;                                 \
  }
#define ICUDA_FN(cuda_expr)                                                                     \
  [](const std::vector<std::string>& x, const double* p, const std::string& T) -> std::string { \
    (void)p;                                                                                    \
    (void)T;                                                                                    \
    return cuda_expr;                                                                           \
  }
// A row that also takes integer / bool operands: its dtype class and integer math.
#define INTS(row, cls, iref_expr, icuda_expr) \
  with_ints(row, DTypeClass::cls, IREF_FN(iref_expr), ICUDA_FN(icuda_expr))
#define UNARY(E, n, ref_expr, cuda_expr, ...)                                           \
  OpInfo {                                                                              \
    OpKind::E, #n, OpCategory::Pointwise, FusionRole::Elementwise, 1, 1, {__VA_ARGS__}, \
        infer_unary, REF_FN(ref_expr), CUDA_FN(cuda_expr)                               \
  }
// A unary op with a fast form for 16-bit results (OpInfo::fast16).
#define UNARY16(E, n, ref_expr, cuda_expr, fast16_expr, ...)                            \
  OpInfo {                                                                              \
    OpKind::E, #n, OpCategory::Pointwise, FusionRole::Elementwise, 1, 1, {__VA_ARGS__}, \
        infer_unary, REF_FN(ref_expr), CUDA_FN(cuda_expr), CUDA_FN(fast16_expr)         \
  }
#define BINARY(E, n, ref_expr, cuda_expr)                                                  \
  OpInfo {                                                                                 \
    OpKind::E, #n, OpCategory::Pointwise, FusionRole::Elementwise, 2, 2, {}, infer_binary, \
        REF_FN(ref_expr), CUDA_FN(cuda_expr)                                               \
  }

OpInfo with_ints(OpInfo row, DTypeClass c, IntRefFn iref, IntCudaFn icuda) {
  row.dtypes = c;
  row.iref = iref;
  row.icuda = icuda;
  return row;
}

AttrSpec f_attr(const char* n, double d) {
  return {n, AttrKind::Float, AttrValue(d)};
}
AttrSpec i_attr(const char* n, int64_t d) {
  return {n, AttrKind::Int, AttrValue(d)};
}
AttrSpec ints_attr(const char* n, Ints d) {
  return {n, AttrKind::Ints, AttrValue(std::move(d))};
}
AttrSpec req_ints(const char* n) {
  return {n, AttrKind::Ints, std::nullopt};
}

// The pointwise ops' rows: unary, then binary.
std::vector<OpInfo> pointwise_rows() {
  using F = std::string;
  return {
      // clang-format off
      UNARY(Relu, relu, std::max(x[0], 0.0), F("fmaxf(" + x[0] + ", 0.0f)")),
      UNARY(LeakyRelu, leaky_relu, x[0] > 0 ? x[0] : p[0] * x[0],
            fmt::format("({0} > 0.0f ? {0} : {1} * {0})", x[0], cuda_float(p[0])),
            f_attr("alpha", 0.01)),
      UNARY(Elu, elu, x[0] > 0 ? x[0] : p[0] * std::expm1(x[0]),
            fmt::format("({0} > 0.0f ? {0} : {1} * expm1f({0}))", x[0], cuda_float(p[0])),
            f_attr("alpha", 1.0)),
      UNARY16(Gelu, gelu, gelu_ref(x[0], p[0] != 0),
              call(p[0] != 0 ? "kiln_gelu_tanh" : "kiln_gelu_erf", x),
              call(p[0] != 0 ? "kiln_gelu_tanh_fast" : "kiln_gelu_erf_fast", x),
              AttrSpec{"approximate", AttrKind::Enum, AttrValue(std::string("none")), "none|tanh"}),
      UNARY16(Silu, silu, x[0] * sigmoid_ref(x[0]), call("kiln_silu", x),
              call("kiln_silu_fast", x)),
      UNARY16(Sigmoid, sigmoid, sigmoid_ref(x[0]), call("kiln_sigmoid", x),
              call("kiln_sigmoid_fast", x)),
      UNARY(Tanh, tanh, std::tanh(x[0]), call("tanhf", x)),
      UNARY(Softplus, softplus, x[0] > 20 ? x[0] : std::log1p(std::exp(x[0])),
            call("kiln_softplus", x)),
      UNARY(Clamp, clamp, std::min(std::max(x[0], p[0]), p[1]),
            fmt::format("fminf(fmaxf({}, {}), {})", x[0], cuda_float(p[0]), cuda_float(p[1])),
            f_attr("min", -kInf), f_attr("max", kInf)),
      UNARY(Exp, exp, std::exp(x[0]), call("expf", x)),
      UNARY(Log, log, std::log(x[0]), call("logf", x)),
      UNARY(Sqrt, sqrt, std::sqrt(x[0]), call("sqrtf", x)),
      UNARY(Rsqrt, rsqrt, 1.0 / std::sqrt(x[0]), call("rsqrtf", x)),
      INTS(UNARY(Abs, abs, std::fabs(x[0]), call("fabsf", x)), Numeric,
           x[0] < 0 ? wneg(x[0]) : x[0], F("kiln_iabs(" + x[0] + ")")),
      INTS(UNARY(Neg, neg, -x[0], F("(-" + x[0] + ")")), Numeric, wneg(x[0]),
           F("kiln_ineg(" + x[0] + ")")),
      UNARY(Reciprocal, reciprocal, 1.0 / x[0], F("(1.0f / " + x[0] + ")")),
      UNARY(Erf, erf, std::erf(x[0]), call("erff", x)),
      INTS(UNARY(Identity, identity, x[0], x[0]), Any, x[0], x[0]),
      // Rounding through the narrower storage type, as storing and reloading would; the
      // conversion to the result's dtype (toward zero, saturating, NaN to 0; bool x != 0) is
      // the reference executor's, as for every integer result.
      INTS(UNARY(Cast, cast, x[0], cast_expr(x[0], p[0]),
                 AttrSpec{"dtype", AttrKind::Enum, std::nullopt, "f32|f16|bf16|i32|i64|bool"}),
           Any, x[0], int_cast_expr(x[0], p[0])),
      // ONNX HardSwish, x * relu6(x + 3) / 6: a division, so that f32 is exact at x = 3.
      UNARY(HardSwish, hardswish, x[0] * std::min(std::max(x[0] + 3.0, 0.0), 6.0) / 6.0,
            fmt::format("({0} * fminf(fmaxf({0} + 3.0f, 0.0f), 6.0f) / 6.0f)", x[0])),
      // ONNX HardSigmoid's defaults (PyTorch's hardsigmoid is alpha = 1/6).
      UNARY(HardSigmoid, hardsigmoid, std::min(std::max(p[0] * x[0] + p[1], 0.0), 1.0),
            fmt::format("fminf(fmaxf({} * {} + {}, 0.0f), 1.0f)", cuda_float(p[0]), x[0],
                        cuda_float(p[1])),
            f_attr("alpha", 0.2), f_attr("beta", 0.5)),
      UNARY(Mish, mish, mish_ref(x[0]), call("kiln_mish", x)),
      UNARY(Sin, sin, std::sin(x[0]), call("sinf", x)),
      UNARY(Cos, cos, std::cos(x[0]), call("cosf", x)),
      INTS(BINARY(Add, add, x[0] + x[1], F("(" + x[0] + " + " + x[1] + ")")), Numeric,
           wadd(x[0], x[1]), call2("kiln_iadd", x)),
      INTS(BINARY(Sub, sub, x[0] - x[1], F("(" + x[0] + " - " + x[1] + ")")), Numeric,
           wsub(x[0], x[1]), call2("kiln_isub", x)),
      INTS(BINARY(Mul, mul, x[0] * x[1], F("(" + x[0] + " * " + x[1] + ")")), Numeric,
           wmul(x[0], x[1]), call2("kiln_imul", x)),
      INTS(BINARY(Div, div, x[0] / x[1], F("(" + x[0] + " / " + x[1] + ")")), Numeric,
           idiv(x[0], x[1]), call2("kiln_idiv", x)),
      INTS(BINARY(Max, max, std::max(x[0], x[1]), F("fmaxf(" + x[0] + ", " + x[1] + ")")),
           Numeric, std::max(x[0], x[1]), call2("kiln_imax", x)),
      INTS(BINARY(Min, min, std::min(x[0], x[1]), F("fminf(" + x[0] + ", " + x[1] + ")")),
           Numeric, std::min(x[0], x[1]), call2("kiln_imin", x)),
      BINARY(Pow, pow, std::pow(x[0], x[1]), F("powf(" + x[0] + ", " + x[1] + ")")),
      // ONNX PRelu: x < 0 ? slope * x : x, the slope (input 1) broadcast to x.
      OpInfo{OpKind::Prelu, "prelu", OpCategory::Pointwise, FusionRole::Elementwise, 2, 2, {},
             infer_prelu, REF_FN(x[0] < 0 ? x[1] * x[0] : x[0]),
             CUDA_FN(fmt::format("({0} < 0.0f ? {1} * {0} : {0})", x[0], x[1]))},
      // clang-format on
  };
}

// Comparisons, logical ops, mod and where: integer / bool math, bool results.
#define COMPARE(E, n, cls, op)                       \
  with_ints(OpInfo{OpKind::E,                        \
                   #n,                               \
                   OpCategory::Pointwise,            \
                   FusionRole::Elementwise,          \
                   2,                                \
                   2,                                \
                   {},                               \
                   infer_to_bool,                    \
                   REF_FN(x[0] op x[1] ? 1.0 : 0.0), \
                   CUDA_FN(infix(x, #op))},          \
            DTypeClass::cls, IREF_FN(x[0] op x[1] ? 1 : 0), ICUDA_FN(infix(x, #op)))
#define LOGICAL(E, n, ref_expr, cuda_expr, arity) \
  with_ints(OpInfo{OpKind::E,                     \
                   #n,                            \
                   OpCategory::Pointwise,         \
                   FusionRole::Elementwise,       \
                   arity,                         \
                   arity,                         \
                   {},                            \
                   infer_to_bool,                 \
                   REF_FN(ref_expr ? 1.0 : 0.0),  \
                   CUDA_FN(cuda_expr)},           \
            DTypeClass::Bool, IREF_FN(ref_expr ? 1 : 0), ICUDA_FN(cuda_expr))
std::vector<OpInfo> int_bool_rows() {
  using F = std::string;
  OpInfo where{OpKind::Where,
               "where",
               OpCategory::Pointwise,
               FusionRole::Elementwise,
               3,
               3,
               {},
               infer_where,
               REF_FN(x[0] != 0 ? x[1] : x[2]),
               CUDA_FN(fmt::format("({} ? {} : {})", x[0], x[1], x[2]))};
  where = with_ints(where, DTypeClass::Any, IREF_FN(x[0] != 0 ? x[1] : x[2]),
                    ICUDA_FN(fmt::format("({} ? {} : {})", x[0], x[1], x[2])));
  where.select = true;
  return {
      // clang-format off
      INTS((OpInfo{OpKind::Mod, "mod", OpCategory::Pointwise, FusionRole::Elementwise, 2, 2,
                   {i_attr("fmod", 0)}, infer_binary, REF_FN(fmod_ref(x[0], x[1], p[0] != 0)),
                   CUDA_FN(call2(p[0] != 0 ? "fmodf" : "kiln_fmod_py", x))}),
           Numeric, imod(x[0], x[1], p[0] != 0), call2(p[0] != 0 ? "kiln_ifmod" : "kiln_imod", x)),
      COMPARE(Eq, eq, Any, ==),
      COMPARE(Ne, ne, Any, !=),
      COMPARE(Lt, lt, Numeric, <),
      COMPARE(Le, le, Numeric, <=),
      COMPARE(Gt, gt, Numeric, >),
      COMPARE(Ge, ge, Numeric, >=),
      LOGICAL(And, and, (x[0] != 0 && x[1] != 0), F("(" + x[0] + " && " + x[1] + ")"), 2),
      LOGICAL(Or, or, (x[0] != 0 || x[1] != 0), F("(" + x[0] + " || " + x[1] + ")"), 2),
      LOGICAL(Xor, xor, ((x[0] != 0) != (x[1] != 0)), F("(" + x[0] + " != " + x[1] + ")"), 2),
      LOGICAL(Not, not, (x[0] == 0), F("(!" + x[0] + ")"), 1),
      where,
      // clang-format on
  };
}
#undef COMPARE
#undef LOGICAL

// Contractions and normalizations.
std::vector<OpInfo> contraction_and_norm_rows() {
  return {
      {OpKind::Conv2d,
       "conv2d",
       OpCategory::Contraction,
       FusionRole::Anchor,
       2,
       3,
       {ints_attr("stride", {1, 1}), ints_attr("padding", {0, 0}), ints_attr("dilation", {1, 1}),
        i_attr("groups", 1)},
       infer_conv2d},
      // ONNX ConvTranspose (2-D): the gradient of conv2d with respect to its input.
      {OpKind::ConvTranspose2d,
       "conv_transpose2d",
       OpCategory::Contraction,
       FusionRole::Anchor,
       2,
       3,
       {ints_attr("stride", {1, 1}), ints_attr("padding", {0, 0}), ints_attr("dilation", {1, 1}),
        ints_attr("output_padding", {0, 0}), i_attr("groups", 1)},
       infer_conv_transpose2d},
      {OpKind::Matmul,
       "matmul",
       OpCategory::Contraction,
       FusionRole::Anchor,
       2,
       3,
       {i_attr("transpose_a", 0), i_attr("transpose_b", 0)},
       infer_matmul},
      // Inference batchnorm: a normalization without statistics, a per-channel affine
      // (x - mean) * rsqrt(var + eps) * scale + bias evaluated elementwise.
      {OpKind::Batchnorm,
       "batchnorm",
       OpCategory::Normalization,
       FusionRole::Elementwise,
       5,
       5,
       {f_attr("eps", 1e-5)},
       infer_batchnorm,
       nullptr,
       CUDA_FN(fmt::format("(({} - {}) * rsqrtf({} + {}) * {} + {})", x[0], x[3], x[4],
                           cuda_float(p[0]), x[1], x[2])),
       nullptr,
       true},
      {OpKind::Layernorm,
       "layernorm",
       OpCategory::Normalization,
       FusionRole::RowStatistics,
       1,
       3,
       {i_attr("axis", -1), f_attr("eps", 1e-5)},
       infer_lastdims_norm},
      {OpKind::Rmsnorm,
       "rmsnorm",
       OpCategory::Normalization,
       FusionRole::RowStatistics,
       1,
       2,
       {i_attr("axis", -1), f_attr("eps", 1e-6)},
       infer_lastdims_norm},
      {OpKind::Groupnorm,
       "groupnorm",
       OpCategory::Normalization,
       FusionRole::ChannelStatistics,
       1,
       3,
       {{"groups", AttrKind::Int, std::nullopt}, f_attr("eps", 1e-5)},
       infer_channel_norm},
      {OpKind::Instancenorm,
       "instancenorm",
       OpCategory::Normalization,
       FusionRole::ChannelStatistics,
       1,
       3,
       {f_attr("eps", 1e-5)},
       infer_channel_norm},
      {OpKind::Softmax,
       "softmax",
       OpCategory::Normalization,
       FusionRole::RowStatistics,
       1,
       1,
       {i_attr("axis", -1)},
       infer_softmax},
      // x - max - log(sum(exp(x - max))) along `axis`: softmax's statistics.
      {OpKind::LogSoftmax,
       "log_softmax",
       OpCategory::Normalization,
       FusionRole::RowStatistics,
       1,
       1,
       {i_attr("axis", -1)},
       infer_softmax},
  };
}

// Reductions, windows and movement.
std::vector<OpInfo> reduction_window_movement_rows() {
  return {
      {OpKind::ReduceSum,
       "reduce_sum",
       OpCategory::Reduction,
       FusionRole::Anchor,
       1,
       1,
       {ints_attr("axes", {}), i_attr("keepdims", 0)},
       infer_reduce},
      {OpKind::ReduceMean,
       "reduce_mean",
       OpCategory::Reduction,
       FusionRole::Anchor,
       1,
       1,
       {ints_attr("axes", {}), i_attr("keepdims", 0)},
       infer_reduce},
      {OpKind::ReduceMax,
       "reduce_max",
       OpCategory::Reduction,
       FusionRole::Anchor,
       1,
       1,
       {ints_attr("axes", {}), i_attr("keepdims", 0)},
       infer_reduce},
      {OpKind::ReduceMin,
       "reduce_min",
       OpCategory::Reduction,
       FusionRole::Anchor,
       1,
       1,
       {ints_attr("axes", {}), i_attr("keepdims", 0)},
       infer_reduce},
      {OpKind::Maxpool2d,
       "maxpool2d",
       OpCategory::Window,
       FusionRole::Anchor,
       1,
       1,
       {req_ints("kernel"), ints_attr("stride", {}), ints_attr("padding", {0, 0})},
       infer_pool},
      {OpKind::Avgpool2d,
       "avgpool2d",
       OpCategory::Window,
       FusionRole::Anchor,
       1,
       1,
       {req_ints("kernel"), ints_attr("stride", {}), ints_attr("padding", {0, 0}),
        i_attr("count_include_pad", 0)},
       infer_pool},
      {OpKind::GlobalAvgpool,
       "global_avgpool",
       OpCategory::Window,
       FusionRole::Anchor,
       1,
       1,
       {},
       infer_global_pool},
      {OpKind::Reshape,
       "reshape",
       OpCategory::Movement,
       FusionRole::Movement,
       1,
       1,
       {{"shape", AttrKind::Dims, std::nullopt}},
       infer_reshape},
      {OpKind::Transpose,
       "transpose",
       OpCategory::Movement,
       FusionRole::Movement,
       1,
       1,
       {req_ints("perm")},
       infer_transpose},
      {OpKind::Pad,
       "pad",
       OpCategory::Movement,
       FusionRole::Movement,
       1,
       1,
       {req_ints("pads"), f_attr("value", 0.0),
        AttrSpec{"mode", AttrKind::Enum, AttrValue(std::string("constant")),
                 "constant|reflect|edge"}},
       infer_pad},
      // sqrt(sum(x^2)) and the product, reduced like reduce_sum.
      {OpKind::ReduceL2,
       "reduce_l2",
       OpCategory::Reduction,
       FusionRole::Anchor,
       1,
       1,
       {ints_attr("axes", {}), i_attr("keepdims", 0)},
       infer_reduce},
      {OpKind::ReduceProd,
       "reduce_prod",
       OpCategory::Reduction,
       FusionRole::Anchor,
       1,
       1,
       {ints_attr("axes", {}), i_attr("keepdims", 0)},
       infer_reduce},
      // ONNX CumSum: exclusive leaves out the element itself, reverse sums from the end.
      {OpKind::Cumsum,
       "cumsum",
       OpCategory::Scan,
       FusionRole::Anchor,
       1,
       1,
       {{"axis", AttrKind::Int, std::nullopt}, i_attr("exclusive", 0), i_attr("reverse", 0)},
       infer_cumsum},
  };
}

std::vector<OpInfo> build_table() {
  std::vector<OpInfo> t = pointwise_rows();
  for (auto rows : {contraction_and_norm_rows, reduction_window_movement_rows, int_bool_rows,
                    movement_rows, resize_rows, index_rows, gather_rows, attention_rows})
    for (OpInfo& row : rows()) t.push_back(std::move(row));
  // Movement moves values of any dtype.
  for (OpInfo& row : t)
    if (row.category == OpCategory::Movement) row.dtypes = DTypeClass::Any;
  // Index by kind; every kind must have exactly one row.
  std::vector<OpInfo> by_kind(static_cast<size_t>(OpKind::Count), t[0]);
  std::vector<bool> seen(by_kind.size(), false);
  for (OpInfo& row : t) {
    size_t k = static_cast<size_t>(row.kind);
    KILN_ASSERT(!seen[k], "two op table rows for {}", row.name);
    KILN_ASSERT(std::string(row.name) == op_name(row.kind), "row {} has the wrong kind", row.name);
    seen[k] = true;
    by_kind[k] = std::move(row);
  }
  for (size_t k = 0; k < seen.size(); ++k)
    KILN_ASSERT(seen[k], "op {} has no op table row", op_name(static_cast<OpKind>(k)));
  return by_kind;
}
#undef UNARY
#undef UNARY16
#undef BINARY
#undef INTS
#undef ICUDA_FN
#undef IREF_FN
#undef CUDA_FN
#undef REF_FN

const std::vector<OpInfo>& table() {
  static const std::vector<OpInfo> t = build_table();
  return t;
}

}  // namespace

const char* op_name(OpKind k) {
  static const char* names[] = {
#define KILN_X(E, n) #n,
      KILN_ALL_OPS(KILN_X)
#undef KILN_X
  };
  return names[static_cast<size_t>(k)];
}

const char* category_name(OpCategory c) {
  switch (c) {
    case OpCategory::Pointwise:
      return "pointwise";
    case OpCategory::Reduction:
      return "reduction";
    case OpCategory::Normalization:
      return "normalization";
    case OpCategory::Contraction:
      return "contraction";
    case OpCategory::Window:
      return "window";
    case OpCategory::Movement:
      return "movement";
    case OpCategory::Scan:
      return "scan";
    case OpCategory::Attention:
      return "attention";
  }
  return "?";
}

const OpInfo& op_info(OpKind k) {
  return table().at(static_cast<size_t>(k));
}

const OpInfo* find_op(const std::string& name) {
  for (const OpInfo& o : table())
    if (name == o.name) return &o;
  return nullptr;
}

std::string all_op_names() {
  std::string s;
  for (const OpInfo& o : table()) s += (s.empty() ? "" : ", ") + std::string(o.name);
  return s;
}

int enum_index(const AttrSpec& spec, const std::string& value) {
  std::string choices = spec.choices ? spec.choices : "";
  int idx = 0;
  size_t start = 0;
  while (start <= choices.size()) {
    size_t bar = choices.find('|', start);
    if (bar == std::string::npos) bar = choices.size();
    if (choices.substr(start, bar - start) == value) return idx;
    ++idx;
    start = bar + 1;
  }
  return -1;
}

std::vector<double> op_params(const Node& n) {
  std::vector<double> p;
  for (const AttrSpec& s : op_info(n.op).attrs) {
    if (s.kind == AttrKind::Int)
      p.push_back(static_cast<double>(n.attr_int(s.name)));
    else if (s.kind == AttrKind::Float)
      p.push_back(n.attr_float(s.name));
    else if (s.kind == AttrKind::Enum)
      p.push_back(enum_index(s, n.attr_str(s.name)));
  }
  return p;
}

Attrs normalize_attrs(const OpInfo& info, const Attrs& given, const std::string& where) {
  Attrs out;
  for (const auto& [k, v] : given) {
    bool known = false;
    for (const AttrSpec& s : info.attrs) known |= (k == s.name);
    if (!known) {
      std::string valid;
      for (const AttrSpec& s : info.attrs)
        valid += (valid.empty() ? "" : ", ") + std::string(s.name);
      KILN_FAIL("{}: unknown attribute '{}' for op {} (valid: {})", where, k, info.name,
                valid.empty() ? "none" : valid);
    }
  }
  for (const AttrSpec& s : info.attrs) {
    auto it = given.find(s.name);
    if (it == given.end()) {
      KILN_CHECK(s.def.has_value(), "{}: missing required attribute '{}' of op {}", where, s.name,
                 info.name);
      out[s.name] = *s.def;
      continue;
    }
    const AttrValue& v = it->second;
    std::string at = fmt::format("{}.{}", where, s.name);
    switch (s.kind) {
      case AttrKind::Int:
        KILN_CHECK(std::holds_alternative<int64_t>(v), "{}: expected an integer", at);
        out[s.name] = v;
        break;
      case AttrKind::Float:
        if (std::holds_alternative<int64_t>(v))
          out[s.name] = static_cast<double>(std::get<int64_t>(v));
        else {
          KILN_CHECK(std::holds_alternative<double>(v), "{}: expected a number", at);
          KILN_CHECK(!std::isnan(std::get<double>(v)), "{}: expected a number, found NaN", at);
          out[s.name] = v;
        }
        break;
      case AttrKind::Enum:
        KILN_CHECK(
            std::holds_alternative<std::string>(v) && enum_index(s, std::get<std::string>(v)) >= 0,
            "{}: expected one of {}", at, s.choices);
        out[s.name] = v;
        break;
      case AttrKind::Ints:
        KILN_CHECK(std::holds_alternative<std::vector<int64_t>>(v),
                   "{}: expected a list of integers", at);
        out[s.name] = v;
        break;
      case AttrKind::Floats:
        if (const auto* iv = std::get_if<std::vector<int64_t>>(&v)) {
          out[s.name] = std::vector<double>(iv->begin(), iv->end());
        } else {
          KILN_CHECK(std::holds_alternative<std::vector<double>>(v),
                     "{}: expected a list of numbers", at);
          for (double f : std::get<std::vector<double>>(v))
            KILN_CHECK(std::isfinite(f), "{}: expected finite numbers, found {}", at, f);
          out[s.name] = v;
        }
        break;
      case AttrKind::Dims:
        if (std::holds_alternative<std::vector<int64_t>>(v)) {
          const auto& iv = std::get<std::vector<int64_t>>(v);
          out[s.name] = std::vector<Dim>(iv.begin(), iv.end());
        } else {
          KILN_CHECK(std::holds_alternative<std::vector<Dim>>(v),
                     "{}: expected a list of sizes (integers or symbol names)", at);
          out[s.name] = v;
        }
        break;
    }
  }
  return out;
}

std::string cuda_float(double v) {
  if (std::isinf(v)) return v > 0 ? "KILN_INF" : "(-KILN_INF)";
  std::string s = fmt::format("{:.9g}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

const char* dtype_class_text(DTypeClass c) {
  switch (c) {
    case DTypeClass::Float:
      return "a floating tensor";
    case DTypeClass::Numeric:
      return "a numeric tensor (floating or integer, not bool)";
    case DTypeClass::Bool:
      return "a bool tensor";
    case DTypeClass::Any:
      return "a tensor of any dtype";
  }
  return "?";
}

namespace {
// 0 floating, 1 integer, 2 bool: operands of one op share a class.
int dtype_class_of(DType t) {
  return is_float(t) ? 0 : is_integer(t) ? 1 : 2;
}
const char* class_word(int c) {
  return c == 0 ? "floating" : c == 1 ? "integer" : "bool";
}
}  // namespace

void check_operand_dtypes(const OpInfo& info, const InferArgs& a) {
  if (info.positional_dtypes) return;
  const size_t first = info.select ? 1 : 0;
  const size_t count = info.index_operand ? std::min<size_t>(a.in.size(), 1) : a.in.size();
  for (size_t i = first; i < count; ++i) {
    DType t = in(a, i).dtype;
    bool ok = info.dtypes == DTypeClass::Any || (info.dtypes == DTypeClass::Float && is_float(t)) ||
              (info.dtypes == DTypeClass::Numeric && t != DType::Bool) ||
              (info.dtypes == DTypeClass::Bool && t == DType::Bool);
    KILN_CHECK(ok, "{}.inputs[{}]: {} takes {}, got {} '{}'", a.where, i, info.name,
               dtype_class_text(info.dtypes), dtype_name(t), in_name(a, i));
  }
  for (size_t i = first + 1; i < count; ++i) {
    int c0 = dtype_class_of(in(a, first).dtype), ci = dtype_class_of(in(a, i).dtype);
    KILN_CHECK(c0 == ci,
               "{}.inputs[{}]: {} mixes {} and {} operands: '{}' is {} but '{}' is {} (insert a "
               "cast)",
               a.where, i, info.name, class_word(c0), class_word(ci), in_name(a, i),
               dtype_name(in(a, i).dtype), in_name(a, first), dtype_name(in(a, first).dtype));
  }
}

bool integer_domain(const OpInfo& info, const std::vector<DType>& operands) {
  for (size_t i = info.select ? 1 : 0; i < operands.size(); ++i)
    if (is_float(operands[i])) return false;
  return !operands.empty();
}

const char* value_ctype(DType t) {
  switch (t) {
    case DType::I32:
      return "int";
    case DType::I64:
      return "long long";
    case DType::Bool:
      return "bool";
    default:
      return "float";
  }
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& where) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    const Dim* da = i + a.size() >= r ? &a[i + a.size() - r] : nullptr;
    const Dim* db = i + b.size() >= r ? &b[i + b.size() - r] : nullptr;
    if (!da) {
      out[i] = *db;
    } else if (!db) {
      out[i] = *da;
    } else if (*da == *db) {
      out[i] = *da;
    } else if (da->is_static() && da->value() == 1) {
      out[i] = *db;
    } else if (db->is_static() && db->value() == 1) {
      out[i] = *da;
    } else {
      KILN_FAIL("{}: shapes {} and {} do not broadcast (dim {} of the result: {} vs {})", where,
                shape_str(a), shape_str(b), i, da->str(), db->str());
    }
  }
  return out;
}

}  // namespace kiln
