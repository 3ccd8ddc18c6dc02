// The CPU reference executor: hand-computed numbers on tiny cases, independent naive
// implementations on randomized ones, layouts, broadcasting, dtype rounding, errors and speed.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/base/random.hpp"
#include "kiln/error.hpp"
#include "kiln/reference.hpp"
#include "engine/base/thread_pool.hpp"
#include "tests/user_error.hpp"

using namespace kiln;

namespace {

using Dims = std::vector<int64_t>;
using Vals = std::vector<double>;

TensorDesc desc(DType t, Shape s, Layout l = Layout::NCHW) {
  return TensorDesc{t, std::move(s), l, {}};
}

HostTensor host(DType t, Dims shape, const Vals& v, Layout l = Layout::NCHW) {
  return HostTensor::from_f64(t, std::move(shape), v, l);
}

int64_t count(const Dims& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Random values already representable in `t` (so a naive f64 computation sees the same inputs).
Vals rand_vals(int64_t n, uint64_t seed, DType t = DType::F32, double lo = -1, double hi = 1) {
  Vals v = random_values(false, lo, hi, seed, n);
  for (double& x : v) x = round_to(t, x);
  return v;
}

Tensor const_of(Graph& g, const std::string& name, DType t, const Dims& shape, const Vals& v) {
  return g.constant(name, desc(t, Shape(shape.begin(), shape.end())), host(t, shape, v));
}

// Runs the graph and returns output `name` in row-major logical order.
Vals run_out(const Graph& g, const std::map<std::string, HostTensor>& in, const std::string& name,
             int threads = 0) {
  ReferenceOptions o;
  o.threads = threads;
  auto out = run_reference(g, in, o);
  auto it = out.find(name);
  EXPECT_NE(it, out.end()) << name;
  if (it == out.end()) return {};
  return it->second.to_f64();
}

void expect_near_all(const Vals& got, const Vals& want, double rel, const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << what << " [" << i << "]";
    ASSERT_NEAR(got[i], want[i], rel * (1.0 + std::fabs(want[i]))) << what << " [" << i << "]";
  }
}

Vals round_all(Vals v, DType t) {
  for (double& x : v) x = round_to(t, x);
  return v;
}

using test::user_error;

// ---------------------------------------------------------------- naive implementations
struct ConvCase {
  int64_t n, c, h, w, k, r, s;
  std::array<int64_t, 2> stride{1, 1};
  std::vector<int64_t> pad{0, 0};
  std::array<int64_t, 2> dil{1, 1};
  int64_t groups = 1;
  bool bias = false;
};

// Seven loops straight from the definition.
Vals naive_conv(const ConvCase& cc, const Vals& x, const Vals& w, const Vals* b, int64_t oh_n,
                int64_t ow_n) {
  std::array<int64_t, 4> p =
      cc.pad.size() == 2 ? std::array<int64_t, 4>{cc.pad[0], cc.pad[1], cc.pad[0], cc.pad[1]}
                         : std::array<int64_t, 4>{cc.pad[0], cc.pad[1], cc.pad[2], cc.pad[3]};
  int64_t cg = cc.c / cc.groups, kg = cc.k / cc.groups;
  Vals y(static_cast<size_t>(cc.n * cc.k * oh_n * ow_n));
  for (int64_t n = 0; n < cc.n; ++n)
    for (int64_t k = 0; k < cc.k; ++k)
      for (int64_t oh = 0; oh < oh_n; ++oh)
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          double acc = b ? (*b)[k] : 0.0;
          int64_t g = k / kg;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t r = 0; r < cc.r; ++r)
              for (int64_t s = 0; s < cc.s; ++s) {
                int64_t ih = oh * cc.stride[0] - p[0] + r * cc.dil[0];
                int64_t iw = ow * cc.stride[1] - p[1] + s * cc.dil[1];
                if (ih < 0 || ih >= cc.h || iw < 0 || iw >= cc.w) continue;
                acc += x[((n * cc.c + g * cg + c) * cc.h + ih) * cc.w + iw] *
                       w[((k * cg + c) * cc.r + r) * cc.s + s];
              }
          y[((n * cc.k + k) * oh_n + oh) * ow_n + ow] = acc;
        }
  return y;
}

// out[b, m, n] over explicit batch index lists.
Vals naive_matmul(const Vals& a, const Dims& as, const Vals& b, const Dims& bs, bool ta, bool tb,
                  const Vals* bias, Dims* out_shape) {
  size_t ra = as.size(), rb = bs.size();
  int64_t M = ta ? as[ra - 1] : as[ra - 2], K = ta ? as[ra - 2] : as[ra - 1];
  int64_t N = tb ? bs[rb - 2] : bs[rb - 1];
  Dims ba(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  size_t r = std::max(ba.size(), bb.size());
  Dims ob(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i + ba.size() >= r ? ba[i + ba.size() - r] : 1;
    int64_t db = i + bb.size() >= r ? bb[i + bb.size() - r] : 1;
    ob[i] = std::max(da, db);
  }
  *out_shape = ob;
  out_shape->push_back(M);
  out_shape->push_back(N);
  int64_t nb = count(ob);
  Vals y(static_cast<size_t>(nb * M * N));
  for (int64_t bi = 0; bi < nb; ++bi) {
    // Multi-index of bi, mapped into each operand's batch dims.
    Dims idx(r);
    int64_t q = bi;
    for (int i = static_cast<int>(r) - 1; i >= 0; --i) {
      idx[i] = q % ob[i];
      q /= ob[i];
    }
    auto flat = [&](const Dims& bd) {
      int64_t f = 0;
      for (size_t i = 0; i < bd.size(); ++i) {
        int64_t id = idx[i + r - bd.size()];
        f = f * bd[i] + (bd[i] == 1 ? 0 : id);
      }
      return f;
    };
    int64_t fa = flat(ba), fb = flat(bb);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double acc = bias ? (*bias)[n] : 0.0;
        for (int64_t k = 0; k < K; ++k) {
          double av = ta ? a[fa * M * K + k * M + m] : a[fa * M * K + m * K + k];
          double bv = tb ? b[fb * K * N + n * K + k] : b[fb * K * N + k * N + n];
          acc += av * bv;
        }
        y[(bi * M + m) * N + n] = acc;
      }
  }
  return y;
}

}  // namespace

