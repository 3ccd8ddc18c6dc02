// Symbolic dims: a symbol, or an integer expression over symbols, in a canonical form.
//
// A derived dim is kept, where it is small, as a polynomial with integer coefficients over atoms
// (symbols, and floor divisions that do not simplify), so that equal sizes compare equal however
// they were built: reshaping [N, S, D] to [N*S, D] and back round-trips, N*S*64/64 is N*S, and a
// conv output (H+2-3)/1+1 is H. Divisions by a constant pull out every multiple of the divisor
// (floor((d*P + R)/d) = P + floor(R/d) holds for all integers) and merge nested floors
// (floor((floor(A/b) + c)/d) = floor((A + c*b)/(b*d))). The canonical text is the polynomial's:
// "N*S", "2*H+1", "(H+1)/2".
//
// Polynomials past the size caps (terms, degree, division nesting) fall back to a plain
// expression tree, compared by text. Trees can be as deep as a graph is long (a sum over every
// node of a 100,000-node chain), so nothing here recurses on a tree's depth: the text is made on
// first use by one in-order walk, evaluation and symbol collection walk an explicit stack, and
// destruction unlinks the children that it owns alone before they die. Recursion happens only
// over division nesting, which the caps bound.
#include <algorithm>
#include <atomic>
#include <climits>
#include <map>
#include <mutex>
#include <optional>

#include "engine/base/check.hpp"
#include "engine/base/hash.hpp"
#include "kiln/types.hpp"

namespace kiln {

namespace {

constexpr size_t kMaxTerms = 32;  // terms of one polynomial
constexpr int kMaxDegree = 8;     // total degree of one term
constexpr int kMaxNesting = 8;    // floor divisions inside floor divisions

struct Key {
  uint64_t hi = 0, lo = 0;
  friend bool operator==(const Key& a, const Key& b) { return a.hi == b.hi && a.lo == b.lo; }
  friend bool operator<(const Key& a, const Key& b) {
    return a.hi != b.hi ? a.hi < b.hi : a.lo < b.lo;
  }
};

Key key_of(const Hasher& h) {
  return {h.hi(), h.lo()};
}

// An atom raised to a power inside a term.
struct Factor {
  Key key;
  Dim atom;
  int power = 1;
};

// coef * the factors (sorted by key); no factors: the constant term.
struct Term {
  std::vector<Factor> factors;
  Key key;  // of the factors alone, so that like terms meet
  int64_t coef = 0;
  int degree() const {
    int d = 0;
    for (const Factor& f : factors) d += f.power;
    return d;
  }
};

// Terms sorted by key, none with a zero coefficient.
struct Poly {
  std::vector<Term> terms;
  Key key;
  int nesting = 0;  // of the deepest division among its atoms
};

Key monomial_key(const std::vector<Factor>& fs) {
  Hasher h;
  h.field("m");
  for (const Factor& f : fs) h.u64(f.key.hi).u64(f.key.lo).u64(static_cast<uint64_t>(f.power));
  return key_of(h);
}

// Hashes the terms; false when a coefficient is INT64_MIN (its magnitude is not an int64).
bool finish(Poly* p) {
  Hasher h;
  h.field("p");
  for (const Term& t : p->terms) h.u64(t.key.hi).u64(t.key.lo).u64(static_cast<uint64_t>(t.coef));
  p->key = key_of(h);
  return std::none_of(p->terms.begin(), p->terms.end(),
                      [](const Term& t) { return t.coef == INT64_MIN; });
}

}  // namespace

struct DimExpr {
  char op = 0;  // 0 = symbol, else '+', '-', '*', '/'
  std::string sym;
  Dim a, b;
  // Canonical forms: an atom (a symbol, or a division that does not simplify) has a key and
  // its nesting; a derived dim in polynomial form holds the polynomial, and a, b, op render it.
  bool atom = false;
  Key atom_key;
  int nesting = 0;
  std::shared_ptr<const Poly> poly;

  static Dim make(char op, std::string sym, Dim a, Dim b) {
    auto e = std::make_shared<DimExpr>();
    e->op = op;
    e->sym = std::move(sym);
    e->a = std::move(a);
    e->b = std::move(b);
    if (e->op == 0) {
      e->atom = true;
      Hasher h;
      e->atom_key = key_of(h.field("s").field(e->sym));
    }
    return wrap(std::move(e));
  }
  static Dim wrap(std::shared_ptr<DimExpr> e) {
    Dim d;
    d.expr_ = std::move(e);
    return d;
  }
  static const DimExpr* of(const Dim& d) { return d.expr_.get(); }
  static int64_t value_of(const Dim& d) { return d.value_; }

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
  // The canonical text, with only the parentheses that precedence needs.
  const std::string& str() const {
    std::call_once(text_once_, [this] {
      text_ = op == 0 ? sym : render();
      text_made_ = true;
    });
    return text_;
  }
  bool text_made() const { return text_made_; }

