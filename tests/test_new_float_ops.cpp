// The floating-point ops added for real models (hardswish, hardsigmoid, mish, sin, cos, the tanh
// gelu, prelu, log_softmax, reduce_l2, reduce_prod, cumsum): the CPU reference against
// hand-computed values, edge values included (hardswish at -3 and 3, mish at large |x|,
// log_softmax of large inputs), and the located errors of bad nodes.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "kiln/error.hpp"
#include "kiln/reference.hpp"
#include "tests/user_error.hpp"

using namespace kiln;

namespace {

using Dims = std::vector<int64_t>;
using Vals = std::vector<double>;

HostTensor host(Dims shape, const Vals& v) {
  return HostTensor::from_f64(DType::F32, std::move(shape), v, Layout::NCHW);
}

// Runs `g` (one f32 input "x") on `x` and returns output tensor `y` in row-major order.
Vals run(const Graph& g, Tensor y, Dims shape, const Vals& x) {
  auto out = run_reference(g, {{"x", host(std::move(shape), x)}});
  return out.at(g.tensor(y).name).to_f64();
}

// One unary op over the values `x` (a 1-D input).
Vals unary(const std::string& op, const Vals& x, const Attrs& attrs = {}) {
  Graph g;
  Tensor in = g.input("x", DType::F32, {static_cast<int64_t>(x.size())});
  Tensor y = g.add_node1(op, {in}, attrs);
  g.output(y);
  return run(g, y, {static_cast<int64_t>(x.size())}, x);
}

void expect_near_all(const Vals& got, const Vals& want, double rel) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << "[" << i << "]";
    EXPECT_NEAR(got[i], want[i], rel * (1.0 + std::fabs(want[i]))) << "[" << i << "]";
  }
}

TEST(NewFloatOps, HardswishIsExactAtTheKinks) {
  Vals got = unary("hardswish", {-4, -3, -1.5, 0, 1, 3, 4});
  EXPECT_EQ(got, (Vals{0, 0, -0.375, 0, static_cast<float>(4.0 / 6.0), 3, 4}));
}

TEST(NewFloatOps, HardsigmoidOnnxDefaultsAndPytorchAlpha) {
  expect_near_all(unary("hardsigmoid", {-3, -2.5, 0, 1, 2.5, 3}), {0, 0, 0.5, 0.7, 1, 1}, 1e-7);
  expect_near_all(unary("hardsigmoid", {-3, 0, 1, 3}, {{"alpha", 1.0 / 6.0}, {"beta", 0.5}}),
                  {0, 0.5, 4.0 / 6.0, 1}, 1e-7);
}

TEST(NewFloatOps, MishStableForLargeMagnitudes) {
  Vals got = unary("mish", {-100, -30, -1, 0, 1, 30, 100, 1e30});
  Vals want{-3.7204474227823893e-42,
            -2.807286954981114e-12,
            -0.30340147018432617,
            0,
            0.8650984168052673,
            30,
            100,
            1e30};
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << i;
    EXPECT_NEAR(got[i], want[i], 1e-6 * std::fabs(want[i])) << i;
  }
}

TEST(NewFloatOps, SinCos) {
  const double pi = 3.14159265358979;
  expect_near_all(unary("sin", {0, pi / 2, -pi / 6, 10}), {0, 1, -0.5, std::sin(10.0)}, 1e-6);
  expect_near_all(unary("cos", {0, pi, pi / 3, -10}), {1, -1, 0.5, std::cos(-10.0)}, 1e-6);
}

// The approximate attribute: a graph without it keeps the erf form.
TEST(NewFloatOps, GeluApproximations) {
  expect_near_all(unary("gelu", {1}), {0.8413447460685429}, 1e-7);
  expect_near_all(unary("gelu", {1}, {{"approximate", std::string("none")}}), {0.8413447460685429},
                  1e-7);
  expect_near_all(unary("gelu", {1}, {{"approximate", std::string("tanh")}}), {0.8411919906082768},
                  1e-7);
}

TEST(NewFloatOps, PreluPerChannelAndScalarSlope) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {1, 2, 1, 3});
  Tensor s = g.constant("s", TensorDesc{DType::F32, {2, 1, 1}, Layout::NCHW, {}},
                        host({2, 1, 1}, {0.25, 2}));
  Tensor s1 = g.constant("s1", TensorDesc{DType::F32, {1}, Layout::NCHW, {}}, host({1}, {0.5}));
  Tensor y = g.add_node1("prelu", {x, s});
  Tensor y1 = g.add_node1("prelu", {x, s1});
  g.output(y);
  g.output(y1);
  auto out = run_reference(g, {{"x", host({1, 2, 1, 3}, {-4, 0, 3, -1, 2, -0.5})}});
  EXPECT_EQ(out.at(g.tensor(y).name).to_f64(), (Vals{-1, 0, 3, -2, 2, -1}));
  EXPECT_EQ(out.at(g.tensor(y1).name).to_f64(), (Vals{-2, 0, 3, -0.5, 2, -0.25}));
}

