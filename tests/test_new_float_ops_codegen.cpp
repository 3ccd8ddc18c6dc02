// Planning and code generation of the ops added for real models (CPU only): conv + bias +
// hardswish and conv + per-channel prelu are each one contraction kernel; log_softmax, reduce_l2 /
// reduce_prod and cumsum anchor their groups with prologues and epilogues; and every generated
// kernel compiles with NVRTC for sm_80 and sm_90.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "codegen/nvrtc.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/error.hpp"
#include "kiln/graph.hpp"

namespace kiln {
namespace {

const DType kDtypes[] = {DType::F32, DType::F16, DType::BF16};

Tensor cst(Graph& g, const std::string& name, DType t, Shape s, double lo = 0.5, double hi = 1.5) {
  return g.constant_random(name, TensorDesc{t, std::move(s), Layout::NCHW, {}}, "uniform", lo, hi,
                           3);
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
using Groups = std::vector<std::vector<std::string>>;

Attrs pad1() {
  return {{"padding", std::vector<int64_t>{1, 1}}};
}

// x -> conv(+bias) -> hardswish, x -> conv -> prelu(slope [K, 1, 1]).
Graph conv_activations(DType dt, Layout l) {
  Graph g("convact");
  Tensor x = g.input("x", dt, {"N", 16, 9, 9}, l);
  Tensor c1 = g.add_node1(
      "conv2d", {x, cst(g, "w", dt, {32, 16, 3, 3}, -0.2, 0.2), cst(g, "b", dt, {32}, -0.5, 0.5)},
      pad1(), "conv1");
  g.output(g.add_node1("hardswish", {c1}, {}, "hswish"));
  Tensor c2 =
      g.add_node1("conv2d", {x, cst(g, "w2", dt, {32, 16, 3, 3}, -0.2, 0.2)}, pad1(), "conv2");
  g.output(g.add_node1("prelu", {c2, cst(g, "slope", dt, {32, 1, 1}, 0.05, 0.5)}, {}, "prelu"));
  return g;
}

TEST(NewFloatOpsPlanner, ConvBiasHardswishAndConvPreluAreOneKernelEach) {
  for (Layout l : {Layout::NCHW, Layout::NHWC}) {
    Graph g = conv_activations(DType::F16, l);
    Plan p = plan_fusion(g);
    EXPECT_EQ(groups_of(g, p), (Groups{{"conv1", "hswish"}, {"conv2", "prelu"}}));
    for (const FusionGroup& grp : p.groups) EXPECT_EQ(grp.kind, GroupKind::Contraction);
  }
  // Matmul + bias + hardswish / hardsigmoid / mish: one kernel.
  Graph g("mm");
  Tensor a = g.input("a", DType::BF16, {"M", 256});
  Tensor y = g.add_node1(
      "matmul",
      {a, cst(g, "w", DType::BF16, {256, 128}, -0.1, 0.1), cst(g, "b", DType::BF16, {128})}, {},
      "mm");
  y = g.add_node1("hardswish", {y}, {}, "hs");
  y = g.add_node1("mish", {g.add_node1("hardsigmoid", {y}, {}, "hsig")}, {}, "mish");
  g.output(y);
  Plan p = plan_fusion(g);
  EXPECT_EQ(groups_of(g, p), (Groups{{"mm", "hs", "hsig", "mish"}}));
}

TEST(NewFloatOpsPlanner, NewAnchorsTakeProloguesAndEpilogues) {
  Graph g("anchors");
  Tensor x = g.input("x", DType::F16, {"N", 512});
  Tensor r = g.input("r", DType::F16, {"N", 512});
  Tensor h = g.add_node1("add", {x, r}, {}, "add");
  Tensor ls = g.add_node1("log_softmax", {h}, {}, "lsm");
  g.output(g.add_node1("mul", {ls, h}, {}, "lsm_mul"));
  Tensor s = g.add_node1("sin", {x}, {}, "sin");
  Tensor cs = g.add_node1("cumsum", {s}, {{"axis", int64_t{1}}}, "cs");
  g.output(g.add_node1("add", {cs, s}, {}, "cs_res"));  // reads the prologue's value again
  g.output(s);
  Tensor c = g.add_node1("cos", {r}, {}, "cos");
  Tensor l2 = g.reduce("reduce_l2", c, {1}, true);
  g.output(g.add_node1("hardswish", {l2}, {}, "l2_hs"));
  g.output(g.add_node1("neg", {g.reduce("reduce_prod", x, {1})}, {}, "prod_neg"));
  Plan p = plan_fusion(g);
  std::vector<GroupKind> kinds;
  for (const FusionGroup& grp : p.groups) kinds.push_back(grp.kind);
  EXPECT_EQ(kinds, (std::vector<GroupKind>{GroupKind::RowNorm, GroupKind::Scan,
                                           GroupKind::Reduction, GroupKind::Reduction}));
  EXPECT_EQ(p.groups[0].nodes.size(), 3u);  // add, lsm, lsm_mul
  EXPECT_EQ(p.groups[1].nodes.size(), 3u);  // sin, cs, cs_res
  EXPECT_EQ(p.groups[2].nodes.size(), 3u);  // cos, reduce_l2, l2_hs
  EXPECT_EQ(std::string(group_kind_name(GroupKind::Scan)), "scan");
}

// ---------------------------------------------------------------- NVRTC
std::string source_of(const Graph& g, int sm) {
  CodegenOptions co;
  co.sm = sm;
  std::string all;
  // The kernel bodies only (the prelude defines every device helper).
  for (const KernelSpec& k : generate_kernels(g, plan_fusion(g), co))
    all += k.source.substr(k.source.find("extern \"C\""));
  return all;
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

TEST(NewFloatOpsCodegen, LogSoftmaxEveryFormCompiles) {
  for (DType dt : kDtypes) {
    // Warp rows, CTA rows, register-resident and looped rows, a symbolic length.
    Graph g(fmt::format("lsm_{}", dtype_name(dt)));
    for (Dim len : {Dim(7), Dim(1000), Dim(4097), Dim(100000), Dim("L")}) {
      Tensor x = g.input(fmt::format("x{}", len.str()), dt, {"N", len});
      Tensor h = g.add_node1("exp", {x});
      Tensor y = g.add_node1("log_softmax", {h});
      g.output(g.add_node1("mul", {y, h}));
      g.output(h);
    }
    Tensor m = g.input("m", dt, {3, 7, 5, 4}, Layout::NHWC);
    g.output(g.add_node1("log_softmax", {m}, {{"axis", int64_t{1}}}));
    compile_all(g);
  }
  Graph g("lsm_src");
  Tensor x = g.input("x", DType::F32, {"N", 1000});
  g.output(g.add_node1("log_softmax", {x}));
  std::string src = source_of(g, 90);
  EXPECT_NE(src.find("log_sum = logf("), std::string::npos);
  EXPECT_NE(src.find("- row_max) - log_sum"), std::string::npos);
}

TEST(NewFloatOpsCodegen, ReduceL2AndProdCompile) {
  const std::vector<std::vector<int64_t>> axes_list = {{}, {1}, {3}, {2, 3}, {0, 2}};
  for (DType dt : kDtypes)
    for (Layout l : {Layout::NCHW, Layout::NHWC}) {
      Graph g(fmt::format("red_{}_{}", dtype_name(dt), l == Layout::NHWC ? "nhwc" : "nchw"));
      Tensor x = g.input("x", dt, {"N", 5, 7, 4097}, l);
      for (const char* op : {"reduce_l2", "reduce_prod"})
        for (const auto& axes : axes_list)
          g.output(g.add_node1("sqrt", {g.reduce(op, g.add_node1("abs", {x}), axes, true)}));
      compile_all(g);
    }
  Graph g("red_src");
  Tensor x = g.input("x", DType::F32, {"N", 4096});
  g.output(g.reduce("reduce_l2", x, {1}));
  g.output(g.reduce("reduce_prod", x, {1}));
  std::string src = source_of(g, 90);
  EXPECT_NE(src.find("sqrtf(acc)"), std::string::npos);
  EXPECT_NE(src.find("acc *= "), std::string::npos);
  EXPECT_NE(src.find("kiln_warp_prod(acc)"), std::string::npos);
}

TEST(NewFloatOpsCodegen, CumsumEveryFlagAndAxisCompiles) {
  for (DType dt : kDtypes)
    for (Layout l : {Layout::NCHW, Layout::NHWC}) {
      Graph g(fmt::format("cs_{}_{}", dtype_name(dt), l == Layout::NHWC ? "nhwc" : "nchw"));
      Tensor x = g.input("x", dt, {"N", 7, 5, 300}, l);
      Tensor e = g.add_node1("exp", {x});
      for (int64_t ax = 0; ax < 4; ++ax)
        for (int64_t flags = 0; flags < 4; ++flags) {
          Tensor y = g.add_node1("cumsum", {e},
                                 {{"axis", ax}, {"exclusive", flags & 1}, {"reverse", flags >> 1}});
          g.output(g.add_node1("add", {y, e}));
        }
      g.output(e);
      Tensor s = g.input("s", dt, {"N", "L"});
      g.output(g.add_node1("cumsum", {s}, {{"axis", int64_t{-1}}}));
      compile_all(g);
    }
  Graph g("cs_src");
  Tensor x = g.input("x", DType::F32, {"N", 4});
  g.output(g.add_node1("cumsum", {x}, {{"axis", int64_t{1}}}));
  Graph h("cs_src_long");
  Tensor y = h.input("y", DType::F32, {"N", 1000});
  h.output(h.add_node1("cumsum", {y}, {{"axis", int64_t{1}}, {"exclusive", int64_t{1}}}));
  // A short line across memory (over C of NCHW): a thread per line.
  Graph m("cs_src_serial");
  Tensor z = m.input("z", DType::F32, {"N", 7, 300});
  m.output(m.add_node1("cumsum", {z}, {{"axis", int64_t{1}}, {"exclusive", int64_t{1}}}));
  std::string src = source_of(g, 90), src_long = source_of(h, 90), src_serial = source_of(m, 90);
  EXPECT_NE(src.find("kiln_block_scan<32>"), std::string::npos);  // a short line: one warp
  EXPECT_NE(src_long.find("kiln_block_scan<256>"), std::string::npos);
  EXPECT_NE(src_long.find("carry + excl"), std::string::npos);
  EXPECT_EQ(src_serial.find("kiln_block_scan<"), std::string::npos);
  EXPECT_NE(src_serial.find("const float y = acc;"), std::string::npos);
}

TEST(NewFloatOpsCodegen, ConvActivationEpiloguesCompile) {
  for (DType dt : kDtypes)
    for (Layout l : {Layout::NCHW, Layout::NHWC}) compile_all(conv_activations(dt, l));
}

}  // namespace
}  // namespace kiln
