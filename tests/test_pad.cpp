// The pad op (shape inference, attribute errors, CPU reference, planner prologue) and the
// Engine pass that zero-pads the input channels of a 16-bit NHWC conv with C % 8 != 0, C != 4 (the
// ResNet stem), so that the conv takes 8- or 16-byte vector loads: the rewritten graph computes the
// same values (CPU reference before and after, on fresh random inputs), and its kernels compile.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "engine/passes/passes.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/engine.hpp"
#include "kiln/graph.hpp"
#include "kiln/reference.hpp"
#include "tests/count_ops.hpp"
#include "tests/random_input.hpp"
#include "tests/user_error.hpp"

namespace kiln {
using test::count_op;

namespace {

using test::user_error;

const Node& only_node(const Graph& g, OpKind k) {
  for (const Node& n : g.nodes())
    if (n.op == k) return n;
  throw std::runtime_error(std::string("no node of op ") + op_name(k));
}

using test::random_input;

// What the Engine compiles `g` to for `arch` (no GPU: kernels compiled, not loaded; no disk cache).
CompiledGraph compile_for(const Graph& g, const char* arch, bool fusion = true) {
  EngineOptions o;
  o.arch = arch;
  o.load_kernels = false;
  o.disk_cache = false;
  o.fusion = fusion;
  return Engine(o).compile(g);
}

// ---------------------------------------------------------------- the op
TEST(Pad, ShapeInference) {
  Graph g;
  Tensor x = g.input("x", DType::F16, {"N", 3, 224, 224}, Layout::NHWC);
  Tensor c8 = g.pad(x, {0, 0, 0, 0, 0, 5, 0, 0});
  EXPECT_EQ(shape_str(g.desc(c8).shape), "[N, 8, 224, 224]");
  EXPECT_EQ(g.desc(c8).layout, Layout::NHWC);
  EXPECT_EQ(g.desc(c8).dtype, DType::F16);
  // Every dim, symbolic ones too; a 2-D tensor stays row-major.
  Tensor sp = g.pad(x, {1, 0, 2, 3, 0, 0, 1, 0});
  EXPECT_EQ(g.desc(sp).shape[0].eval({{"N", 5}}), 6);
  EXPECT_EQ(shape_str(g.desc(sp).shape), "[N+1, 3, 227, 227]");
  Tensor m = g.input("m", DType::F32, {4, "K"});
  Tensor mp = g.pad(m, {0, 0, 0, 2}, -INFINITY);
  EXPECT_EQ(g.desc(mp).shape[1].eval({{"K", 7}}), 9);
  EXPECT_EQ(g.desc(mp).layout, Layout::NCHW);
  EXPECT_EQ(g.nodes().back().attr_float("value"), -INFINITY);
  // All-zero pads are a plain copy.
  EXPECT_EQ(g.desc(g.pad(m, {0, 0, 0, 0})).shape, g.desc(m).shape);
}

TEST(Pad, BadAttributesAreLocatedUserErrors) {
  Graph g;
  Tensor x = g.input("x", DType::F16, {"N", 3, 8, 8}, Layout::NHWC);
  std::string e = user_error([&] { g.pad(x, {0, 5}); });
  EXPECT_NE(e.find(".pads: expected 2 x rank = 8 integers [before_0..before_3, after_0..after_3] "
                   "for input 'x' [N, 3, 8, 8], found 2 values"),
            std::string::npos)
      << e;
  e = user_error([&] { g.pad(x, {0, 0, 0, 0, 0, -1, 0, 0}); });
  EXPECT_NE(e.find(".pads[5]: expected an integer in 0..2147483647 (pad never crops), found -1"),
            std::string::npos)
      << e;
  e = user_error([&] { g.add_node1("pad", {x}, {}, "p"); });
  EXPECT_NE(e.find("missing required attribute 'pads' of op pad"), std::string::npos) << e;
  e = user_error([&] {
    g.add_node1("pad", {x}, {{"pads", std::vector<int64_t>(8, 0)}, {"mode", std::string("wrap")}});
  });
  EXPECT_NE(e.find(".mode: expected one of constant|reflect|edge"), std::string::npos) << e;
  e = user_error([&] {
    g.add_node1("pad", {x}, {{"pads", std::vector<int64_t>(8, 0)}, {"value", NAN}});
  });
  EXPECT_NE(e.find(".value: expected a number, found NaN"), std::string::npos) << e;
  Tensor s = g.input("s", DType::F32, {});
  e = user_error([&] { g.pad(s, {}); });
  EXPECT_NE(e.find("must be a tensor (rank 1..8)"), std::string::npos) << e;
}

TEST(Pad, Reference) {
  // [2, 3] -> one row before, two columns after, filled with 7.
  Graph g("pad2d");
  Tensor x = g.input("x", DType::F32, {2, 3});
  g.output(g.pad(x, {1, 0, 0, 2}, 7.0));
  HostTensor in = HostTensor::from_f64(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor out = run_reference(g, {{"x", in}}).begin()->second;
  EXPECT_EQ(out.shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(out.to_f64(), (std::vector<double>{7, 7, 7, 7, 7, 1, 2, 3, 7, 7, 4, 5, 6, 7, 7}));

  // NHWC, every dim padded, symbolic batch: against a direct loop over logical coordinates.
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    Graph h("pad4d");
    Tensor y = h.input("y", dt, {"N", 3, 5, 4}, Layout::NHWC);
    const std::vector<int64_t> p = {1, 0, 2, 1, 0, 5, 1, 3};
    h.output(h.pad(y, p, 0.5));
    HostTensor yin = random_input(dt, {2, 3, 5, 4}, Layout::NHWC, 3);
    HostTensor r = run_reference(h, {{"y", yin}}).begin()->second;
    ASSERT_EQ(r.shape, (std::vector<int64_t>{3, 8, 8, 8}));
    std::vector<double> iv = yin.to_f64(), ov = r.to_f64();
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t c = 0; c < 8; ++c)
        for (int64_t a = 0; a < 8; ++a)
          for (int64_t b = 0; b < 8; ++b) {
            int64_t sn = n - 1, sc = c, sa = a - 2, sb = b - 1;
            bool inside = sn >= 0 && sn < 2 && sc < 3 && sa >= 0 && sa < 5 && sb >= 0 && sb < 4;
            double want = inside ? iv[((sn * 3 + sc) * 5 + sa) * 4 + sb] : 0.5;
            ASSERT_EQ(ov[((n * 8 + c) * 8 + a) * 8 + b], want) << n << c << a << b;
          }
  }
}

// A copy kernel takes private elementwise producers of its input as a prologue.
TEST(Pad, PlannerFusesPrivateProducersIntoTheCopy) {
  Graph g("cast_pad");
  Tensor x = g.input("x", DType::F32, {"N", 3, 16, 16}, Layout::NHWC);
  Tensor h = g.add_node1("cast", {x}, {{"dtype", std::string("f16")}}, "to_f16");
  Tensor p =
      g.add_node1("pad", {h}, {{"pads", std::vector<int64_t>{0, 0, 0, 0, 0, 5, 0, 0}}}, "stem_pad");
  g.output(p);
  Plan plan = plan_fusion(g);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].kind, GroupKind::Copy);
  EXPECT_EQ(plan.groups[0].nodes.size(), 2u);
  EXPECT_EQ(plan.groups[0].name, "copy_f16_cast_pad");
  EXPECT_NE(plan_to_string(g, plan).find("prologue: to_f16 (cast) fused into stem_pad's input"),
            std::string::npos);
  // Also a graph output: written by its own kernel, and the boundary says why.
  g.output(h);
  Plan two = plan_fusion(g);
  ASSERT_EQ(two.groups.size(), 2u);
  EXPECT_NE(plan_to_string(g, two).find("to_f16 -> stem_pad: stem_pad is a movement op (copy "
                                        "kernel); to_f16 is not its prologue: its result is also "
                                        "used elsewhere"),
            std::string::npos)
      << plan_to_string(g, two);
}