// ================================================================= conv2d
TEST(Reference, Conv2dHandComputed) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {1, 1, 3, 3});
  // Cross-correlation, not convolution: a flipped kernel would give different numbers.
  Tensor w = const_of(g, "w", DType::F32, {1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor b = const_of(g, "b", DType::F32, {1}, {1});
  g.output(g.conv2d(x, w, b));
  Tensor ones = const_of(g, "ones", DType::F32, {1, 1, 3, 3}, Vals(9, 1.0));
  Tensor same = g.conv2d(x, ones, {}, {.padding = {1, 1}});
  g.output(same);
  Tensor strided = g.conv2d(x, ones, {}, {.stride = {2, 2}, .padding = {1, 1}});
  g.output(strided);
  std::map<std::string, HostTensor> in{
      {"x", host(DType::F32, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})}};
  auto out = run_reference(g, in);
  EXPECT_EQ(out.at(g.tensor(g.outputs()[0]).name).to_f64(), (Vals{38, 48, 68, 78}));
  EXPECT_EQ(out.at(g.tensor(same).name).to_f64(), (Vals{12, 21, 16, 27, 45, 33, 24, 39, 28}));
  EXPECT_EQ(out.at(g.tensor(strided).name).to_f64(), (Vals{12, 16, 24, 28}));
}

TEST(Reference, Conv2dAsymmetricPaddingHandComputed) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {1, 1, 2, 2});
  Tensor w = const_of(g, "w", DType::F32, {1, 1, 2, 2}, {1, 10, 100, 1000});
  // Pad top 1, left 0, bottom 0, right 1: output 2x2.
  g.output(g.conv2d(x, w, {}, {.padding = {1, 0, 0, 1}}));
  Vals y = run_out(g, {{"x", host(DType::F32, {1, 1, 2, 2}, {1, 2, 3, 4})}},
                   g.tensor(g.outputs()[0]).name);
  // Windows: rows {-1,0} x cols {0,1}; rows {-1,0} x cols {1,2}; rows {0,1} x ...
  EXPECT_EQ(y, (Vals{100 * 1 + 1000 * 2, 100 * 2, 1 + 10 * 2 + 100 * 3 + 1000 * 4, 2 + 100 * 4}));
}

TEST(Reference, Conv2dRandomizedAgainstNaive) {
  std::vector<ConvCase> cases = {
      {2, 3, 9, 9, 4, 3, 3, {1, 1}, {1, 1}},
      {1, 5, 8, 7, 7, 3, 3, {2, 2}, {1, 1}},                          // odd C and K, stride 2
      {1, 4, 10, 9, 6, 3, 2, {2, 1}, {0, 1, 2, 1}, {1, 1}, 1, true},  // asymmetric pad
      {1, 4, 11, 11, 4, 3, 3, {1, 1}, {2, 2}, {2, 2}},                // dilation
      {1, 4, 12, 10, 5, 3, 3, {1, 2}, {1, 0}, {2, 1}},                // mixed dilation/stride
      {2, 8, 6, 6, 12, 3, 3, {1, 1}, {1, 1}, {1, 1}, 4, true},        // groups
      {1, 6, 7, 7, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 6, true},         // depthwise
      {1, 6, 7, 7, 12, 3, 3, {2, 2}, {1, 1}, {1, 1}, 6},              // depthwise, multiplier 2
      {1, 16, 5, 5, 8, 1, 1},                                         // 1x1
      {1, 16, 6, 6, 8, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, true},        // 1x1 stride 2
      {1, 3, 23, 23, 8, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, true},       // C=3 7x7 s2 stem
      {3, 7, 5, 6, 9, 5, 4, {1, 1}, {2, 1, 0, 3}},                    // odd everything
  };
  int seed = 100;
  for (const ConvCase& cc : cases) {
    SCOPED_TRACE(::testing::Message() << "case n=" << cc.n << " c=" << cc.c << " k=" << cc.k
                                      << " r=" << cc.r << " groups=" << cc.groups);
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N", cc.c, cc.h, cc.w});
    Dims wshape{cc.k, cc.c / cc.groups, cc.r, cc.s};
    Vals wv = rand_vals(count(wshape), ++seed), bv = rand_vals(cc.k, ++seed);
    Tensor w = const_of(g, "w", DType::F32, wshape, wv);
    Tensor b = cc.bias ? const_of(g, "b", DType::F32, {cc.k}, bv) : Tensor{};
    Tensor y = g.conv2d(
        x, w, b, {.stride = cc.stride, .padding = cc.pad, .dilation = cc.dil, .groups = cc.groups});
    g.output(y);
    Dims xs{cc.n, cc.c, cc.h, cc.w};
    Vals xv = rand_vals(count(xs), ++seed);
    Bindings bind{{"N", cc.n}};
    int64_t oh = g.desc(y).shape[2].eval(bind), ow = g.desc(y).shape[3].eval(bind);
    Vals want = round_all(naive_conv(cc, xv, wv, cc.bias ? &bv : nullptr, oh, ow), DType::F32);
    Vals got = run_out(g, {{"x", host(DType::F32, xs, xv)}}, g.tensor(y).name);
    expect_near_all(got, want, 1e-6);
    // One thread gives the very same numbers.
    EXPECT_EQ(run_out(g, {{"x", host(DType::F32, xs, xv)}}, g.tensor(y).name, 1), got);
  }
}

