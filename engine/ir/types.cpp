// DType/Layout names, symbolic dims and their arithmetic, layout strides.
#include <algorithm>

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
  }
  return "?";
}

size_t dtype_size(DType t) {
  return t == DType::F32 ? 4 : 2;
}

bool parse_dtype(const std::string& s, DType* out) {
  if (s == "f32")
    *out = DType::F32;
  else if (s == "f16")
    *out = DType::F16;
  else if (s == "bf16")
    *out = DType::BF16;
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

// A symbolic dim: a symbol, or a binary operation over two dims (at least one symbolic).
struct DimExpr {
  char op = 0;  // 0 = symbol, else '+', '-', '*', '/'
  std::string sym;
  Dim a, b;
  std::string text;  // canonical form, computed once

  static Dim make(DimExpr e) {
    Dim d;
    e.text = e.op == 0 ? e.sym : fmt::format("({}{}{})", e.a.str(), e.op, e.b.str());
    d.expr_ = std::make_shared<const DimExpr>(std::move(e));
    return d;
  }
};

Dim::Dim(int64_t v) : value_(v) {}
Dim::Dim(const char* sym) : Dim(std::string(sym)) {}
Dim::Dim(const std::string& sym) {
  DimExpr e;
  e.sym = sym;
  *this = DimExpr::make(std::move(e));
}

int64_t Dim::value() const {
  KILN_ASSERT(is_static(), "value() of symbolic dim {}", str());
  return value_;
}
bool Dim::is_symbol() const {
  return expr_ && expr_->op == 0;
}
const std::string& Dim::symbol() const {
  KILN_ASSERT(is_symbol(), "symbol() of non-symbol dim");
  return expr_->sym;
}
std::string Dim::str() const {
  return expr_ ? expr_->text : std::to_string(value_);
}

int64_t Dim::eval(const Bindings& b) const {
  if (!expr_) return value_;
  if (expr_->op == 0) {
    auto it = b.find(expr_->sym);
    KILN_CHECK(it != b.end(),
               "symbol '{}' is not bound (pass --shape {}=VALUE or an input that has it)",
               expr_->sym, expr_->sym);
    return it->second;
  }
  int64_t x = expr_->a.eval(b), y = expr_->b.eval(b);
  switch (expr_->op) {
    case '+':
      return x + y;
    case '-':
      return x - y;
    case '*':
      return x * y;
    default:
      KILN_CHECK(y != 0, "division by zero evaluating dim {}", str());
      return x >= 0 ? x / y : -((-x + y - 1) / y);  // floor
  }
}

void Dim::symbols(std::vector<std::string>* out) const {
  if (!expr_) return;
  if (expr_->op == 0) {
    if (std::find(out->begin(), out->end(), expr_->sym) == out->end()) out->push_back(expr_->sym);
    return;
  }
  expr_->a.symbols(out);
  expr_->b.symbols(out);
}

bool operator==(const Dim& a, const Dim& b) {
  if (a.is_static() != b.is_static()) return false;
  if (a.is_static()) return a.value_ == b.value_;
  return a.expr_ == b.expr_ || a.expr_->text == b.expr_->text;
}

namespace {
Dim binary(char op, const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) {
    int64_t x = a.value(), y = b.value(), r = 0;
    bool overflow = op == '+'   ? __builtin_add_overflow(x, y, &r)
                    : op == '-' ? __builtin_sub_overflow(x, y, &r)
                    : op == '*' ? __builtin_mul_overflow(x, y, &r)
                                : false;
    KILN_CHECK(!overflow, "size arithmetic overflows 64 bits: {} {} {}", x, op, y);
    switch (op) {
      case '+':
      case '-':
      case '*':
        return Dim(r);
      default:
        KILN_ASSERT(y != 0, "static dim division by zero");
        return Dim(x >= 0 ? x / y : -((-x + y - 1) / y));
    }
  }
  // Identities keep derived dims readable: N+0, N*1, N/1.
  if ((op == '+' || op == '-') && b.is_static() && b.value() == 0) return a;
  if (op == '+' && a.is_static() && a.value() == 0) return b;
  if ((op == '*' || op == '/') && b.is_static() && b.value() == 1) return a;
  if (op == '*' && a.is_static() && a.value() == 1) return b;
  DimExpr e;
  e.op = op;
  e.a = a;
  e.b = b;
  return DimExpr::make(std::move(e));
}
}  // namespace

Dim operator+(const Dim& a, const Dim& b) {
  return binary('+', a, b);
}
Dim operator-(const Dim& a, const Dim& b) {
  return binary('-', a, b);
}
Dim operator*(const Dim& a, const Dim& b) {
  return binary('*', a, b);
}
Dim operator/(const Dim& a, const Dim& b) {
  return binary('/', a, b);
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