// ---------------------------------------------------------------- the conv channel-pad pass
struct StemCase {
  DType dt;
  int64_t c, k, r;
  int64_t stride, pad;
  bool bias;
};

std::shared_ptr<Graph> stem(const StemCase& s, Layout wl = Layout::NHWC) {
  auto g = std::make_shared<Graph>("stem");
  std::vector<Tensor> in = {
      g->input("x", s.dt, {"N", s.c, 23, 21}, Layout::NHWC),
      g->constant_random("w", {s.dt, {s.k, s.c, s.r, s.r}, wl, {}}, "normal", 0, 0.2, 1)};
  if (s.bias)
    in.push_back(g->constant_random("b", {s.dt, {s.k}, Layout::NCHW, {}}, "normal", 0, 0.5, 2));
  Tensor y = g->add_node1("conv2d", in,
                          {{"stride", std::vector<int64_t>{s.stride, s.stride}},
                           {"padding", std::vector<int64_t>{s.pad, s.pad}}},
                          "conv1");
  g->output(g->relu(y));
  return g;
}

TEST(PadConvChannels, StemIsPaddedAndComputesTheSame) {
  const std::vector<StemCase> cases = {
      {DType::F16, 3, 64, 7, 2, 3, false},  // the ResNet stem: 7x7 / 2, pad 3
      {DType::BF16, 3, 16, 7, 2, 3, true}, {DType::F16, 5, 8, 3, 1, 1, true},
      {DType::BF16, 1, 8, 3, 1, 0, false}, {DType::F16, 20, 12, 3, 2, 1, true},
      {DType::F16, 60, 8, 3, 1, 1, false},
  };
  for (const StemCase& s : cases) {
    SCOPED_TRACE(fmt::format("{} C={} {}x{}", dtype_name(s.dt), s.c, s.r, s.r));
    for (Layout wl : {Layout::NHWC, Layout::NCHW}) {
      std::shared_ptr<Graph> g = stem(s, wl);
      const int64_t cp = s.c < 4 ? 4 : (s.c + 7) / 8 * 8;
      std::string note;
      std::shared_ptr<const Graph> f = apply_engine_passes(g, true, &note);
      ASSERT_NE(f.get(), g.get());
      EXPECT_NE(note.find(fmt::format("input channels zero-padded to 4 or a multiple of 8 (8- or "
                                      "16-byte vector loads): conv1 ({} -> {}) before planning",
                                      s.c, cp)),
                std::string::npos)
          << note;
      // x -> pad -> conv (the pad right before it), the filter now [K, Cp, R, S] with zero
      // channels C..Cp-1 and the original values before.
      ASSERT_EQ(count_op(*f, OpKind::Pad), 1);
      const Node& pad = only_node(*f, OpKind::Pad);
      const Node& conv = only_node(*f, OpKind::Conv2d);
      EXPECT_EQ(pad.name, fmt::format("conv1_pad_c{}", cp));
      EXPECT_EQ(f->tensor(pad.outputs[0]).name, fmt::format("x_c{}", cp));
      EXPECT_EQ(pad.attr_ints("pads"), (std::vector<int64_t>{0, 0, 0, 0, 0, cp - s.c, 0, 0}));
      EXPECT_EQ(pad.attr_float("value"), 0.0);
      EXPECT_EQ(conv.inputs[0], pad.outputs[0]);
      EXPECT_EQ(f->tensor(pad.outputs[0]).desc.str(),
                fmt::format("{}[N, {}, 23, 21] NHWC", dtype_name(s.dt), cp));
      EXPECT_LT(f->tensor(pad.outputs[0]).producer, f->tensor(conv.outputs[0]).producer);
      const TensorInfo& w = f->tensor(conv.inputs[1]);
      EXPECT_EQ(w.role, TensorRole::Constant);
      // An NCHW filter of the NHWC conv is relaid first (channels_last_filters): NHWC either way.
      EXPECT_EQ(w.desc.layout, Layout::NHWC);
      EXPECT_EQ(shape_str(w.desc.shape), fmt::format("[{}, {}, {}, {}]", s.k, cp, s.r, s.r));
      std::vector<double> w0 = g->tensor(g->find("w")).data->to_f64(), w1 = w.data->to_f64();
      const int64_t rs = s.r * s.r;
      for (int64_t k = 0; k < s.k; ++k)
        for (int64_t ch = 0; ch < cp; ++ch)
          for (int64_t i = 0; i < rs; ++i)
            ASSERT_EQ(w1[(k * cp + ch) * rs + i], ch < s.c ? w0[(k * s.c + ch) * rs + i] : 0.0);
      EXPECT_EQ(f->find("w"), -1);  // the unpadded filter is pruned
      EXPECT_EQ(f->tensor(f->outputs()[0]).name, g->tensor(g->outputs()[0]).name);
      // The same values on random (non-zero) inputs: every sum only gains 0 * 0 terms, so the
      // f64 reference gives identical results (well within the f16 tolerance).
      std::map<std::string, HostTensor> in{
          {"x", random_input(s.dt, {2, s.c, 23, 21}, Layout::NHWC, 7 + s.c)}};
      HostTensor want = run_reference(*g, in).begin()->second;
      HostTensor got = run_reference(*f, in).begin()->second;
      ASSERT_EQ(got.shape, want.shape);
      std::vector<double> a = want.to_f64(), b = got.to_f64();
      double max_abs = 0, nonzero = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_FALSE(std::isnan(b[i]));
        EXPECT_LE(std::abs(a[i] - b[i]), 1e-2 * std::max(1.0, std::abs(a[i]))) << i;
        max_abs = std::max(max_abs, std::abs(a[i] - b[i]));
        nonzero += a[i] != 0;
      }
      EXPECT_EQ(max_abs, 0.0);
      EXPECT_GT(nonzero, static_cast<double>(a.size()) / 4);  // a real test: not all relu'd away
      // Idempotent: a second run changes nothing.
      EXPECT_EQ(apply_engine_passes(f, true).get(), f.get());
    }
  }
}