TEST(Reference, Conv2dNhwcAndNchwAgree) {
  Vals xv = rand_vals(2 * 5 * 6 * 7, 1), wv = rand_vals(4 * 5 * 3 * 3, 2);
  Vals results[2];
  for (int nhwc = 0; nhwc < 2; ++nhwc) {
    Layout l = nhwc ? Layout::NHWC : Layout::NCHW;
    Graph g;
    Tensor x = g.input("x", DType::F32, {2, 5, 6, 7}, l);
    Tensor w =
        g.constant("w", desc(DType::F32, {4, 5, 3, 3}, l), host(DType::F32, {4, 5, 3, 3}, wv));
    Tensor y = g.relu(g.conv2d(x, w, {}, {.padding = {1, 1}}));
    g.output(y);
    // The caller's tensor is laid out as declared; the output comes back in the same layout.
    auto out = run_reference(g, {{"x", host(DType::F32, {2, 5, 6, 7}, xv, l)}});
    const HostTensor& ht = out.at(g.tensor(y).name);
    EXPECT_EQ(ht.strides, layout_strides({2, 4, 6, 7}, l));
    results[nhwc] = ht.to_f64();
    // An input in any strides is read by its logical shape.
    auto out2 = run_reference(
        g, {{"x",
             host(DType::F32, {2, 5, 6, 7}, xv, l).relayout(nhwc ? Layout::NCHW : Layout::NHWC)}});
    EXPECT_EQ(out2.at(g.tensor(y).name).to_f64(), results[nhwc]);
  }
  EXPECT_EQ(results[0], results[1]);
}

// ================================================================= matmul
TEST(Reference, MatmulHandComputed) {
  Graph g;
  Tensor a = g.input("a", DType::F32, {2, 2});
  Tensor b = const_of(g, "b", DType::F32, {2, 2}, {5, 6, 7, 8});
  Tensor bias = const_of(g, "bias", DType::F32, {2}, {1, -1});
  Tensor y = g.matmul(a, b, bias);
  Tensor yt = g.matmul(a, b, {}, true, true);  // a^T b^T
  g.output(y);
  g.output(yt);
  auto out = run_reference(g, {{"a", host(DType::F32, {2, 2}, {1, 2, 3, 4})}});
  EXPECT_EQ(out.at(g.tensor(y).name).to_f64(), (Vals{20, 21, 44, 49}));
  // a^T = [[1,3],[2,4]], b^T = [[5,7],[6,8]]
  EXPECT_EQ(out.at(g.tensor(yt).name).to_f64(),
            (Vals{1 * 5 + 3 * 6, 1 * 7 + 3 * 8, 2 * 5 + 4 * 6, 2 * 7 + 4 * 8}));
}

TEST(Reference, MatmulRandomizedAgainstNaive) {
  struct Case {
    Dims a, b;
    bool ta, tb, bias;
  };
  std::vector<Case> cases = {
      {{5, 7}, {7, 3}, false, false, false},
      {{7, 5}, {7, 3}, true, false, true},
      {{5, 7}, {3, 7}, false, true, false},
      {{7, 5}, {3, 7}, true, true, true},
      {{2, 3, 4, 5}, {2, 3, 5, 6}, false, false, true},  // batched
      {{2, 1, 4, 5}, {3, 5, 6}, false, false, false},    // broadcast batch
      {{3, 6, 5}, {5, 6}, false, false, true},           // rank-2 B against batched A
      {{5, 9}, {4, 3, 9, 2}, false, false, false},       // rank-2 A against batched B
      {{2, 5, 3}, {1, 7, 5}, true, true, false},         // broadcast + both transposes
      {{3, 9, 4}, {3, 4, 700}, false, false, true},      // wide N (crosses column blocks)
      {{1, 1}, {1, 1}, false, false, false},
  };
  int seed = 500;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "case a rank " << c.a.size() << " b rank " << c.b.size()
                                      << " ta=" << c.ta << " tb=" << c.tb);
    Graph g;
    Tensor a = g.input("a", DType::F32, Shape(c.a.begin(), c.a.end()));
    Tensor b = g.input("b", DType::F32, Shape(c.b.begin(), c.b.end()));
    int64_t n = c.tb ? c.b[c.b.size() - 2] : c.b.back();
    Vals biasv = rand_vals(n, ++seed);
    Tensor bias = c.bias ? const_of(g, "bias", DType::F32, {n}, biasv) : Tensor{};
    Tensor y = g.matmul(a, b, bias, c.ta, c.tb);
    g.output(y);
    Vals av = rand_vals(count(c.a), ++seed), bv = rand_vals(count(c.b), ++seed);
    Dims os;
    Vals want = round_all(
        naive_matmul(av, c.a, bv, c.b, c.ta, c.tb, c.bias ? &biasv : nullptr, &os), DType::F32);
    EXPECT_EQ(eval_shape(g.desc(y).shape, {}), os);
    Vals got = run_out(g, {{"a", host(DType::F32, c.a, av)}, {"b", host(DType::F32, c.b, bv)}},
                       g.tensor(y).name);
    expect_near_all(got, want, 1e-6);
  }
}

// ================================================================= pointwise
TEST(Reference, PointwiseFromOpTable) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {5});
  std::map<std::string, Tensor> outs{
      {"relu", g.relu(x)},
      {"neg", g.neg(x)},
      {"abs", g.abs(x)},
      {"clamp", g.clamp(x, -1, 0.5)},
      {"leaky", g.leaky_relu(x, 0.1)},
      {"sigmoid", g.sigmoid(x)},
      {"sq", g.mul(x, x)},
  };
  for (auto& [k, t] : outs) g.output(t);
  auto out = run_reference(g, {{"x", host(DType::F32, {5}, {-2, -0.5, 0, 0.5, 2})}});
  auto get = [&](const std::string& k) { return out.at(g.tensor(outs.at(k)).name).to_f64(); };
  EXPECT_EQ(get("relu"), (Vals{0, 0, 0, 0.5, 2}));
  EXPECT_EQ(get("neg"), (Vals{2, 0.5, 0, -0.5, -2}));
  EXPECT_EQ(get("abs"), (Vals{2, 0.5, 0, 0.5, 2}));
  EXPECT_EQ(get("clamp"), (Vals{-1, -0.5, 0, 0.5, 0.5}));
  EXPECT_EQ(get("sq"), (Vals{4, 0.25, 0, 0.25, 4}));
  expect_near_all(get("leaky"), {-0.2, -0.05, 0, 0.5, 2}, 1e-7);
  expect_near_all(get("sigmoid"), {0.119202922, 0.377540669, 0.5, 0.622459331, 0.880797078}, 1e-7);
}

