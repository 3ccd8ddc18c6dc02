// Symbolic dims as expressions: the canonical form (equal sizes compare equal however they were
// built), its text and parser, evaluation against direct integer arithmetic on random
// expressions, the size caps' fallback, and graph files that write expressions.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <random>

#include "kiln/error.hpp"
#include "kiln/graph.hpp"
#include "kiln/io.hpp"
#include "tests/user_error.hpp"

using namespace kiln;
using test::user_error;

namespace {

int64_t floor_div(int64_t x, int64_t y) {
  return x >= 0 ? x / y : -((-x + y - 1) / y);
}

Dim P(const std::string& s) {
  return parse_dim(s, "test");
}

}  // namespace

TEST(DimExpr, EqualSizesCompareEqualHoweverBuilt) {
  Dim n("N"), s("S"), h("H");
  EXPECT_EQ(n * s * Dim(64) / Dim(64), n * s);
  EXPECT_EQ((n * s * Dim(64) / Dim(64)).str(), "N*S");
  EXPECT_EQ(n * s, s * n);
  EXPECT_EQ((n + Dim(1)) * (n - Dim(1)), n * n - Dim(1));
  EXPECT_EQ((h + Dim(2) - Dim(3)) / Dim(1) + Dim(1), h);  // a 3x3 conv, pad 1, stride 1
  EXPECT_TRUE(((h + Dim(2) - Dim(3)) / Dim(1) + Dim(1)).is_symbol());
  EXPECT_EQ((h - Dim(1)) / Dim(2) + Dim(1), (h + Dim(1)) / Dim(2));
  EXPECT_EQ(((h + Dim(6) - Dim(7)) / Dim(2) + Dim(1)).str(), "(H+1)/2");  // 7x7 s2 p3
  EXPECT_EQ((n * s) / s, n);
  EXPECT_EQ((Dim(6) * n * s) / (Dim(3) * s), Dim(2) * n);
  EXPECT_NE(n / Dim(2) * Dim(2), n);  // floor division does not cancel
  EXPECT_EQ((n * Dim(2) + Dim(1)) / Dim(2), n);
  EXPECT_EQ((n - n), Dim(0));
  EXPECT_TRUE((n - n).is_static());
  // Nested floors merge: floor((floor((H+1)/2) + 1)/2) = floor((H+3)/4).
  EXPECT_EQ(((h + Dim(1)) / Dim(2) + Dim(1)) / Dim(2), (h + Dim(3)) / Dim(4));
  EXPECT_EQ((((h + Dim(1)) / Dim(2) + Dim(1)) / Dim(2)).str(), "(H+3)/4");
}

TEST(DimExpr, TextIsCanonicalAndReadsBack) {
  for (const char* t :
       {"N", "N*S", "64*N", "2*H+1", "(H+1)/2", "N*N-1", "H-2", "N/(2*S)", "3*(H/2)", "H*W/3+N"}) {
    Dim d = P(t);
    EXPECT_EQ(d.str(), t);
    EXPECT_EQ(P(d.str()), d) << t;
  }
  EXPECT_EQ(P("(H-1)/2+1").str(), "(H+1)/2");
  EXPECT_EQ(P("S * N").str(), "N*S");
  EXPECT_EQ(P("((N))").str(), "N");
  EXPECT_EQ(P("2*32"), Dim(64));
  EXPECT_TRUE(P("2*32").is_static());
  EXPECT_EQ(P("N+1-1"), Dim("N"));
}

TEST(DimExpr, ParseErrorsNameThePosition) {
  EXPECT_NE(user_error([] { P("N**S"); })
                .find("test: cannot read dim 'N**S': expected a number, a "
                      "symbol name or '(' at character 3, found '*'"),
            std::string::npos);
  EXPECT_NE(user_error([] { P("N+"); }).find("at its end"), std::string::npos);
  EXPECT_NE(user_error([] { P("(N"); }).find("expected ')' at its end"), std::string::npos);
  EXPECT_NE(user_error([] { P(""); }).find("empty"), std::string::npos);
  EXPECT_NE(user_error([] { P("N/0"); }).find("a divisor other than 0 at character 3"),
            std::string::npos);
  EXPECT_NE(user_error([] { P("N^2"); }).find("found '^'"), std::string::npos);
  EXPECT_NE(user_error([] {
              P(std::string(40, '(') + "N" + std::string(40, ')'));
            }).find("nests parentheses deeper than 32"),
            std::string::npos);
  EXPECT_NE(user_error([] { P(std::string(300, 'N')); }).find("300 characters"), std::string::npos);
  EXPECT_NE(user_error([] { P("N*99999999999999999999"); }).find("over 2^48"), std::string::npos);
}