// A stride-2 conv with 4 input channels (after padding) and an even input width gets zero filter
// columns for the row-folded TMA kernel: a filter row of 4, 8 or 16 columns (16-byte chunks), an
// odd left padding made even by a zero column in front. Same values; on sm_90a the rule is the
// "_rf" kernel, on sm_80 the 8-byte loader of the wider filter.
TEST(PadConvChannels, StrideTwoFourChannelFiltersAreWidenedForTheRowFold) {
  struct Wide {
    int64_t c, r, pad, cols, left;
    std::vector<int64_t> padding;  // after
  };
  const std::vector<Wide> cases = {
      {3, 7, 3, 8, 1, {3, 4, 3, 3}},  // the ResNet stem: 7x7 -> 7x8, one zero column in front
      {4, 3, 1, 4, 1, {1, 2, 1, 1}},  // C = 4 already: no pad node, 3x3 -> 3x4
      {2, 5, 2, 8, 0, {2, 2, 2, 5}},  // even padding: zero columns behind only
  };
  for (const Wide& c : cases) {
    SCOPED_TRACE(fmt::format("C={} {}x{} pad {}", c.c, c.r, c.r, c.pad));
    auto g = std::make_shared<Graph>("stem");
    Tensor x = g->input("x", DType::F16, {"N", c.c, 24, 22}, Layout::NHWC);
    Tensor w = g->constant_random("w", {DType::F16, {16, c.c, c.r, c.r}, Layout::NHWC, {}},
                                  "normal", 0, 0.2, 1);
    Tensor b = g->constant_random("b", {DType::F16, {16}, Layout::NCHW, {}}, "normal", 0, 0.5, 2);
    g->output(g->relu(g->add_node1(
        "conv2d", {x, w, b},
        {{"stride", std::vector<int64_t>{2, 2}}, {"padding", std::vector<int64_t>{c.pad, c.pad}}},
        "conv1")));
    EXPECT_TRUE(has_paddable_conv(*g));
    std::string note;
    std::shared_ptr<const Graph> f = apply_engine_passes(g, true, &note);
    ASSERT_NE(f.get(), g.get());
    const std::string chan = c.c == 4 ? "" : fmt::format("{} -> 4, ", c.c);
    EXPECT_NE(
        note.find(fmt::format("conv1 ({}filter {}x{} -> {}x{})", chan, c.r, c.r, c.r, c.cols)),
        std::string::npos)
        << note;
    EXPECT_EQ(count_op(*f, OpKind::Pad), c.c == 4 ? 0 : 1);
    const Node& conv = only_node(*f, OpKind::Conv2d);
    EXPECT_EQ(conv.attr_ints("padding"), c.padding);
    const TensorInfo& wt = f->tensor(conv.inputs[1]);
    EXPECT_EQ(shape_str(wt.desc.shape), fmt::format("[16, 4, {}, {}]", c.r, c.cols));
    std::vector<double> w0 = g->tensor(g->find("w")).data->to_f64(), w1 = wt.data->to_f64();
    for (int64_t k = 0; k < 16; ++k)
      for (int64_t ch = 0; ch < 4; ++ch)
        for (int64_t r = 0; r < c.r; ++r)
          for (int64_t s = 0; s < c.cols; ++s) {
            const int64_t so = s - c.left;
            const double want =
                ch < c.c && so >= 0 && so < c.r ? w0[((k * c.c + ch) * c.r + r) * c.r + so] : 0.0;
            ASSERT_EQ(w1[((k * 4 + ch) * c.r + r) * c.cols + s], want)
                << k << " " << ch << " " << r << " " << s;
          }
    EXPECT_EQ(f->tensor(f->outputs()[0]).desc.shape, g->tensor(g->outputs()[0]).desc.shape);
    std::map<std::string, HostTensor> in{
        {"x", random_input(DType::F16, {2, c.c, 24, 22}, Layout::NHWC, 3 + c.c)}};
    std::vector<double> want = run_reference(*g, in).begin()->second.to_f64();
    std::vector<double> got = run_reference(*f, in).begin()->second.to_f64();
    ASSERT_EQ(got.size(), want.size());
    double nonzero = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i], want[i]) << i;  // only zero terms more: the same f64 sums
      nonzero += want[i] != 0;
    }
    EXPECT_GT(nonzero, static_cast<double>(want.size()) / 4);
    EXPECT_EQ(apply_engine_passes(f, true).get(), f.get());  // idempotent
    for (const char* arch : {"sm_80", "sm_90"}) {
      SCOPED_TRACE(arch);
      CompiledGraph cg = compile_for(*g, arch);
      const std::string& conv_kernel = cg.kernels().back().name;
      EXPECT_NE(conv_kernel.find(fmt::format("_{}x{}_s2_c4_", c.r, c.cols)), std::string::npos)
          << conv_kernel;
      EXPECT_EQ(conv_kernel.find("_rf_") != std::string::npos, std::string(arch) == "sm_90")
          << conv_kernel;
    }
  }
}