TEST(Reference, BroadcastingHandComputed) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {2, 3});
  Tensor s = const_of(g, "s", DType::F32, {}, {10});
  Tensor row = const_of(g, "row", DType::F32, {3}, {100, 200, 300});
  Tensor col = const_of(g, "col", DType::F32, {2, 1}, {1000, 2000});
  Tensor ys = g.add(x, s), yr = g.sub(row, x), yc = g.mul(x, col);
  Tensor outer = g.add(col, row);  // [2,1] + [3] -> [2,3], both broadcast
  for (Tensor t : {ys, yr, yc, outer}) g.output(t);
  auto out = run_reference(g, {{"x", host(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6})}});
  auto get = [&](Tensor t) { return out.at(g.tensor(t).name).to_f64(); };
  EXPECT_EQ(get(ys), (Vals{11, 12, 13, 14, 15, 16}));
  EXPECT_EQ(get(yr), (Vals{99, 198, 297, 96, 195, 294}));
  EXPECT_EQ(get(yc), (Vals{1000, 2000, 3000, 8000, 10000, 12000}));
  EXPECT_EQ(get(outer), (Vals{1100, 1200, 1300, 2100, 2200, 2300}));
}

TEST(Reference, BroadcastingChannelShapesAgainstNaive) {
  const Dims xs{2, 3, 4, 5};
  Vals xv = rand_vals(count(xs), 7);
  // [1,C,1,1], [C,1,1], [W], [], [N,1,H,1]
  std::vector<Dims> shapes = {{1, 3, 1, 1}, {3, 1, 1}, {5}, {}, {2, 1, 4, 1}};
  int seed = 40;
  for (const Dims& bs : shapes) {
    Graph g;
    Tensor x = g.input("x", DType::F32, {2, 3, 4, 5}, Layout::NHWC);
    Vals bv = rand_vals(count(bs), ++seed);
    Tensor b = const_of(g, "b", DType::F32, bs, bv);
    Tensor y = g.div(x, g.add(b, const_of(g, "two", DType::F32, {}, {2})));
    g.output(y);
    Vals want(count(xs));
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t h = 0; h < 4; ++h)
          for (int64_t w = 0; w < 5; ++w) {
            Dims full{n, c, h, w};
            int64_t off = 0;
            size_t lead = 4 - bs.size();
            for (size_t d = 0; d < bs.size(); ++d)
              off = off * bs[d] + (bs[d] == 1 ? 0 : full[lead + d]);
            int64_t i = ((n * 3 + c) * 4 + h) * 5 + w;
            want[i] = round_to(DType::F32, xv[i] / round_to(DType::F32, bv[off] + 2));
          }
    EXPECT_EQ(run_out(g, {{"x", host(DType::F32, xs, xv, Layout::NHWC)}}, g.tensor(y).name), want)
        << "broadcast shape rank " << bs.size();
  }
}

// ================================================================= norms and softmax
TEST(Reference, BatchnormHandComputed) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {1, 2, 1, 2});
  Tensor y = g.batchnorm(x, const_of(g, "scale", DType::F32, {2}, {2, 1}),
                         const_of(g, "bias", DType::F32, {2}, {0, 1}),
                         const_of(g, "mean", DType::F32, {2}, {1, 3}),
                         const_of(g, "var", DType::F32, {2}, {4, 1}), 0.0);
  g.output(y);
  EXPECT_EQ(run_out(g, {{"x", host(DType::F32, {1, 2, 1, 2}, {1, 2, 3, 4})}}, g.tensor(y).name),
            (Vals{0, 1, 1, 2}));
}

TEST(Reference, LayernormRmsnormHandComputed) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {2, 4});
  Tensor ln = g.layernorm(x, {}, {}, -1, 0.0);
  Tensor lns = g.layernorm(x, const_of(g, "sc", DType::F32, {4}, {1, 2, 3, 4}),
                           const_of(g, "bi", DType::F32, {4}, {0, 0, 0, 1}), 1, 0.0);
  Tensor rms = g.rmsnorm(x, const_of(g, "rs", DType::F32, {4}, {1, 2, 1, 0.5}), -1, 0.0);
  Tensor all = g.layernorm(x, {}, {}, 0, 0.0);  // over both dims
  for (Tensor t : {ln, lns, rms, all}) g.output(t);
  auto out = run_reference(g, {{"x", host(DType::F32, {2, 4}, {1, 2, 3, 4, 10, 10, 10, 14})}});
  auto get = [&](Tensor t) { return out.at(g.tensor(t).name).to_f64(); };
  // Row 1: mean 2.5, var 1.25; row 2: mean 11, var 3.
  const double a = 1.341640786, b = 0.447213595, c = 0.577350269;
  expect_near_all(get(ln), {-a, -b, b, a, -c, -c, -c, 3 * c}, 1e-7);
  expect_near_all(get(lns), {-a, -2 * b, 3 * b, 4 * a + 1, -c, -2 * c, -3 * c, 4 * 3 * c + 1},
                  1e-7);
  // mean(x^2): 7.5 and 124
  const double r1 = 1 / std::sqrt(7.5), r2 = 1 / std::sqrt(124.0);
  expect_near_all(get(rms), {r1, 4 * r1, 3 * r1, 2 * r1, 10 * r2, 20 * r2, 10 * r2, 7 * r2}, 1e-7);
  // Over all 8 values: mean 6.75, var = mean(x^2) - 6.75^2 = 65.75 - 45.5625 = 20.1875
  const double s = std::sqrt(20.1875);
  Vals want;
  for (double v : {1, 2, 3, 4, 10, 10, 10, 14}) want.push_back((v - 6.75) / s);
  expect_near_all(get(all), want, 1e-7);
}

