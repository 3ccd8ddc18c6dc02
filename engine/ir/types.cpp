// DType/Layout names, shapes and layout strides (symbolic dims: engine/ir/dim.cpp).
#include <algorithm>
#include <atomic>
#include <climits>
#include <mutex>

#include "engine/base/check.hpp"
#include "kiln/types.hpp"

namespace kiln {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
    case DType::I32:
      return "i32";
    case DType::I64:
      return "i64";
    case DType::Bool:
      return "bool";
  }
  return "?";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::F16:
    case DType::BF16:
      return 2;
    case DType::I64:
      return 8;
    case DType::Bool:
      return 1;
  }
  return 4;
}

bool parse_dtype(const std::string& s, DType* out) {
  if (s == "f32")
    *out = DType::F32;
  else if (s == "f16")
    *out = DType::F16;
  else if (s == "bf16")
    *out = DType::BF16;
  else if (s == "i32")
    *out = DType::I32;
  else if (s == "i64")
    *out = DType::I64;
  else if (s == "bool")
    *out = DType::Bool;
  else
    return false;
  return true;
}

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::NCHW:
      return "NCHW";
    case Layout::NHWC:
      return "NHWC";
    case Layout::Strided:
      return "strided";
  }
  return "?";
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].str();
  return out + "]";
}

bool shape_is_static(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](const Dim& d) { return d.is_static(); });
}

Dim shape_numel(const Shape& s) {
  Dim n(1);
  for (const Dim& d : s) n = n * d;
  return n;
}

std::vector<int64_t> eval_shape(const Shape& s, const Bindings& b) {
  std::vector<int64_t> out;
  out.reserve(s.size());
  for (const Dim& d : s) out.push_back(d.eval(b));
  return out;
}

std::string TensorDesc::str() const {
  std::string s = fmt::format("{}{}", dtype_name(dtype), shape_str(shape));
  if (layout == Layout::NHWC) s += " NHWC";
  if (layout == Layout::Strided) {
    s += " strides[";
    for (size_t i = 0; i < strides.size(); ++i) s += (i ? ", " : "") + std::to_string(strides[i]);
    s += "]";
  }
  return s;
}

std::vector<int64_t> layout_strides(const std::vector<int64_t>& shape, Layout layout,
                                    const std::vector<int64_t>& explicit_strides) {
  size_t r = shape.size();
  if (layout == Layout::Strided) return explicit_strides;
  std::vector<int64_t> order(r);  // dims from outermost to innermost
  for (size_t i = 0; i < r; ++i) order[i] = static_cast<int64_t>(i);
  if (layout == Layout::NHWC && r >= 3) {
    order.erase(order.begin() + 1);
    order.push_back(1);
  }
  std::vector<int64_t> strides(r);
  int64_t s = 1;
  for (size_t i = r; i-- > 0;) {
    strides[order[i]] = s;
    s *= std::max<int64_t>(shape[order[i]], 1);
  }
  return strides;
}

}  // namespace kiln