TEST(PadConvChannels, LeavesOtherConvsAlone) {
  auto conv = [](DType dt, int64_t c, Layout xl, int64_t groups, int64_t r, bool const_w) {
    auto g = std::make_shared<Graph>("other");
    Tensor x = g->input("x", dt, {"N", c, 12, 12}, xl);
    TensorDesc wd{dt, {16, c / groups, r, r}, Layout::NHWC, {}};
    Tensor w = const_w ? g->constant_random("w", wd, "normal", 0, 0.2, 1) : g->input("w", wd);
    g->output(g->add_node1("conv2d", {x, w},
                           {{"padding", std::vector<int64_t>{r / 2, r / 2}}, {"groups", groups}}));
    return g;
  };
  struct Other {
    const char* why;
    std::shared_ptr<Graph> g;
  };
  const Layout H = Layout::NHWC;
  const std::vector<Other> others = {
      {"C = 8", conv(DType::F16, 8, H, 1, 7, true)},
      {"C = 4 (8-byte loads)", conv(DType::F16, 4, H, 1, 7, true)},
      {"C = 64", conv(DType::F16, 64, H, 1, 3, true)},
      {"C = 66 (>= 64)", conv(DType::BF16, 66, H, 1, 3, true)},
      {"f32", conv(DType::F32, 3, H, 1, 7, true)},
      {"NCHW input", conv(DType::F16, 3, Layout::NCHW, 1, 7, true)},
      {"filter is an input", conv(DType::F16, 3, H, 1, 7, false)},
      {"grouped", conv(DType::F16, 6, H, 2, 3, true)},
      {"1x1", conv(DType::F16, 3, H, 1, 1, true)},
  };
  for (const Other& o : others) {
    SCOPED_TRACE(o.why);
    EXPECT_FALSE(has_paddable_conv(*o.g));
    std::string note;
    EXPECT_EQ(apply_engine_passes(o.g, true, &note).get(), o.g.get());
    EXPECT_EQ(note, "");
    Graph copy = *o.g;
    EXPECT_EQ(pad_conv_channels(copy), 0);
    EXPECT_EQ(count_op(copy, OpKind::Pad), 0);
  }
  // Without fusion the Engine runs no pass: the graph as written.
  std::shared_ptr<Graph> s = stem({DType::F16, 3, 64, 7, 2, 3, false});
  EXPECT_TRUE(has_paddable_conv(*s));
  EXPECT_EQ(apply_engine_passes(s, false).get(), s.get());
}