TEST(Reference, GroupnormInstancenormHandComputed) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {1, 4, 1, 2});
  Tensor gn = g.groupnorm(x, 2, const_of(g, "sc", DType::F32, {4}, {1, 1, 2, 2}),
                          const_of(g, "bi", DType::F32, {4}, {0, 0, 0, 5}), 0.0);
  g.output(gn);
  auto out =
      run_reference(g, {{"x", host(DType::F32, {1, 4, 1, 2}, {1, 2, 3, 4, 10, 10, 10, 14})}});
  const double a = 1.341640786, b = 0.447213595, c = 0.577350269;
  // Group 0 = channels {0,1} = [1,2,3,4]; group 1 = channels {2,3} = [10,10,10,14].
  expect_near_all(out.at(g.tensor(gn).name).to_f64(),
                  {-a, -b, b, a, -2 * c, -2 * c, -2 * c + 5, 6 * c + 5}, 1e-7);
  // instancenorm: each channel's pair (a, b) -> (-1, 1) or (1, -1), then the affine.
  Graph g2;
  Tensor x2 = g2.input("x", DType::F32, {1, 4, 1, 2});
  Tensor in = g2.instancenorm(x2, const_of(g2, "sc", DType::F32, {4}, {1, 2, 3, 4}),
                              const_of(g2, "bi", DType::F32, {4}, {0, 0, 1, 0}), 0.0);
  g2.output(in);
  expect_near_all(run_out(g2, {{"x", host(DType::F32, {1, 4, 1, 2}, {1, 2, 3, 4, 10, 12, 7, 3})}},
                          g2.tensor(in).name),
                  {-1, 1, -2, 2, -2, 4, 4, -4}, 1e-7);
}

TEST(Reference, GroupnormRandomizedAgainstNaive) {
  const Dims xs{2, 6, 3, 5};
  Vals xv = rand_vals(count(xs), 77), sv = rand_vals(6, 78), bv = rand_vals(6, 79);
  for (int64_t groups : {1, 2, 3, 6}) {
    Graph g;
    Tensor x = g.input("x", DType::F32, {2, 6, 3, 5}, Layout::NHWC);
    Tensor y = g.groupnorm(x, groups, const_of(g, "s", DType::F32, {6}, sv),
                           const_of(g, "b", DType::F32, {6}, bv), 1e-5);
    g.output(y);
    Vals want(xv.size());
    int64_t cg = 6 / groups, inner = 15;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t gi = 0; gi < groups; ++gi) {
        double sum = 0, sq = 0;
        for (int64_t c = gi * cg; c < (gi + 1) * cg; ++c)
          for (int64_t i = 0; i < inner; ++i) {
            double v = xv[(n * 6 + c) * inner + i];
            sum += v;
            sq += v * v;
          }
        double m = sum / (cg * inner), var = sq / (cg * inner) - m * m;
        for (int64_t c = gi * cg; c < (gi + 1) * cg; ++c)
          for (int64_t i = 0; i < inner; ++i) {
            int64_t j = (n * 6 + c) * inner + i;
            want[j] = round_to(DType::F32, (xv[j] - m) / std::sqrt(var + 1e-5) * sv[c] + bv[c]);
          }
      }
    expect_near_all(run_out(g, {{"x", host(DType::F32, xs, xv, Layout::NHWC)}}, g.tensor(y).name),
                    want, 1e-6, fmt::format("groups {}", groups));
  }
}

TEST(Reference, SoftmaxHandComputedAndRowsSumToOne) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {2, 3});
  Tensor y = g.softmax(x);
  g.output(y);
  // The second row would overflow exp() without subtracting the max.
  Vals got =
      run_out(g, {{"x", host(DType::F32, {2, 3}, {1, 2, 3, 1001, 1002, 1003})}}, g.tensor(y).name);
  Vals row{0.090030573, 0.244728471, 0.665240956};
  expect_near_all(got, {row[0], row[1], row[2], row[0], row[1], row[2]}, 1e-7);

  Graph g2;
  Tensor x2 = g2.input("x", DType::F32, {3, 7, 4});
  Tensor y2 = g2.softmax(x2, 1);  // a middle axis: strided rows
  g2.output(y2);
  Vals v = rand_vals(84, 5, DType::F32, -5, 5);
  Vals p = run_out(g2, {{"x", host(DType::F32, {3, 7, 4}, v)}}, g2.tensor(y2).name);
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t i = 0; i < 4; ++i) {
      double s = 0, mx = -1e9;
      for (int64_t d = 0; d < 7; ++d) mx = std::max(mx, v[(o * 7 + d) * 4 + i]);
      for (int64_t d = 0; d < 7; ++d) s += std::exp(v[(o * 7 + d) * 4 + i] - mx);
      double total = 0;
      for (int64_t d = 0; d < 7; ++d) {
        double e = std::exp(v[(o * 7 + d) * 4 + i] - mx) / s;
        EXPECT_NEAR(p[(o * 7 + d) * 4 + i], e, 1e-7);
        total += p[(o * 7 + d) * 4 + i];
      }
      EXPECT_NEAR(total, 1.0, 1e-6);
    }
}

