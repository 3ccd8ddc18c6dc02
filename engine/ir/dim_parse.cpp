// The text form of a dim (graph files, --shape-free expressions): a small recursive-descent
// parser over + - * / and parentheses. Its input is bounded (256 characters, 32 levels of
// parentheses), so its recursion is too.
#include <cctype>

#include "engine/base/check.hpp"
#include "kiln/types.hpp"

namespace kiln {

namespace {

constexpr size_t kMaxLength = 256;
constexpr int kMaxDepth = 32;
constexpr int64_t kMaxLiteral = int64_t{1} << 48;

class DimParser {
 public:
  DimParser(const std::string& text, const std::string& where) : s_(text), where_(where) {}

  Dim parse() {
    KILN_CHECK(!s_.empty(), "{}: expected a dim, found an empty string", where_);
    KILN_CHECK(s_.size() <= kMaxLength, "{}: a dim expression of {} characters (at most {})",
               where_, s_.size(), kMaxLength);
    Dim d = sum(0);
    skip();
    if (i_ < s_.size() && i_ > 0 && std::isdigit(static_cast<unsigned char>(s_[i_ - 1])) &&
        (std::isalpha(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
      KILN_FAIL("{}: cannot read dim '{}': a symbol name cannot start with a digit (character {})",
                where_, s_, i_);
    if (i_ < s_.size()) fail("an operator (+ - * /) or the end");
    return d;
  }

 private:
  [[noreturn]] void fail(const char* expected) {
    if (i_ >= s_.size())
      KILN_FAIL("{}: cannot read dim '{}': expected {} at its end", where_, s_, expected);
    KILN_FAIL("{}: cannot read dim '{}': expected {} at character {}, found '{}'", where_, s_,
              expected, i_ + 1, s_[i_]);
  }
  void skip() {
    while (i_ < s_.size() && s_[i_] == ' ') ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  Dim sum(int depth) {
    Dim d = product(depth);
    for (;;) {
      if (eat('+'))
        d = d + product(depth);
      else if (eat('-'))
        d = d - product(depth);
      else
        return d;
    }
  }
  Dim product(int depth) {
    Dim d = atom(depth);
    for (;;) {
      if (eat('*')) {
        d = d * atom(depth);
      } else if (eat('/')) {
        size_t at = i_;
        Dim den = atom(depth);
        if (den.is_static() && den.value() == 0) {
          i_ = at;
          skip();
          fail("a divisor other than 0");
        }
        d = d / den;
      } else {
        return d;
      }
    }
  }
  Dim atom(int depth) {
    skip();
    if (eat('-')) {  // a negative coefficient, as the canonical text writes one: "(-1)*A+B"
      if (depth + 1 > kMaxDepth)
        KILN_FAIL("{}: dim '{}' nests deeper than {}", where_, s_, kMaxDepth);
      return Dim(0) - atom(depth + 1);
    }
    if (eat('(')) {
      if (depth + 1 > kMaxDepth)
        KILN_FAIL("{}: dim '{}' nests parentheses deeper than {}", where_, s_, kMaxDepth);
      Dim d = sum(depth + 1);
      if (!eat(')')) fail("')'");
      return d;
    }
    if (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      int64_t v = 0;
      size_t start = i_;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
        v = v * 10 + (s_[i_] - '0');
        ++i_;
        KILN_CHECK(v <= kMaxLiteral, "{}: dim '{}': the number at character {} is over 2^48",
                   where_, s_, start + 1);
      }
      return Dim(v);
    }
    if (i_ < s_.size() && (std::isalpha(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) {
      size_t start = i_;
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
        ++i_;
      return Dim(s_.substr(start, i_ - start));
    }
    fail("a number, a symbol name or '('");
  }

  const std::string& s_;
  const std::string& where_;
  size_t i_ = 0;
};

}  // namespace

Dim parse_dim(const std::string& text, const std::string& where) {
  return DimParser(text, where).parse();
}

}  // namespace kiln