// One x feeding two stems is padded once; a shared filter is padded once; batchnorm folding runs
// first and its folded filter is the one padded.
TEST(PadConvChannels, SharedTensorsAndBatchnorm) {
  auto g = std::make_shared<Graph>("two_stems");
  Tensor x = g->input("x", DType::F16, {"N", 3, 16, 16}, Layout::NHWC);
  Tensor w =
      g->constant_random("w", {DType::F16, {8, 3, 3, 3}, Layout::NHWC, {}}, "normal", 0, 0.3, 1);
  Conv2dOptions o;
  o.padding = {1, 1};
  Tensor a = g->conv2d(x, w, {}, o);
  Tensor b = g->conv2d(x, w, {}, {.stride = {2, 2}, .padding = {1, 1}});
  auto v = [&](const char* n, double lo, double hi, uint64_t seed) {
    return g->constant_random(n, {DType::F16, {8}, Layout::NCHW, {}}, "uniform", lo, hi, seed);
  };
  Tensor bn = g->batchnorm(b, v("gamma", 0.5, 1.5, 2), v("beta", -0.5, 0.5, 3),
                           v("mean", -0.5, 0.5, 4), v("var", 0.5, 1.5, 5));
  g->output(a);
  g->output(bn);
  std::string note;
  std::shared_ptr<const Graph> f = apply_engine_passes(g, true, &note);
  EXPECT_EQ(count_op(*f, OpKind::Pad), 1);
  EXPECT_EQ(count_op(*f, OpKind::Batchnorm), 0);
  EXPECT_EQ(count_op(*f, OpKind::Conv2d), 2);
  EXPECT_NE(note.find("1 batchnorm folded into the conv/matmul weights; input channels zero-padded "
                      "to 4 or a multiple of 8 (8- or 16-byte vector loads): "),
            std::string::npos)
      << note;
  std::vector<int> filters;
  for (const Node& n : f->nodes())
    if (n.op == OpKind::Conv2d) {
      EXPECT_EQ(f->nodes()[f->tensor(n.inputs[0]).producer].op, OpKind::Pad);
      EXPECT_EQ(f->tensor(n.inputs[1]).desc.shape[1], Dim(4));
      filters.push_back(n.inputs[1]);
    }
  ASSERT_EQ(filters.size(), 2u);
  EXPECT_NE(filters[0], filters[1]);  // one plain, one batchnorm-folded
  std::map<std::string, HostTensor> in{
      {"x", random_input(DType::F16, {2, 3, 16, 16}, Layout::NHWC, 5)}};
  auto want = run_reference(*g, in), got = run_reference(*f, in);
  for (const auto& [name, t] : want) {
    std::vector<double> p = t.to_f64(), q = got.at(name).to_f64();
    ASSERT_EQ(p.size(), q.size());
    for (size_t i = 0; i < p.size(); ++i)
      ASSERT_NEAR(p[i], q[i], 1e-2 * std::max(1.0, std::abs(p[i]))) << name << " " << i;
  }
}

