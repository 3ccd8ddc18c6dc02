// conv_transpose2d (ONNX ConvTranspose): the CPU reference against hand-computed values (strides,
// padding, output_padding, dilation, groups, bias, filter orientation), the located errors of bad
// nodes, the layout rules of the direct kernel (heuristics/conv_transpose_layout), the plan
// (conv_transpose2d + bias + relu and a residual add are one contraction kernel), and NVRTC
// compiles of every kernel variant for sm_80 and sm_90.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "codegen/nvrtc.hpp"
#include "engine/planner/plan.hpp"
#include "heuristics/conv_transpose_layout.hpp"
#include "kiln/error.hpp"
#include "kiln/graph.hpp"
#include "kiln/reference.hpp"
#include "tests/user_error.hpp"

namespace kiln {
namespace {

using Dims = std::vector<int64_t>;
using Vals = std::vector<double>;
using Ints = std::vector<int64_t>;

Tensor data(Graph& g, const std::string& name, Dims shape, const Vals& v) {
  Shape s(shape.begin(), shape.end());
  return g.constant(name, TensorDesc{DType::F32, s, Layout::NCHW, {}},
                    HostTensor::from_f64(DType::F32, shape, v));
}

// y = conv_transpose2d(x, w[, b]) on the CPU reference.
Vals convt(Dims xs, const Vals& x, Dims ws, const Vals& w, const Attrs& attrs,
           const Vals& bias = {}) {
  Graph g("ct");
  Tensor xi = g.input("x", DType::F32, Shape(xs.begin(), xs.end()));
  std::vector<Tensor> in{xi, data(g, "w", ws, w)};
  if (!bias.empty()) in.push_back(data(g, "b", {static_cast<int64_t>(bias.size())}, bias));
  Tensor y = g.add_node1("conv_transpose2d", in, attrs, "ct");
  g.output(y);
  auto out = run_reference(g, {{"x", HostTensor::from_f64(DType::F32, xs, x)}});
  return out.at(g.tensor(y).name).to_f64();
}

TEST(ConvTranspose, ReferenceHandValues) {
  const Vals x{1, 2, 3, 4};
  const Vals ones{1, 1, 1, 1};
  // Stride 1: every input pixel adds its 2x2 window.
  EXPECT_EQ(convt({1, 1, 2, 2}, x, {1, 1, 2, 2}, ones, {}), (Vals{1, 3, 2, 4, 10, 6, 3, 7, 4}));
  // Stride 2: the windows tile the 4x4 output.
  EXPECT_EQ(convt({1, 1, 2, 2}, x, {1, 1, 2, 2}, ones, {{"stride", Ints{2, 2}}}),
            (Vals{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  // Padding crops the output: only the centre is left.
  EXPECT_EQ(convt({1, 1, 2, 2}, x, {1, 1, 2, 2}, ones, {{"padding", Ints{1, 1}}}), (Vals{10}));
  // output_padding adds a row and a column no window reaches (bias only).
  Vals op = convt({1, 1, 2, 2}, x, {1, 1, 2, 2}, ones,
                  {{"stride", Ints{2, 2}}, {"output_padding", Ints{1, 1}}}, {0.5});
  ASSERT_EQ(op.size(), 25u);
  EXPECT_EQ(op[0], 1.5);
  EXPECT_EQ(op[4], 0.5);
  EXPECT_EQ(op[24], 0.5);
  EXPECT_EQ(op[3 * 5 + 3], 4.5);
  // Dilation 2: taps two apart.
  EXPECT_EQ(convt({1, 1, 2, 2}, x, {1, 1, 2, 2}, ones, {{"dilation", Ints{2, 2}}}),
            (Vals{1, 2, 1, 2, 3, 4, 3, 4, 1, 2, 1, 2, 3, 4, 3, 4}));
  // The filter is not flipped: y[iw + s] += x[iw] * w[s].
  EXPECT_EQ(convt({1, 1, 1, 2}, {1, 2}, {1, 1, 1, 2}, {1, 10}, {}), (Vals{1, 12, 20}));
  // Filter [C, K, R, S]: one input channel, two output channels.
  EXPECT_EQ(convt({1, 1, 1, 1}, {5}, {1, 2, 1, 1}, {2, 3}, {}), (Vals{10, 15}));
  // Groups: each input channel feeds only its group's outputs; bias per output channel.
  EXPECT_EQ(convt({1, 2, 1, 1}, {1, 2}, {2, 1, 1, 1}, {3, 5}, {{"groups", int64_t{2}}}, {1, -1}),
            (Vals{4, 9}));
  // Without groups both input channels sum into every output.
  EXPECT_EQ(convt({1, 2, 1, 1}, {1, 2}, {2, 1, 1, 1}, {3, 5}, {}), (Vals{13}));
  // Asymmetric padding [top, left, bottom, right] and stride 3 on one axis.
  Vals a = convt({1, 1, 1, 2}, {1, 2}, {1, 1, 1, 2}, {1, 10},
                 {{"stride", Ints{1, 3}}, {"padding", Ints{0, 1, 0, 0}}});
  EXPECT_EQ(a, (Vals{10, 0, 2, 20}));  // [1, 10, 0, 2, 20] with the first column cropped
}

TEST(ConvTranspose, ShapesFollowTheOnnxFormula) {
  Graph g;
  Tensor x = g.input("x", DType::F16, {"N", 6, "H", 7}, Layout::NHWC);
  Tensor w = g.constant_random("w", TensorDesc{DType::F16, {6, 4, 3, 5}, Layout::NCHW, {}},
                               "uniform", -1, 1, 1);
  Tensor y = g.add_node1("conv_transpose2d", {x, w},
                         {{"stride", Ints{2, 3}},
                          {"padding", Ints{1, 2, 0, 1}},
                          {"output_padding", Ints{1, 0}},
                          {"dilation", Ints{1, 2}},
                          {"groups", int64_t{3}}});
  const TensorDesc& d = g.tensor(y).desc;
  EXPECT_EQ(d.dtype, DType::F16);
  EXPECT_EQ(d.layout, Layout::NHWC);
  // K = 4 * 3; OH = (H - 1) * 2 - 1 + 2 + 1 + 1; OW = 6 * 3 - 3 + 8 + 1 = 24.
  EXPECT_EQ(shape_str(d.shape),
            shape_str(Shape{Dim("N"), Dim(12), (Dim("H") - Dim(1)) * Dim(2) + Dim(3), Dim(24)}));
}

TEST(ConvTranspose, BadNodesAreLocatedUserErrors) {
  using test::user_error;
  Graph g;
  Tensor x = g.input("x", DType::F32, {2, 4, 5, 5});
  auto w = [&](Dims s) {
    return g.constant_random(fmt::format("w{}", g.tensors().size()),
                             TensorDesc{DType::F32, Shape(s.begin(), s.end()), Layout::NCHW, {}},
                             "uniform", -1, 1, 1);
  };
  std::string e = user_error([&] {
    g.add_node1("conv_transpose2d", {x, w({6, 2, 3, 3})}, {}, "up");
  });
  EXPECT_NE(e.find("node 'up' (conv_transpose2d): filter"), std::string::npos) << e;
  EXPECT_NE(e.find("has 6 input channels (dim 0) but input 'x' has 4 channels"), std::string::npos)
      << e;
  e = user_error([&] {
    g.add_node1("conv_transpose2d", {x, w({4, 2, 3, 3})}, {{"groups", int64_t{3}}}, "up");
  });
  EXPECT_NE(e.find("node 'up' (conv_transpose2d).groups: groups 3 does not divide the 4 input"),
            std::string::npos)
      << e;
  // output_padding must be below the stride or the dilation (ONNX).
  e = user_error([&] {
    g.add_node1("conv_transpose2d", {x, w({4, 2, 3, 3})},
                {{"stride", Ints{2, 2}}, {"output_padding", Ints{2, 0}}}, "up");
  });
  EXPECT_NE(e.find("(conv_transpose2d).output_padding: 2 (axis 0) must be smaller than the stride "
                   "2 or the dilation 1"),
            std::string::npos)
      << e;
  EXPECT_NO_THROW(g.add_node1("conv_transpose2d", {x, w({4, 2, 3, 3})},
                              {{"dilation", Ints{3, 1}}, {"output_padding", Ints{2, 0}}}));
  e = user_error([&] {
    Graph g2;
    Tensor x2 = g2.input("x", DType::F32, {2, 4, 5, 5});
    Tensor w2 = g2.constant_random("w", TensorDesc{DType::F32, {4, 2, 3, 3}, Layout::NCHW, {}},
                                   "uniform", -1, 1, 1);
    Tensor b2 =
        g2.constant_random("b", TensorDesc{DType::F32, {4}, Layout::NCHW, {}}, "uniform", -1, 1, 1);
    g2.add_node1("conv_transpose2d", {x2, w2, b2}, {}, "up");
  });
  EXPECT_NE(e.find("input 2 ('b', bias) must have shape [2], found [4]"), std::string::npos) << e;
  // Padding that crops the whole output.
  e = user_error([&] {
    g.add_node1("conv_transpose2d", {x, w({4, 2, 1, 1})}, {{"padding", Ints{3, 0, 2, 0}}}, "up");
  });
  EXPECT_NE(e.find("node 'up' (conv_transpose2d): the output height is 0"), std::string::npos) << e;
  e = user_error([&] {
    Graph g3;
    Tensor x3 = g3.input("x", DType::F32, {2, "C", 5, 5});
    Tensor w3 = g3.constant_random("w", TensorDesc{DType::F32, {4, 2, 3, 3}, Layout::NCHW, {}},
                                   "uniform", -1, 1, 1);
    g3.add_node1("conv_transpose2d", {x3, w3}, {}, "up");
  });
  EXPECT_NE(e.find("the input channel count C must be a static size"), std::string::npos) << e;
}

TEST(ConvTransposeLayout, TapsSolveRTimesDilationModStride) {
  // Every phase of every (stride, dilation) pair: the taps the rule visits are exactly those with
  // (ph - r * dil) a multiple of the stride, for filters of up to 7 taps.
  for (int64_t st = 1; st <= 4; ++st)
    for (int64_t dil = 1; dil <= 4; ++dil) {
      ConvTransposeTaps t = conv_transpose_taps(st, dil);
      for (int64_t ph = 0; ph < st; ++ph) {
        std::vector<int64_t> want, got;
        for (int64_t r = 0; r < 7; ++r)
          if (((ph - r * dil) % st + st) % st == 0) want.push_back(r);
        if (ph % t.gcd == 0)
          for (int64_t r = (ph / t.gcd) * t.inverse % t.step; r < 7; r += t.step) got.push_back(r);
        EXPECT_EQ(got, want) << "stride " << st << " dilation " << dil << " phase " << ph;
      }
    }
}

TEST(ConvTransposeLayout, ChannelsPerThreadAndOrder) {
  ConvTransposeShape s;
  s.kg = 32;
  s.outputs = 1 << 20;
  ConvTransposeLayout l = choose_conv_transpose_layout(s);
  EXPECT_FALSE(l.channel_fastest);
  EXPECT_EQ(l.channels_per_thread, 4);
  EXPECT_EQ(l.threads, 256);
  s.kg = 6;
  EXPECT_EQ(choose_conv_transpose_layout(s).channels_per_thread, 2);
  s.kg = 3;
  EXPECT_EQ(choose_conv_transpose_layout(s).channels_per_thread, 1);
  s.kg = 1;  // depthwise
  EXPECT_EQ(choose_conv_transpose_layout(s).channels_per_thread, 1);
  // Channels-last outputs: consecutive threads, consecutive channels; one channel each.
  s.kg = 64;
  s.channels_last = true;
  l = choose_conv_transpose_layout(s);
  EXPECT_TRUE(l.channel_fastest);
  EXPECT_EQ(l.channels_per_thread, 1);
  s.outputs = 1000;
  EXPECT_EQ(choose_conv_transpose_layout(s).threads, 128);
}

// ---------------------------------------------------------------- plan and codegen
Tensor cst(Graph& g, const std::string& name, DType t, Shape s) {
  return g.constant_random(name, TensorDesc{t, std::move(s), Layout::NCHW, {}}, "uniform", -0.5,
                           0.5, 5);
}

std::vector<std::vector<std::string>> groups_of(const Graph& g, const Plan& p) {
  std::vector<std::vector<std::string>> r;
  for (const FusionGroup& grp : p.groups) {
    std::vector<std::string> names;
    for (int n : grp.nodes) names.push_back(g.nodes()[n].name);
    r.push_back(names);
  }
  return r;
}

TEST(ConvTransposePlanner, BiasReluAndResidualAreOneKernel) {
  for (Layout l : {Layout::NCHW, Layout::NHWC}) {
    Graph g("up");
    Tensor x = g.input("x", DType::F16, {"N", 8, 9, 9}, l);
    Tensor skip = g.input("skip", DType::F16, {"N", 16, 18, 18}, l);
    Tensor y =
        g.add_node1("conv_transpose2d",
                    {x, cst(g, "w", DType::F16, {8, 16, 2, 2}), cst(g, "b", DType::F16, {16})},
                    {{"stride", Ints{2, 2}}}, "up");
    y = g.add_node1("relu", {y}, {}, "relu");
    g.output(g.add_node1("add", {y, skip}, {}, "res"));
    Plan p = plan_fusion(g);
    ASSERT_EQ(groups_of(g, p), (std::vector<std::vector<std::string>>{{"up", "relu", "res"}}));
    EXPECT_EQ(p.groups[0].kind, GroupKind::Contraction);
    CodegenOptions co;
    std::vector<KernelSpec> ks = generate_kernels(g, p, co);
    ASSERT_EQ(ks.size(), 1u);
    EXPECT_EQ(ks[0].name,
              fmt::format("conv_transpose_f16_{}_2x2_s2x2{}_direct_bias_relu_add",
                          l == Layout::NHWC ? "nhwc" : "nchw", l == Layout::NHWC ? "" : "_k4"));
    // Only the taps of the output's phase: stride 2, dilation 1 starts at (oh + 0) % 2.
    EXPECT_NE(ks[0].source.find("ph_r"), std::string::npos);
  }
}

void compile_all(const Graph& g) {
  for (int sm : {80, 90}) {
    CodegenOptions co;
    co.sm = sm;
    for (const KernelSpec& k : generate_kernels(g, plan_fusion(g), co)) {
      try {
        NvrtcResult r = nvrtc_compile(k.source, k.name, fmt::format("sm_{}", sm));
        EXPECT_FALSE(r.cubin.empty()) << k.name;
      } catch (const Error& e) {
        ADD_FAILURE() << g.name() << ": " << k.name << " for sm_" << sm << ": " << e.what();
      }
    }
  }
}

TEST(ConvTransposeCodegen, EveryVariantCompiles) {
  struct V {
    int64_t c, kg, groups, r, s, stride, dil, opad;
  };
  const V vs[] = {{3, 5, 1, 1, 1, 1, 1, 0}, {4, 8, 1, 2, 2, 2, 1, 0}, {6, 2, 2, 3, 3, 2, 1, 1},
                  {8, 1, 8, 3, 3, 3, 1, 2}, {5, 7, 1, 4, 4, 2, 2, 1}, {3, 2, 3, 3, 3, 3, 2, 1}};
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (Layout l : {Layout::NCHW, Layout::NHWC}) {
      Graph g(fmt::format("ct_{}_{}", dtype_name(dt), l == Layout::NHWC ? "nhwc" : "nchw"));
      for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); ++i) {
        const V v = vs[i];
        Tensor x = g.input(fmt::format("x{}", i), dt, {"N", v.c, "H", 7}, l);
        Tensor y = g.add_node1("conv_transpose2d",
                               {x, cst(g, fmt::format("w{}", i), dt, {v.c, v.kg, v.r, v.s}),
                                cst(g, fmt::format("b{}", i), dt, {v.kg * v.groups})},
                               {{"stride", Ints{v.stride, v.stride}},
                                {"dilation", Ints{v.dil, 1}},
                                {"output_padding", Ints{v.opad, 0}},
                                {"padding", Ints{1, 0, 0, 1}},
                                {"groups", v.groups}});
        g.output(g.add_node1("gelu", {y}));
      }
      compile_all(g);
    }
}

}  // namespace
}  // namespace kiln