// ================================================================= pools and reductions
TEST(Reference, PoolsHandComputed) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {1, 1, 3, 3});
  Pool2dOptions o{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
  Tensor mx = g.maxpool2d(x, o);
  Tensor avg = g.avgpool2d(x, o);
  Tensor avg_inc = g.add_node1("avgpool2d", {x},
                               {{"kernel", Dims{3, 3}},
                                {"stride", Dims{2, 2}},
                                {"padding", Dims{1, 1}},
                                {"count_include_pad", int64_t{1}}});
  Tensor mx2 = g.maxpool2d(x, {.kernel = {2, 2}, .stride = {1, 1}});
  Tensor gap = g.global_avgpool(x);
  for (Tensor t : {mx, avg, avg_inc, mx2, gap}) g.output(t);
  // Negative values: padding must not act as a zero for max pooling.
  auto out = run_reference(
      g, {{"x", host(DType::F32, {1, 1, 3, 3}, {-1, -2, -3, -4, -5, -6, -7, -8, -9})}});
  auto get = [&](Tensor t) { return out.at(g.tensor(t).name).to_f64(); };
  EXPECT_EQ(get(mx), (Vals{-1, -2, -4, -5}));
  EXPECT_EQ(get(avg), (Vals{-3, -4, -6, -7}));  // 12/4, 16/4, 24/4, 28/4
  expect_near_all(get(avg_inc), {-12.0 / 9, -16.0 / 9, -24.0 / 9, -28.0 / 9}, 1e-7);
  EXPECT_EQ(get(mx2), (Vals{-1, -2, -4, -5}));
  EXPECT_EQ(get(gap), (Vals{-5}));
}

TEST(Reference, PoolsAsymmetricPaddingAndChannels) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {1, 2, 2, 3});
  // Pad bottom/right only: windows [0,2)x[0,2), [0,2)x[2,4), [2,4)... -> output 1x2 (H:
  // (2+0-2)/2+1)
  Tensor mx = g.maxpool2d(x, {.kernel = {2, 2}, .stride = {2, 2}, .padding = {0, 0, 0, 1}});
  Tensor avg = g.avgpool2d(x, {.kernel = {2, 2}, .stride = {2, 2}, .padding = {0, 0, 0, 1}});
  g.output(mx);
  g.output(avg);
  auto out = run_reference(
      g, {{"x", host(DType::F32, {1, 2, 2, 3}, {1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60})}});
  EXPECT_EQ(out.at(g.tensor(mx).name).to_f64(), (Vals{5, 6, 50, 60}));
  EXPECT_EQ(out.at(g.tensor(avg).name).to_f64(), (Vals{3, 4.5, 30, 45}));
}

TEST(Reference, ReductionsHandComputed) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {2, 3});
  Tensor s1 = g.reduce("reduce_sum", x, {1});
  Tensor s1k = g.reduce("reduce_sum", x, {-1}, true);
  Tensor m0 = g.reduce("reduce_mean", x, {0});
  Tensor mx = g.reduce("reduce_max", x, {});
  Tensor mn = g.reduce("reduce_min", x, {-1}, true);
  for (Tensor t : {s1, s1k, m0, mx, mn}) g.output(t);
  auto out = run_reference(g, {{"x", host(DType::F32, {2, 3}, {1, 5, 3, 4, 2, 6})}});
  auto get = [&](Tensor t) { return out.at(g.tensor(t).name); };
  EXPECT_EQ(get(s1).to_f64(), (Vals{9, 12}));
  EXPECT_EQ(get(s1).shape, (Dims{2}));
  EXPECT_EQ(get(s1k).shape, (Dims{2, 1}));
  EXPECT_EQ(get(s1k).to_f64(), (Vals{9, 12}));
  EXPECT_EQ(get(m0).to_f64(), (Vals{2.5, 3.5, 4.5}));
  EXPECT_EQ(get(mx).shape, (Dims{}));
  EXPECT_EQ(get(mx).to_f64(), (Vals{6}));
  EXPECT_EQ(get(mn).to_f64(), (Vals{1, 2}));
}

TEST(Reference, ReductionsRandomizedAgainstNaive) {
  const Dims xs{3, 4, 5};
  Vals xv = rand_vals(60, 11);
  for (bool keep : {false, true}) {
    Graph g;
    Tensor x = g.input("x", DType::F32, {3, 4, 5});
    Tensor s = g.reduce("reduce_sum", x, {0, 2}, keep);
    Tensor m = g.reduce("reduce_max", x, {2, 0}, keep);
    g.output(s);
    g.output(m);
    auto out = run_reference(g, {{"x", host(DType::F32, xs, xv)}});
    Vals ws(4, 0), wm(4, -1e9);
    for (int64_t a = 0; a < 3; ++a)
      for (int64_t b = 0; b < 4; ++b)
        for (int64_t c = 0; c < 5; ++c) {
          ws[b] += xv[(a * 4 + b) * 5 + c];
          wm[b] = std::max(wm[b], xv[(a * 4 + b) * 5 + c]);
        }
    expect_near_all(out.at(g.tensor(s).name).to_f64(), round_all(ws, DType::F32), 1e-7);
    EXPECT_EQ(out.at(g.tensor(m).name).to_f64(), wm);
    EXPECT_EQ(out.at(g.tensor(s).name).shape, keep ? (Dims{1, 4, 1}) : (Dims{4}));
  }
}