// A node with fewer than two inputs (a range has none: the torch backend's graphs compute
// interpolation indices with it) beside the stem: the pass reads only convs' inputs (it read
// inputs[0] and [1] of every node and crashed on the range, FCN-ResNet50 through
// torch.compile).
TEST(PadConvChannels, NodesWithoutInputsBesideTheStem) {
  std::shared_ptr<Graph> g = stem({DType::F16, 3, 8, 7, 2, 3, false});
  Tensor r = g->add_node1("range", {},
                          {{"start", 0.0},
                           {"delta", 1.0},
                           {"length", std::vector<Dim>{Dim(8)}},
                           {"dtype", std::string("f16")}},
                          "idx");
  g->output(r);
  std::string note;
  std::shared_ptr<const Graph> f = apply_engine_passes(g, true, &note);
  EXPECT_EQ(count_op(*f, OpKind::Pad), 1) << note;
  EXPECT_EQ(count_op(*f, OpKind::Range), 1);
}

// What the Engine builds for the stem: the conv kernel with the 8-byte loader ("_c4", not
// "_cscalar") and a pad kernel, both compiled by NVRTC for sm_80 and
// sm_90a; `kiln plan`'s text names the pad node.
TEST(PadConvChannels, EngineBuildsTheVectorizedConvAndAPadKernel) {
  std::shared_ptr<Graph> g = stem({DType::F16, 3, 64, 7, 2, 3, false});
  std::shared_ptr<const Graph> f = apply_engine_passes(g, true);
  std::string plan = plan_to_string(*f, plan_fusion(*f));
  EXPECT_NE(plan.find("nodes:   conv1_pad_c4 (pad)"), std::string::npos) << plan;
  EXPECT_NE(plan.find("outputs: x_c4 f16[N, 4, 23, 21] NHWC"), std::string::npos) << plan;
  for (const char* arch : {"sm_80", "sm_90"}) {
    SCOPED_TRACE(arch);
    CompiledGraph cg = compile_for(*g, arch);
    ASSERT_EQ(cg.kernels().size(), 2u);
    EXPECT_EQ(cg.kernels()[0].name, "copy_f16_pad");
    EXPECT_EQ(cg.kernels()[0].nodes, (std::vector<std::string>{"conv1_pad_c4"}));
    EXPECT_EQ(cg.kernels()[1].name.rfind("conv_f16_nhwc_7x7_s2", 0), 0u) << cg.kernels()[1].name;
    EXPECT_EQ(cg.kernels()[1].name.find("cscalar"), std::string::npos) << cg.kernels()[1].name;
    EXPECT_NE(cg.kernels()[1].name.find("_c4_"), std::string::npos) << cg.kernels()[1].name;
    // The compiled graph still answers to the original's inputs and outputs.
    EXPECT_EQ(cg.output_shapes({{"N", 2}}).count(g->tensor(g->outputs()[0]).name), 1u);
  }
  // Without fusion (no passes): the scalar-channel loader, as written.
  CompiledGraph cg = compile_for(*g, "sm_80", /*fusion=*/false);
  bool cscalar = false;
  for (const KernelInfo& k : cg.kernels()) cscalar |= k.name.find("_cscalar") != std::string::npos;
  EXPECT_TRUE(cscalar);
}

}  // namespace
}  // namespace kiln