TEST(NewFloatOps, LogSoftmaxOfLargeInputs) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {3, 3});
  Tensor y = g.add_node1("log_softmax", {x});
  g.output(y);
  // Row 2 would overflow exp() without the max; row 3's log of a softmax that underflowed to 0
  // would be -inf.
  Vals got = run(g, y, {3, 3}, {1, 2, 3, 1001, 1002, 1003, 1e4, 0, -1e4});
  Vals row{-2.4076059644443806, -1.4076059644443804, -0.4076059644443804};
  expect_near_all(got, {row[0], row[1], row[2], row[0], row[1], row[2], 0, -1e4, -2e4}, 1e-7);

  // A middle axis: the log of each column's softmax.
  Graph h;
  Tensor hx = h.input("x", DType::F32, {2, 2, 2});
  Tensor hy = h.add_node1("log_softmax", {hx}, {{"axis", int64_t{1}}});
  h.output(hy);
  Vals v = run(h, hy, {2, 2, 2}, {0, 1, 0, 3, 5, 5, 5, 5});
  const double l2 = std::log(2.0), a = std::log1p(std::exp(-2.0));
  expect_near_all(v, {-l2, -2 - a, -l2, -a, -l2, -l2, -l2, -l2}, 1e-7);
}

TEST(NewFloatOps, ReduceL2AndProd) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {2, 3});
  Tensor l2 = g.reduce("reduce_l2", x, {1});
  Tensor l2all = g.reduce("reduce_l2", x, {}, true);
  Tensor pr = g.reduce("reduce_prod", x, {0}, true);
  Tensor prall = g.reduce("reduce_prod", x, {});
  for (Tensor t : {l2, l2all, pr, prall}) g.output(t);
  auto out = run_reference(g, {{"x", host({2, 3}, {3, 4, 0, -1, 2, 2})}});
  auto get = [&](Tensor t) { return out.at(g.tensor(t).name).to_f64(); };
  EXPECT_EQ(get(l2), (Vals{5, 3}));
  expect_near_all(get(l2all), {std::sqrt(34.0)}, 1e-7);
  EXPECT_EQ(out.at(g.tensor(l2all).name).shape, (Dims{1, 1}));
  EXPECT_EQ(get(pr), (Vals{-3, 8, 0}));
  EXPECT_EQ(out.at(g.tensor(pr).name).shape, (Dims{1, 3}));
  EXPECT_EQ(get(prall), (Vals{0}));
}

// ONNX CumSum's examples: x = [1, 2, 3, 4, 5] with every combination of the flags.
TEST(NewFloatOps, CumsumFlags) {
  const Vals x{1, 2, 3, 4, 5};
  auto cs = [&](int64_t excl, int64_t rev) {
    return unary("cumsum", x, {{"axis", int64_t{0}}, {"exclusive", excl}, {"reverse", rev}});
  };
  EXPECT_EQ(cs(0, 0), (Vals{1, 3, 6, 10, 15}));
  EXPECT_EQ(cs(1, 0), (Vals{0, 1, 3, 6, 10}));
  EXPECT_EQ(cs(0, 1), (Vals{15, 14, 12, 9, 5}));
  EXPECT_EQ(cs(1, 1), (Vals{14, 12, 9, 5, 0}));
}

TEST(NewFloatOps, CumsumAlongEachAxis) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {2, 3});
  Tensor a0 = g.add_node1("cumsum", {x}, {{"axis", int64_t{0}}});
  Tensor a1 = g.add_node1("cumsum", {x}, {{"axis", int64_t{-1}}});
  g.output(a0);
  g.output(a1);
  auto out = run_reference(g, {{"x", host({2, 3}, {1, 2, 3, 4, 5, 6})}});
  EXPECT_EQ(out.at(g.tensor(a0).name).to_f64(), (Vals{1, 2, 3, 5, 7, 9}));
  EXPECT_EQ(out.at(g.tensor(a1).name).to_f64(), (Vals{1, 3, 6, 4, 9, 15}));
}

TEST(NewFloatOps, BadNodesAreLocatedUserErrors) {
  using test::user_error;
  {
    Graph g;
    Tensor x = g.input("x", DType::F32, {2, 4, 5, 5});
    Tensor s = g.input("s", DType::F32, {4});  // broadcasts along W (5), not C
    std::string e = user_error([&] { g.add_node1("prelu", {x, s}, {}, "act"); });
    EXPECT_NE(e.find("node 'act' (prelu): "), std::string::npos) << e;
    EXPECT_NE(e.find("slope 's' [4] does not broadcast to input 'x' [2, 4, 5, 5]"),
              std::string::npos)
        << e;
    // The input never broadcasts to the slope.
    Tensor big = g.input("big", DType::F32, {3, 2, 4, 5, 5});
    e = user_error([&] { g.add_node1("prelu", {x, big}); });
    EXPECT_NE(e.find("does not broadcast to input 'x'"), std::string::npos) << e;
  }
  {
    Graph g;
    Tensor x = g.input("x", DType::F32, {2, 3});
    std::string e = user_error([&] {
      g.add_node1("log_softmax", {x}, {{"axis", int64_t{2}}}, "lsm");
    });
    EXPECT_NE(e.find("node 'lsm' (log_softmax).axis: axis 2 out of range for rank 2"),
              std::string::npos)
        << e;
    e = user_error([&] { g.add_node1("cumsum", {x}, {}, "cs"); });
    EXPECT_NE(e.find("node 'cs' (cumsum): missing required attribute 'axis' of op cumsum"),
              std::string::npos)
        << e;
    e = user_error([&] {
      g.add_node1("cumsum", {x}, {{"axis", int64_t{0}}, {"exclusive", int64_t{2}}}, "cs2");
    });
    EXPECT_NE(e.find("node 'cs2' (cumsum).exclusive: expected 0 or 1, found 2"), std::string::npos)
        << e;
    e = user_error([&] { g.add_node1("cumsum", {x}, {{"axis", int64_t{-3}}}, "cs3"); });
    EXPECT_NE(e.find("node 'cs3' (cumsum).axis: axis -3 out of range for rank 2"),
              std::string::npos)
        << e;
  }
}

}  // namespace