// ================================================================= movement
TEST(Reference, ReshapeTransposeHandComputed) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 3});
  Tensor t = g.transpose(x, {1, 0});
  Tensor r = g.reshape(x, {3, -1});
  Tensor rt = g.transpose(g.reshape(x, {1, "N", 3}), {2, 0, 1});
  for (Tensor o : {t, r, rt}) g.output(o);
  auto out = run_reference(g, {{"x", host(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6})}});
  EXPECT_EQ(out.at(g.tensor(t).name).to_f64(), (Vals{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(out.at(g.tensor(t).name).shape, (Dims{3, 2}));
  EXPECT_EQ(out.at(g.tensor(r).name).to_f64(), (Vals{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(out.at(g.tensor(r).name).shape, (Dims{3, 2}));
  EXPECT_EQ(out.at(g.tensor(rt).name).shape, (Dims{3, 1, 2}));
  EXPECT_EQ(out.at(g.tensor(rt).name).to_f64(), (Vals{1, 4, 2, 5, 3, 6}));
}

TEST(Reference, TransposeRandomizedAgainstNaive) {
  Vals xv = rand_vals(2 * 3 * 4 * 5, 3);
  Graph g;
  Tensor x = g.input("x", DType::F32, {2, 3, 4, 5});
  Tensor y = g.transpose(x, {2, 0, 3, 1});  // -> [4, 2, 5, 3]
  g.output(y);
  Vals got = run_out(g, {{"x", host(DType::F32, {2, 3, 4, 5}, xv)}}, g.tensor(y).name);
  ASSERT_EQ(got.size(), xv.size());
  for (int64_t a = 0; a < 4; ++a)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t c = 0; c < 5; ++c)
        for (int64_t d = 0; d < 3; ++d)
          EXPECT_EQ(got[((a * 2 + b) * 5 + c) * 3 + d], xv[((b * 3 + d) * 4 + a) * 5 + c]);
}

// ================================================================= dtype rounding
TEST(Reference, IntermediatesRoundToTheirDtype) {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    Graph g;
    Tensor a = g.input("a", t, {2});
    Tensor b = g.input("b", t, {2});
    Tensor y = g.sub(g.add(a, b), b);  // (a + b) - b
    g.output(y);
    Vals got = run_out(g, {{"a", host(t, {2}, {0.25, 3})}, {"b", host(t, {2}, {1024, 1024})}},
                       g.tensor(y).name);
    if (t == DType::F32) {
      EXPECT_EQ(got, (Vals{0.25, 3}));
    } else if (t == DType::F16) {
      // f16 spacing at 1024 is 1: 1024.25 -> 1024, 1027 stays.
      EXPECT_EQ(got, (Vals{0, 3}));
    } else {
      // bf16 spacing at 1024 is 8: 1024.25 -> 1024, 1027 -> 1024.
      EXPECT_EQ(got, (Vals{0, 0}));
    }
  }
  // A cast through f16 loses what f16 cannot hold; the f32 output keeps the rounded value.
  Graph g;
  Tensor x = g.input("x", DType::F32, {2});
  Tensor y = g.cast(g.cast(x, DType::F16), DType::F32);
  g.output(y);
  EXPECT_EQ(run_out(g, {{"x", host(DType::F32, {2}, {1.0 + 1.0 / 4096, 70000})}}, g.tensor(y).name),
            (Vals{1.0, INFINITY}));
}

TEST(Reference, F16ConvOutputIsRoundedOnce) {
  // The conv accumulates exactly and rounds the result once to f16 (like a GPU kernel writing it).
  Graph g;
  Tensor x = g.input("x", DType::F16, {1, 3, 1, 1});
  Tensor w = const_of(g, "w", DType::F16, {1, 3, 1, 1}, {1, 1, 1});
  Tensor y = g.conv2d(x, w);
  g.output(y);
  // 2048 + 1 + 1 = 2050 exactly (spacing 2); summing in f16 pairwise would give 2048.
  EXPECT_EQ(run_out(g, {{"x", host(DType::F16, {1, 3, 1, 1}, {2048, 1, 1})}}, g.tensor(y).name),
            (Vals{2050}));
}

// ================================================================= errors
TEST(Reference, InputErrorsAreLocatedUserErrors) {
  Graph g("net");
  Tensor x = g.input("x", DType::F16, {"N", 4});
  Tensor b = g.input("bias", DType::F16, {4});
  g.output(g.add(x, b));
  HostTensor good_x = host(DType::F16, {2, 4}, Vals(8, 1));
  HostTensor good_b = host(DType::F16, {4}, Vals(4, 1));

  std::string e = user_error([&] { run_reference(g, {{"x", good_x}}); });
  EXPECT_NE(e.find("input 'bias'"), std::string::npos) << e;
  EXPECT_NE(e.find("not given"), std::string::npos) << e;

  e = user_error([&] {
    run_reference(g, {{"x", host(DType::F32, {2, 4}, Vals(8, 1))}, {"bias", good_b}});
  });
  EXPECT_NE(e.find("input 'x'"), std::string::npos) << e;
  EXPECT_NE(e.find("f16"), std::string::npos) << e;
  EXPECT_NE(e.find("f32"), std::string::npos) << e;

  e = user_error([&] {
    run_reference(g, {{"x", good_x}, {"bias", host(DType::F16, {5}, Vals(5, 1))}});
  });
  EXPECT_NE(e.find("input 'bias'"), std::string::npos) << e;
  EXPECT_NE(e.find("5"), std::string::npos) << e;

  e = user_error([&] {
    run_reference(g, {{"x", host(DType::F16, {8}, Vals(8, 1))}, {"bias", good_b}});
  });
  EXPECT_NE(e.find("input 'x'"), std::string::npos) << e;
  EXPECT_NE(e.find("rank"), std::string::npos) << e;

  e = user_error([&] { run_reference(g, {{"x", good_x}, {"bias", good_b}, {"y", good_b}}); });
  EXPECT_NE(e.find("'y' is not an input"), std::string::npos) << e;

  HostTensor short_data = good_x;
  short_data.data.resize(4);
  e = user_error([&] { run_reference(g, {{"x", short_data}, {"bias", good_b}}); });
  EXPECT_NE(e.find("input 'x'"), std::string::npos) << e;
  EXPECT_NE(e.find("bytes"), std::string::npos) << e;

  // The symbol N is bound from x: N=3 works and gives [3, 4].
  auto out = run_reference(g, {{"x", host(DType::F16, {3, 4}, Vals(12, 1))}, {"bias", good_b}});
  EXPECT_EQ(out.begin()->second.shape, (Dims{3, 4}));
  EXPECT_EQ(out.begin()->second.to_f64(), Vals(12, 2));
}

TEST(Reference, OutputsThatAreInputsOrConstantsOrReusedIntermediates) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {2});
  Tensor c = const_of(g, "c", DType::F32, {2}, {5, 6});
  Tensor r = g.relu(x);
  Tensor y = g.add(r, c);
  g.exp(x);  // dead node: computed, never returned
  g.output(x);
  g.output(c);
  g.output(r);
  g.output(y);
  auto out = run_reference(g, {{"x", host(DType::F32, {2}, {-1, 2})}});
  EXPECT_EQ(out.size(), 4u);
  EXPECT_EQ(out.at("x").to_f64(), (Vals{-1, 2}));
  EXPECT_EQ(out.at("c").to_f64(), (Vals{5, 6}));
  EXPECT_EQ(out.at(g.tensor(r).name).to_f64(), (Vals{0, 2}));
  EXPECT_EQ(out.at(g.tensor(y).name).to_f64(), (Vals{5, 8}));
}

TEST(Reference, ExplicitBindingsMustAgreeWithInputs) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 2});
  g.output(g.relu(x));
  ReferenceOptions o;
  o.bindings = {{"N", 3}};
  std::string e = user_error([&] {
    run_reference(g, {{"x", host(DType::F32, {2, 2}, Vals(4, 1))}}, o);
  });
  EXPECT_NE(e.find("symbol 'N'"), std::string::npos) << e;
  EXPECT_NE(e.find("input 'x'"), std::string::npos) << e;
  EXPECT_EQ(
      run_reference(g, {{"x", host(DType::F32, {3, 2}, Vals(6, -1))}}, o).begin()->second.to_f64(),
      Vals(6, 0));
}