// Random expressions over three symbols: the canonical dim evaluates as the expression does in
// integers (floor division by positive divisors), and its text reads back as the same dim.
// Deeper expressions past the caps: PastTheCapsAPlainTreeStillEvaluates.
TEST(DimExpr, RandomExpressionsEvaluateAsIntegerArithmetic) {
  std::mt19937_64 rng(20261201);
  struct Expr {
    Dim d;
    std::function<int64_t(const Bindings&)> f;
  };
  auto leaf = [&]() -> Expr {
    int k = static_cast<int>(rng() % 5);
    if (k < 3) {
      std::string s(1, static_cast<char>('A' + k));
      return {Dim(s), [s](const Bindings& b) { return b.at(s); }};
    }
    int64_t v = 1 + static_cast<int64_t>(rng() % 7);
    return {Dim(v), [v](const Bindings&) { return v; }};
  };
  std::function<Expr(int)> gen = [&](int depth) -> Expr {
    if (depth == 0 || rng() % 4 == 0) return leaf();
    Expr x = gen(depth - 1);
    switch (rng() % 4) {
      case 0: {
        Expr y = gen(depth - 1);
        return {x.d + y.d, [x, y](const Bindings& b) { return x.f(b) + y.f(b); }};
      }
      case 1: {
        Expr y = gen(depth - 1);
        return {x.d - y.d, [x, y](const Bindings& b) { return x.f(b) - y.f(b); }};
      }
      case 2: {
        Expr y = gen(depth - 1);
        return {x.d * y.d, [x, y](const Bindings& b) { return x.f(b) * y.f(b); }};
      }
      default: {  // positive divisors: a constant or a symbol (bound >= 1)
        Expr y = rng() % 2 ? leaf() : Expr{Dim(2 + static_cast<int64_t>(rng() % 4)), {}};
        if (!y.f) {
          int64_t v = y.d.value();
          y.f = [v](const Bindings&) { return v; };
        }
        return {x.d / y.d, [x, y](const Bindings& b) { return floor_div(x.f(b), y.f(b)); }};
      }
    }
  };
  int checked = 0;
  for (int i = 0; i < 3000; ++i) {
    Expr e = gen(3);  // degree <= 8: within the polynomial caps
    Dim back = e.d.is_static() ? e.d : P(e.d.str());
    EXPECT_EQ(back, e.d) << e.d.str();
    for (int j = 0; j < 6; ++j) {
      Bindings b = {{"A", 1 + static_cast<int64_t>(rng() % 9)},
                    {"B", 1 + static_cast<int64_t>(rng() % 9)},
                    {"C", 1 + static_cast<int64_t>(rng() % 9)}};
      ASSERT_EQ(e.d.eval(b), e.f(b)) << e.d.str();
      ASSERT_EQ(back.eval(b), e.f(b)) << e.d.str();
      ++checked;
    }
  }
  EXPECT_EQ(checked, 18000);
}

TEST(DimExpr, PastTheCapsAPlainTreeStillEvaluates) {
  // 100 distinct divisions: more terms than a polynomial keeps.
  Dim h("H"), sum(0);
  int64_t want = 0;
  for (int k = 1; k <= 100; ++k) {
    sum = sum + h / Dim(k + 1000);
    want += 5000 / (k + 1000);
  }
  EXPECT_EQ(sum.eval({{"H", 5000}}), want);
  EXPECT_EQ(sum, sum);
}

TEST(DimExpr, LongSumsStayLinear) {
  // A sum over every tensor of a 20,000-node chain (what the planner's totals are): quadratic
  // growth would be 4e8 term operations.
  auto t0 = std::chrono::steady_clock::now();
  Dim n("N"), h("H"), acc(0);
  for (int i = 0; i < 20000; ++i) acc = acc + n * Dim(64) + (h + Dim(i)) / Dim(7);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 5.0);
  int64_t want = 0;
  for (int i = 0; i < 20000; ++i) want += 3 * 64 + (20 + i) / 7;
  EXPECT_EQ(acc.eval({{"N", 3}, {"H", 20}}), want);
}

TEST(DimExpr, GraphFilesReadExpressionsAndReshapesRoundTrip) {
  Graph g = load_graph_string(R"({"kiln": 1,
    "inputs": {"x": {"dtype": "f32", "shape": ["N", "S", 64]},
               "y": {"dtype": "f32", "shape": ["N*S", 64]}},
    "nodes": [
      {"op": "reshape", "inputs": ["x"], "outputs": ["a"], "shape": [-1, 64]},
      {"op": "add", "inputs": ["a", "y"], "outputs": ["b"]},
      {"op": "reshape", "inputs": ["b"], "outputs": ["c"], "shape": ["N", "S", 64]},
      {"op": "reshape", "inputs": ["b"], "outputs": ["d"], "shape": ["S", "N", 64]}],
    "outputs": ["c", "d"]})",
                              "rt.json");
  EXPECT_EQ(shape_str(g.desc(Tensor{g.find("a")}).shape), "[N*S, 64]");
  EXPECT_EQ(shape_str(g.desc(Tensor{g.find("c")}).shape), "[N, S, 64]");
  Graph back = load_graph_string(save_graph_string(g), "back.json");
  EXPECT_EQ(shape_str(back.desc(Tensor{back.find("y")}).shape), "[N*S, 64]");
  EXPECT_NE(user_error([] {
              load_graph_string(R"({"kiln": 1, "inputs": {"x": {"dtype": "f32",
                "shape": ["N+"]}}, "nodes": [], "outputs": ["x"]})",
                                "bad.json");
            }).find("bad.json: inputs.x.shape[0]: cannot read dim 'N+'"),
            std::string::npos);
  EXPECT_NE(user_error([] {
              load_graph_string(R"({"kiln": 1, "inputs": {"x": {"dtype": "f32",
                "shape": ["2-3"]}}, "nodes": [], "outputs": ["x"]})",
                                "bad.json");
            }).find("inputs.x.shape[0]: '2-3' is -1: a dim must be positive"),
            std::string::npos);
}
