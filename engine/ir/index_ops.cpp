// Rows and shape inference of argmax, argmin and range (engine/ir/index_ops.hpp).
#include "engine/ir/index_ops.hpp"

#include <cmath>
#include <limits>

#include "engine/base/check.hpp"

namespace kiln {
namespace {

void require_flag(const InferArgs& a, const char* flag) {
  KILN_CHECK(a.node.attr_int(flag) == 0 || a.node.attr_int(flag) == 1,
             "{}.{}: expected 0 or 1, found {}", a.where, flag, a.node.attr_int(flag));
}

// argmax / argmin: the input's shape with the axis removed (keepdims 0) or kept as 1; i64.
std::vector<TensorDesc> infer_arg_reduce(const InferArgs& a) {
  const TensorDesc& x = in(a, 0);
  const int r = x.rank();
  KILN_CHECK(r >= 1, "{}: input 0 ('{}') must be a tensor of rank >= 1, found {}", a.where,
             a.in[0]->name, x.str());
  const int64_t axis = a.node.attr_int("axis");
  KILN_CHECK(axis >= -r && axis < r, "{}.axis: axis {} out of range for rank {}", a.where, axis, r);
  require_flag(a, "keepdims");
  require_flag(a, "select_last_index");
  const int64_t ax = axis < 0 ? axis + r : axis;
  const bool keep = a.node.attr_int("keepdims") != 0;
  TensorDesc o;
  o.dtype = DType::I64;
  for (int d = 0; d < r; ++d) {
    if (d != ax)
      o.shape.push_back(x.shape[d]);
    else if (keep)
      o.shape.push_back(Dim(1));
  }
  o.layout = keep && x.layout == Layout::NHWC ? Layout::NHWC : Layout::NCHW;
  return {o};
}

// range: [length] values start + i * delta of its dtype; no inputs.
std::vector<TensorDesc> infer_range(const InferArgs& a) {
  const std::vector<Dim>& len = a.node.attr_dims("length");
  KILN_CHECK(len.size() == 1, "{}.length: expected one size (the output length), found {} values",
             a.where, len.size());
  if (len[0].is_static())
    KILN_CHECK(len[0].value() >= 1, "{}.length: expected a positive size, found {}", a.where,
               len[0].value());
  const double start = a.node.attr_float("start"), delta = a.node.attr_float("delta");
  KILN_CHECK(std::isfinite(start), "{}.start: expected a finite number, found {}", a.where, start);
  KILN_CHECK(std::isfinite(delta), "{}.delta: expected a finite number, found {}", a.where, delta);
  TensorDesc o;
  o.dtype = range_dtype(a.node);
  o.shape = {len[0]};
  if (is_integer(o.dtype)) {
    // Integer ranges are exact in the kernels' 64-bit arithmetic: integral start and delta within
    // the i64 range that doubles hold exactly.
    const double lim = 9007199254740992.0;  // 2^53
    for (const char* k : {"start", "delta"}) {
      const double v = a.node.attr_float(k);
      KILN_CHECK(v == std::floor(v) && std::fabs(v) <= lim,
                 "{}.{}: an {} range takes integers within +-2^53, found {}", a.where, k,
                 dtype_name(o.dtype), v);
    }
  }
  return {o};
}

AttrSpec i_attr(const char* n, int64_t d) {
  return {n, AttrKind::Int, AttrValue(d)};
}

OpInfo arg_row(OpKind k, const char* name) {
  OpInfo r{k,
           name,
           OpCategory::Reduction,
           FusionRole::Anchor,
           1,
           1,
           {i_attr("axis", 0), i_attr("keepdims", 1), i_attr("select_last_index", 0)},
           infer_arg_reduce};
  r.dtypes = DTypeClass::Numeric;
  return r;
}

// start + i * delta, i the element's index (the pointwise emitters pass it as operand 0): f32
// math for the floating dtypes, exact 64-bit math for the integer ones.
std::string range_cuda(const std::vector<std::string>& x, const double* p) {
  return fmt::format("({} + static_cast<float>({}) * {})", cuda_float(p[0]), x.at(0),
                     cuda_float(p[1]));
}
std::string range_icuda(const std::vector<std::string>& x, const double* p, const std::string& T) {
  return fmt::format("static_cast<{}>({}LL + static_cast<long long>({}) * {}LL)", T,
                     static_cast<long long>(p[0]), x.at(0), static_cast<long long>(p[1]));
}

OpInfo range_row() {
  OpInfo r{OpKind::Range,
           "range",
           OpCategory::Pointwise,
           FusionRole::Elementwise,
           0,
           0,
           {{"start", AttrKind::Float, AttrValue(0.0)},
            {"delta", AttrKind::Float, AttrValue(1.0)},
            {"length", AttrKind::Dims, std::nullopt},
            {"dtype", AttrKind::Enum, std::nullopt, "f32|f16|bf16|i32|i64"}},
           infer_range};
  r.ref = [](const double* x, const double* p) { return p[0] + x[0] * p[1]; };
  r.cuda = range_cuda;
  r.dtypes = DTypeClass::Any;
  r.iref = [](const int64_t* x, const double* p) {
    return static_cast<int64_t>(p[0]) + x[0] * static_cast<int64_t>(p[1]);
  };
  r.icuda = range_icuda;
  r.index_source = true;
  return r;
}

}  // namespace

std::vector<OpInfo> index_rows() {
  return {arg_row(OpKind::ArgMax, "argmax"), arg_row(OpKind::ArgMin, "argmin"), range_row()};
}

int64_t arg_reduce_axis(const Node& n, int rank) {
  const int64_t a = n.attr_int("axis");
  return a < 0 ? a + rank : a;
}

DType range_dtype(const Node& n) {
  DType t = DType::F32;
  parse_dtype(n.attr_str("dtype"), &t);
  return t;
}

}  // namespace kiln