TEST(Reference, StridedInputReturnedInItsStrides) {
  TensorDesc d = desc(DType::F32, {2, 3}, Layout::Strided);
  d.strides = {1, 2};  // column-major
  Graph g;
  Tensor x = g.input("x", d);
  Tensor y = g.neg(x);
  g.output(x);
  g.output(y);
  HostTensor in = host(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = run_reference(g, {{"x", in}});
  EXPECT_EQ(out.at("x").strides, (Dims{1, 2}));
  EXPECT_EQ(out.at("x").to_f64(), (Vals{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(out.at(g.tensor(y).name).to_f64(), (Vals{-1, -2, -3, -4, -5, -6}));
  EXPECT_EQ(out.at(g.tensor(y).name).strides, (Dims{3, 1}));  // node outputs are dense
}

TEST(Reference, NanPropagates) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {1, 1, 1, 3});
  Tensor m = g.reduce("reduce_max", x, {});
  Tensor mn = g.reduce("reduce_min", x, {3});
  Tensor p = g.maxpool2d(x, {.kernel = {1, 3}});
  Tensor sm = g.softmax(x);
  for (Tensor t : {m, mn, p, sm}) g.output(t);
  auto out = run_reference(g, {{"x", host(DType::F32, {1, 1, 1, 3}, {1, NAN, 3})}});
  for (Tensor t : {m, mn, p, sm})
    EXPECT_TRUE(std::isnan(out.at(g.tensor(t).name).to_f64()[0])) << g.tensor(t).name;
}

TEST(ThreadPool, VisitsEveryIndexOnceAndRethrows) {
  for (int threads : {1, 2, 5}) {
    std::vector<std::atomic<int>> hits(1000);
    parallel_for(
        1000, threads, [&](int64_t i) { hits[i]++; }, 7);
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    EXPECT_THROW(parallel_for(
                     100, threads,
                     [](int64_t i) {
                       if (i == 42) throw std::runtime_error("boom");
                     },
                     3),
                 std::runtime_error);
  }
  parallel_for(0, 2, [](int64_t) { FAIL(); });
  EXPECT_GE(resolve_threads(0), 1);
  EXPECT_EQ(resolve_threads(3), 3);
}

// ================================================================= speed
namespace {
// conv -> batchnorm (-> relu)
Tensor conv_bn(Graph& g, Tensor x, DType t, int64_t cin, int64_t cout, int64_t k, bool relu,
               uint64_t seed) {
  std::string p = fmt::format("l{}", seed);
  Tensor w = g.constant_random(p + "_w", desc(t, {cout, cin, k, k}, Layout::NHWC), "normal", 0,
                               std::sqrt(2.0 / static_cast<double>(cin * k * k)), seed);
  Tensor y = g.conv2d(x, w, {}, {.padding = {k / 2, k / 2}});
  auto vec = [&](const char* n, const char* dist, double a, double b, uint64_t s) {
    return g.constant_random(p + n, desc(t, {cout}), dist, a, b, seed * 10 + s);
  };
  y = g.batchnorm(y, vec("_scale", "uniform", 0.5, 1.5, 1), vec("_bias", "normal", 0, 0.1, 2),
                  vec("_mean", "normal", 0, 0.1, 3), vec("_var", "uniform", 0.5, 1.5, 4));
  return relu ? g.relu(y) : y;
}
}  // namespace

TEST(Reference, ResNet50BottleneckRunsFast) {
  for (DType t : {DType::F16, DType::F32}) {
    Graph g("bottleneck");
    Tensor x = g.input("x", t, {"N", 256, 56, 56}, Layout::NHWC);
    Tensor y = conv_bn(g, x, t, 256, 64, 1, true, 1);
    y = conv_bn(g, y, t, 64, 64, 3, true, 2);
    y = conv_bn(g, y, t, 64, 256, 1, false, 3);
    Tensor out = g.relu(g.add(y, x));
    g.output(out);
    HostTensor xin =
        host(t, {1, 256, 56, 56}, random_values(true, 0, 1, 9, 256 * 56 * 56), Layout::NHWC);
    auto t0 = std::chrono::steady_clock::now();
    auto res = run_reference(g, {{"x", xin}});
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ reference ] ResNet-50 bottleneck N=1 %s: %.3f s\n", dtype_name(t), s);
    EXPECT_LT(s, 10.0);
    const HostTensor& o = res.at(g.tensor(out).name);
    EXPECT_EQ(o.shape, (Dims{1, 256, 56, 56}));
    EXPECT_EQ(o.strides, layout_strides(o.shape, Layout::NHWC));
    Vals v = o.to_f64();
    int positive = 0;
    for (double e : v) {
      ASSERT_TRUE(std::isfinite(e));
      ASSERT_GE(e, 0.0);
      positive += e > 0;
    }
    EXPECT_GT(positive, static_cast<int>(v.size() / 4));  // not a dead network
  }
}
