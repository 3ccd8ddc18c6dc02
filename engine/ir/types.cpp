// DType/Layout names, symbolic dims and their arithmetic, layout strides.
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

// A symbolic dim: a symbol, or a binary operation over two dims (at least one symbolic).
//
// Expressions can be as deep as a graph is long (a sum over every node of a 100,000-node chain),
// so nothing here recurses on the depth: the canonical text is made on first use by one in-order
// walk (a dim built step by step costs no text per step, so no quadratic time or memory),
// evaluation and symbol collection walk an explicit stack, and destruction unlinks the children
// that it owns alone before they die.
struct DimExpr {
  char op = 0;  // 0 = symbol, else '+', '-', '*', '/'
  std::string sym;
  Dim a, b;

  static Dim make(char op, std::string sym, Dim a, Dim b) {
    auto e = std::make_shared<DimExpr>();
    e->op = op;
    e->sym = std::move(sym);
    e->a = std::move(a);
    e->b = std::move(b);
    Dim d;
    d.expr_ = std::move(e);
    return d;
  }
  ~DimExpr() {
    std::vector<std::shared_ptr<const DimExpr>> dying;
    auto adopt = [&](Dim& d) {
      if (d.expr_ && d.expr_.use_count() == 1) dying.push_back(std::move(d.expr_));
    };
    adopt(a);
    adopt(b);
    while (!dying.empty()) {
      std::shared_ptr<const DimExpr> e = std::move(dying.back());
      dying.pop_back();
      DimExpr& m = const_cast<DimExpr&>(*e);  // created non-const by make(); we own it alone
      adopt(m.a);
      adopt(m.b);
    }
  }
  // The canonical form: the symbol, or "(a<op>b)" with the operands' forms.
  const std::string& str() const {
    std::call_once(text_once_, [this] {
      text_ = op == 0 ? sym : render();
      text_made_ = true;
    });
    return text_;
  }

 private:
  std::string render() const {
    std::string out;
    struct Piece {
      const Dim* d;  // a dim to write, or nullptr for the character c
      char c;
    };
    std::vector<Piece> todo = {{nullptr, ')'}, {&b, 0}, {nullptr, op}, {&a, 0}, {nullptr, '('}};
    while (!todo.empty()) {
      Piece p = todo.back();
      todo.pop_back();
      if (!p.d) {
        out += p.c;
      } else if (!p.d->expr_) {
        out += std::to_string(p.d->value_);
      } else if (p.d->expr_->op == 0 || p.d->expr_->text_made_) {
        out += p.d->expr_->str();
      } else {
        const DimExpr& e = *p.d->expr_;
        todo.insert(todo.end(),
                    {{nullptr, ')'}, {&e.b, 0}, {nullptr, e.op}, {&e.a, 0}, {nullptr, '('}});
      }
    }
    return out;
  }
  mutable std::once_flag text_once_;
  mutable std::string text_;
  mutable std::atomic<bool> text_made_{false};
};

Dim::Dim(int64_t v) : value_(v) {}
Dim::Dim(const char* sym) : Dim(std::string(sym)) {}
Dim::Dim(const std::string& sym) {
  *this = DimExpr::make(0, sym, Dim(), Dim());
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
  return expr_ ? expr_->str() : std::to_string(value_);
}

namespace {
// One step of evaluation, checked: a user error naming the dim and the bindings on overflow.
int64_t apply(const Dim& d, char op, int64_t x, int64_t y, const Bindings& b) {
  int64_t r = 0;
  bool overflow = false;
  switch (op) {
    case '+':
      overflow = __builtin_add_overflow(x, y, &r);
      break;
    case '-':
      overflow = __builtin_sub_overflow(x, y, &r);
      break;
    case '*':
      overflow = __builtin_mul_overflow(x, y, &r);
      break;
    default:
      KILN_CHECK(y != 0, "division by zero evaluating dim {}", d.str());
      if (x >= 0) {
        r = x / y;
      } else {  // floor: -((-x + y - 1) / y), each step checked
        int64_t t = 0, y1 = 0;
        overflow = x == INT64_MIN || __builtin_sub_overflow(y, 1, &y1) ||
                   __builtin_add_overflow(-x, y1, &t) || y == -1;
        r = overflow ? 0 : -(t / y);
      }
      break;
  }
  if (overflow) {
    std::vector<std::string> syms;
    d.symbols(&syms);
    std::string bound;
    for (const std::string& s : syms)
      if (auto it = b.find(s); it != b.end())
        bound += fmt::format("{}{}={}", bound.empty() ? "" : ", ", s, it->second);
    KILN_FAIL("size {} overflows 64 bits with {} ({} {} {})", d.str(), bound, x, op, y);
  }
  return r;
}
}  // namespace

int64_t Dim::eval(const Bindings& b) const {
  // Post-order over an explicit stack: a frame is a dim and how many operands are done.
  std::vector<std::pair<const Dim*, int>> frames = {{this, 0}};
  std::vector<int64_t> values;
  while (!frames.empty()) {
    auto& [d, done] = frames.back();
    if (!d->expr_) {
      values.push_back(d->value_);
      frames.pop_back();
    } else if (d->expr_->op == 0) {
      const std::string& s = d->expr_->sym;
      auto it = b.find(s);
      KILN_CHECK(it != b.end(),
                 "symbol '{}' is not bound (pass --shape {}=VALUE or an input that has it)", s, s);
      values.push_back(it->second);
      frames.pop_back();
    } else if (done < 2) {
      const Dim* next = done == 0 ? &d->expr_->a : &d->expr_->b;
      ++done;
      frames.push_back({next, 0});  // invalidates d and done
    } else {
      int64_t y = values.back();
      values.pop_back();
      int64_t x = values.back();
      values.back() = apply(*d, d->expr_->op, x, y, b);
      frames.pop_back();
    }
  }
  return values.back();
}

void Dim::symbols(std::vector<std::string>* out) const {
  std::vector<const Dim*> todo = {this};
  while (!todo.empty()) {
    const Dim* d = todo.back();
    todo.pop_back();
    if (!d->expr_) continue;
    if (d->expr_->op == 0) {
      if (std::find(out->begin(), out->end(), d->expr_->sym) == out->end())
        out->push_back(d->expr_->sym);
      continue;
    }
    todo.push_back(&d->expr_->b);  // a first, as the recursive order had it
    todo.push_back(&d->expr_->a);
  }
}

bool operator==(const Dim& a, const Dim& b) {
  if (a.is_static() != b.is_static()) return false;
  if (a.is_static()) return a.value_ == b.value_;
  return a.expr_ == b.expr_ || a.expr_->str() == b.expr_->str();
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
  return DimExpr::make(op, {}, a, b);
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