 private:
  std::string render() const;
  mutable std::once_flag text_once_;
  mutable std::string text_;
  mutable std::atomic<bool> text_made_{false};
};

namespace {

int precedence(char op) {
  return op == '+' || op == '-' ? 1 : op == '*' || op == '/' ? 2 : 3;
}

// Whether a child with operator `child` (0: a leaf) needs parentheses under `parent`.
bool needs_parens(char child, char parent, bool right) {
  if (parent == 0 || child == 0) return false;
  int c = precedence(child), p = precedence(parent);
  if (c != p) return c < p;
  // Left-associative: a right operand of equal precedence keeps its parentheses where they
  // change the value (a-(b+c), a/(b*c), a*(b/c): floor division does not associate).
  return right && (parent == '-' || parent == '/' || (parent == '*' && child == '/'));
}

}  // namespace

std::string DimExpr::render() const {
  std::string out;
  struct Piece {
    const Dim* d;  // a dim to write, or nullptr for the character c
    char c;
    char parent;
    bool right;
  };
  std::vector<Piece> todo = {{&b, 0, op, true}, {nullptr, op, 0, false}, {&a, 0, op, false}};
  while (!todo.empty()) {
    Piece p = todo.back();
    todo.pop_back();
    if (!p.d) {
      out += p.c;
      continue;
    }
    const DimExpr* e = of(*p.d);
    if (!e) {
      int64_t v = value_of(*p.d);
      out += v < 0 && p.parent != 0 ? fmt::format("({})", v) : std::to_string(v);
      continue;
    }
    const bool paren = needs_parens(e->op, p.parent, p.right);
    if (e->op == 0 || e->text_made()) {
      out += paren ? "(" + e->str() + ")" : e->str();
      continue;
    }
    if (paren) todo.push_back({nullptr, ')', 0, false});
    todo.insert(todo.end(),
                {{&e->b, 0, e->op, true}, {nullptr, e->op, 0, false}, {&e->a, 0, e->op, false}});
    if (paren) todo.push_back({nullptr, '(', 0, false});
  }
  return out;
}

namespace {

// ---- polynomials ----

// The polynomial of a dim, or nullptr for a dim kept as a plain tree.
std::shared_ptr<const Poly> poly_of(const Dim& d) {
  auto p = std::make_shared<Poly>();
  if (d.is_static()) {
    if (d.value() != 0) p->terms.push_back({{}, monomial_key({}), d.value()});
  } else {
    const DimExpr* e = DimExpr::of(d);
    if (e->poly) return e->poly;
    if (!e->atom) return nullptr;
    std::vector<Factor> fs = {{e->atom_key, d, 1}};
    Key k = monomial_key(fs);
    p->terms.push_back({std::move(fs), k, 1});
    p->nesting = e->nesting;
  }
  finish(p.get());
  return p;
}

std::optional<Poly> add(const Poly& x, const Poly& y, int64_t sign) {
  Poly r;
  r.nesting = std::max(x.nesting, y.nesting);
  size_t i = 0, j = 0;
  while (i < x.terms.size() || j < y.terms.size()) {
    if (j == y.terms.size() || (i < x.terms.size() && x.terms[i].key < y.terms[j].key)) {
      r.terms.push_back(x.terms[i++]);
      continue;
    }
    Term t = y.terms[j++];
    if (__builtin_mul_overflow(t.coef, sign, &t.coef)) return std::nullopt;
    if (i < x.terms.size() && x.terms[i].key == t.key) {
      if (__builtin_add_overflow(x.terms[i].coef, t.coef, &t.coef)) return std::nullopt;
      ++i;
      if (t.coef == 0) continue;
    }
    r.terms.push_back(std::move(t));
  }
  if (r.terms.size() > kMaxTerms || !finish(&r)) return std::nullopt;
  return r;
}

std::optional<Poly> mul(const Poly& x, const Poly& y) {
  if (x.terms.size() * y.terms.size() > kMaxTerms * 4) return std::nullopt;
  std::map<Key, Term> acc;
  for (const Term& s : x.terms)
    for (const Term& t : y.terms) {
      Term m;
      size_t i = 0, j = 0;
      while (i < s.factors.size() || j < t.factors.size()) {
        if (j == t.factors.size() ||
            (i < s.factors.size() && s.factors[i].key < t.factors[j].key)) {
          m.factors.push_back(s.factors[i++]);
        } else if (i == s.factors.size() || t.factors[j].key < s.factors[i].key) {
          m.factors.push_back(t.factors[j++]);
        } else {
          Factor f = s.factors[i++];
          f.power += t.factors[j++].power;
          m.factors.push_back(std::move(f));
        }
      }
      if (m.degree() > kMaxDegree) return std::nullopt;
      if (__builtin_mul_overflow(s.coef, t.coef, &m.coef)) return std::nullopt;
      m.key = monomial_key(m.factors);
      auto [it, fresh] = acc.try_emplace(m.key, m);
      if (!fresh && __builtin_add_overflow(it->second.coef, m.coef, &it->second.coef))
        return std::nullopt;
    }
  Poly r;
  r.nesting = std::max(x.nesting, y.nesting);
  for (auto& [k, t] : acc)
    if (t.coef != 0) r.terms.push_back(std::move(t));
  if (r.terms.size() > kMaxTerms || !finish(&r)) return std::nullopt;
  return r;
}

bool is_constant(const Poly& p, int64_t* v) {
  if (p.terms.empty()) {
    *v = 0;
    return true;
  }
  if (p.terms.size() == 1 && p.terms[0].factors.empty()) {
    *v = p.terms[0].coef;
    return true;
  }
  return false;
}

Dim dim_of(const Poly& p);
std::optional<Poly> divide(const Poly& num, const Poly& den);

// floor(num / den) as an atom that does not simplify.
std::optional<Poly> division_atom(const Poly& num, const Poly& den) {
  const int nesting = std::max(num.nesting, den.nesting) + 1;
  if (nesting > kMaxNesting) return std::nullopt;
  auto e = std::make_shared<DimExpr>();
  e->op = '/';
  e->a = dim_of(num);
  e->b = dim_of(den);
  e->atom = true;
  e->nesting = nesting;
  Hasher h;
  e->atom_key =
      key_of(h.field("/").u64(num.key.hi).u64(num.key.lo).u64(den.key.hi).u64(den.key.lo));
  Poly r;
  std::vector<Factor> fs = {{e->atom_key, DimExpr::wrap(e), 1}};
  Key k = monomial_key(fs);
  r.terms.push_back({std::move(fs), k, 1});
  r.nesting = nesting;
  finish(&r);
  return r;
}

// floor(num / d) for a constant d > 0.
std::optional<Poly> divide_by_constant(const Poly& num, int64_t d) {
  Poly q, rem;  // num = d*q + rem, every coefficient of rem in [0, d)
  for (const Term& t : num.terms) {
    int64_t c = t.coef / d, r = t.coef % d;
    if (r < 0) {
      r += d;
      c -= 1;
    }
    if (c != 0) q.terms.push_back({t.factors, t.key, c});
    if (r != 0) rem.terms.push_back({t.factors, t.key, r});
  }
  q.nesting = rem.nesting = num.nesting;
  finish(&q);
  finish(&rem);
  int64_t rc = 0;
  if (is_constant(rem, &rc)) return q;  // 0 <= rc < d: floor(rc / d) = 0
  // floor((floor(A/b) + c)/d) = floor((A + c*b)/(b*d)) for constants b, d > 0.
  const Term* lone = nullptr;
  int64_t c = 0;
  for (const Term& t : rem.terms) {
    if (t.factors.empty()) {
      c = t.coef;
    } else if (!lone && t.coef == 1 && t.factors.size() == 1 && t.factors[0].power == 1) {
      lone = &t;
    } else {
      lone = nullptr;
      break;
    }
  }
  std::optional<Poly> inner;
  const DimExpr* e = lone ? DimExpr::of(lone->factors[0].atom) : nullptr;
  if (e && e->op == '/' && rem.terms.size() <= 2 && e->b.is_static() && e->b.value() > 0) {
    int64_t b = e->b.value(), cb = 0, bd = 0;
    std::shared_ptr<const Poly> a = poly_of(e->a);
    if (a && !__builtin_mul_overflow(c, b, &cb) && !__builtin_mul_overflow(b, d, &bd)) {
      Poly shift;
      if (cb != 0) shift.terms.push_back({{}, monomial_key({}), cb});
      finish(&shift);
      if (std::optional<Poly> n = add(*a, shift, 1)) inner = divide_by_constant(*n, bd);
    }
  }
  if (!inner) {
    Poly den;
    den.terms.push_back({{}, monomial_key({}), d});
    finish(&den);
    inner = division_atom(rem, den);
  }
  if (!inner) return std::nullopt;
  return add(q, *inner, 1);
}

std::optional<Poly> divide(const Poly& num, const Poly& den) {
  int64_t d = 0;
  if (is_constant(den, &d)) {
    if (d <= 0) return std::nullopt;  // the plain tree evaluates it (and reports zero)
    return divide_by_constant(num, d);
  }
  // By one term that divides every term of num exactly.
  if (den.terms.size() == 1 && den.terms[0].coef > 0) {
    const Term& m = den.terms[0];
    Poly q;
    q.nesting = num.nesting;
    bool exact = true;
    for (const Term& t : num.terms) {
      if (t.coef % m.coef != 0) {
        exact = false;
        break;
      }
      Term r{{}, {}, t.coef / m.coef};
      size_t j = 0;
      for (const Factor& f : t.factors) {
        if (j < m.factors.size() && m.factors[j].key == f.key) {
          if (f.power < m.factors[j].power) break;
          if (f.power > m.factors[j].power)
            r.factors.push_back({f.key, f.atom, f.power - m.factors[j].power});
          ++j;
        } else {
          r.factors.push_back(f);
        }
      }
      if (j != m.factors.size()) {
        exact = false;
        break;
      }
      r.key = monomial_key(r.factors);
      q.terms.push_back(std::move(r));
    }
    if (exact) {
      std::sort(q.terms.begin(), q.terms.end(),
                [](const Term& x, const Term& y) { return x.key < y.key; });
      finish(&q);
      return q;
    }
  }
  return division_atom(num, den);
}

// ---- back to dims ----

std::string factor_text(const Factor& f) {
  return f.atom.str();
}

Dim raw(char op, Dim a, Dim b) {
  return DimExpr::make(op, {}, std::move(a), std::move(b));
}

// coef * factors as a product tree, the coefficient first; `abs` drops the sign.
Dim term_dim(const Term& t, const std::vector<size_t>& order, bool abs) {
  int64_t c = abs && t.coef < 0 ? -t.coef : t.coef;
  std::optional<Dim> d;
  if (c != 1 || t.factors.empty()) d = Dim(c);
  for (size_t i : order)
    for (int k = 0; k < t.factors[i].power; ++k)
      d = d ? raw('*', *d, t.factors[i].atom) : t.factors[i].atom;
  return *d;
}

Dim dim_of(const Poly& p) {
  int64_t v = 0;
  if (is_constant(p, &v)) return Dim(v);
  if (p.terms.size() == 1 && p.terms[0].coef == 1 && p.terms[0].factors.size() == 1 &&
      p.terms[0].factors[0].power == 1)
    return p.terms[0].factors[0].atom;
  // The text's order: higher degree first, then by the factors' text; the constant last.
  struct Ordered {
    const Term* t;
    std::vector<size_t> order;
    std::string text;
  };
  std::vector<Ordered> terms;
  for (const Term& t : p.terms) {
    Ordered o{&t, {}, {}};
    std::vector<std::string> texts;
    for (size_t i = 0; i < t.factors.size(); ++i) {
      o.order.push_back(i);
      texts.push_back(factor_text(t.factors[i]));
    }
    std::sort(o.order.begin(), o.order.end(),
              [&](size_t x, size_t y) { return texts[x] < texts[y]; });
    for (size_t i : o.order) o.text += texts[i] + "*";
    terms.push_back(std::move(o));
  }
  std::sort(terms.begin(), terms.end(), [](const Ordered& x, const Ordered& y) {
    int dx = x.t->degree(), dy = y.t->degree();
    return dx != dy ? dx > dy : x.text < y.text;
  });
  Dim d = term_dim(*terms[0].t, terms[0].order, false);
  for (size_t i = 1; i < terms.size(); ++i)
    d = raw(terms[i].t->coef < 0 ? '-' : '+', d, term_dim(*terms[i].t, terms[i].order, true));
  // Attach the polynomial to the top node (made here, so not shared yet).
  const DimExpr* top = DimExpr::of(d);
  KILN_ASSERT(top && top->op != 0, "a polynomial of several terms renders as an operation");
  const_cast<DimExpr*>(top)->poly = std::make_shared<const Poly>(p);
  return d;
}

}  // namespace

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
  if (a.expr_ == b.expr_) return true;
  std::shared_ptr<const Poly> pa = poly_of(a), pb = poly_of(b);
  if (pa && pb) return pa->key == pb->key;
  return a.expr_->str() == b.expr_->str();
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
  std::shared_ptr<const Poly> pa = poly_of(a), pb = poly_of(b);
  if (pa && pb) {
    std::optional<Poly> r = op == '+'   ? add(*pa, *pb, 1)
                            : op == '-' ? add(*pa, *pb, -1)
                            : op == '*' ? mul(*pa, *pb)
                                        : divide(*pa, *pb);
    if (r) return dim_of(*r);
  }
  // A plain tree; identities keep it readable: N+0, N*1, N/1.
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

}  // namespace kiln
