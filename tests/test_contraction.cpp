// conv2d / matmul code generation: every variant generates source that NVRTC compiles for sm_80
// and sm_90, the right path (tensor-core / direct) is picked, kernel arguments carry the symbolic
// dims, and unsupported groups are user errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "codegen/contraction_common.hpp"
#include "codegen/emit.hpp"
#include "codegen/nvrtc.hpp"
#include "engine/ir/graph_key.hpp"
#include "heuristics/contraction_config.hpp"
#include "kiln/error.hpp"
#include "kiln/graph.hpp"

using namespace kiln;

namespace {

// A contraction group: the anchor (first node producing `anchor_out`) plus every later node,
// outputs = the graph outputs and `extra_outputs`.
FusionGroup make_group(const Graph& g, const std::vector<int>& extra_outputs = {}) {
  FusionGroup grp;
  grp.id = 7;
  grp.kind = GroupKind::Contraction;
  std::set<int> produced;
  for (int i = 0; i < static_cast<int>(g.nodes().size()); ++i) {
    const Node& n = g.nodes()[i];
    if (grp.anchor < 0 && (n.op == OpKind::Conv2d || n.op == OpKind::Matmul)) grp.anchor = i;
    if (grp.anchor < 0) continue;
    grp.nodes.push_back(i);
    for (int t : n.inputs)
      if (!produced.count(t) &&
          std::find(grp.inputs.begin(), grp.inputs.end(), t) == grp.inputs.end())
        grp.inputs.push_back(t);
    for (int t : n.outputs) produced.insert(t);
  }
  grp.outputs = g.outputs();
  for (int t : extra_outputs) grp.outputs.push_back(t);
  return grp;
}

KernelSpec emit(const Graph& g, const FusionGroup& grp, int sm = 90) {
  CodegenOptions o;
  o.sm = sm;
  EmitContext cx{g, o};
  return emit_contraction(cx, grp);
}

void compile_for(const KernelSpec& k, std::vector<std::string> archs = {"sm_80", "sm_90"}) {
  for (const auto& arch : archs) {
    try {
      NvrtcResult r = nvrtc_compile(k.source, k.name, arch);
      EXPECT_FALSE(r.cubin.empty()) << k.name << " " << arch;
    } catch (const Error& e) {
      ADD_FAILURE() << k.name << " for " << arch << ": " << e.what();
    }
  }
}

// NVRTC compiles `k` for sm_90a and ptxas reports no spills.
void expect_sm90a_without_spills(const KernelSpec& k) {
  try {
    NvrtcResult r = nvrtc_compile(k.source, k.name, "sm_90a", {"--ptxas-options=-v"});
    EXPECT_NE(r.log.find("0 bytes spill stores"), std::string::npos) << k.name << "\n" << r.log;
  } catch (const Error& e) {
    ADD_FAILURE() << k.name << ": " << e.what();
  }
}

bool uses_mma(const KernelSpec& k) {
  return k.source.find("G::mainloop") != std::string::npos;
}
bool uses_direct(const KernelSpec& k) {
  return k.name.find("_direct") != std::string::npos;
}

struct ConvCase {
  const char* label;
  DType dt;
  int64_t c, k, r, s;
  std::array<int64_t, 2> stride;
  std::vector<int64_t> pad;
  std::array<int64_t, 2> dil;
  int64_t groups;
  Layout xl, wl;
  std::vector<std::string> epi;  // pointwise ops after the conv
  bool bias;
  bool expect_mma;
};

Graph conv_graph(const ConvCase& c, Dim n = "N", Dim h = 20, Dim w = 18) {
  Graph g("conv");
  Tensor x = g.input("x", c.dt, {n, c.c, h, w}, c.xl);
  Tensor wt = g.constant_random("w", {c.dt, {c.k, c.c / c.groups, c.r, c.s}, c.wl, {}}, "normal", 0,
                                0.1, 1);
  Tensor b;
  if (c.bias) b = g.constant_random("b", {c.dt, {c.k}, Layout::NCHW, {}}, "normal", 0, 0.1, 2);
  Conv2dOptions o;
  o.stride = c.stride;
  o.padding = c.pad;
  o.dilation = c.dil;
  o.groups = c.groups;
  Tensor y = g.conv2d(x, wt, b, o);
  for (const auto& op : c.epi) {
    if (op == "add") {
      Tensor res = g.input("res", g.desc(y));
      y = g.add(y, res);
    } else if (op == "scale_shift") {
      Tensor sc =
          g.constant_random("sc", {c.dt, {1, c.k, 1, 1}, Layout::NCHW, {}}, "normal", 1, 0.1, 3);
      Tensor sh =
          g.constant_random("sh", {c.dt, {1, c.k, 1, 1}, Layout::NCHW, {}}, "normal", 0, 0.1, 4);
      y = g.add(g.mul(y, sc), sh);
    } else if (op == "batchnorm") {
      auto v = [&](const char* nm, double mean, uint64_t seed) {
        return g.constant_random(nm, {c.dt, {c.k}, Layout::NCHW, {}}, "uniform", mean, mean + 1,
                                 seed);
      };
      y = g.batchnorm(y, v("bn_g", 0.5, 5), v("bn_b", -0.5, 6), v("bn_m", -0.5, 7),
                      v("bn_v", 0.5, 8));
    } else if (op == "gelu_tanh") {
      y = g.gelu(y, GeluApprox::Tanh);
    } else if (op == "leaky_relu") {
      y = g.leaky_relu(y, 0.1);
    } else if (op == "clamp") {
      y = g.clamp(y, -1.0, 6.0);
    } else if (op == "cast_f32") {
      y = g.cast(y, DType::F32);
    } else {
      y = g.add_node1(op, {y});
    }
  }
  g.output(y);
  return g;
}

}  // namespace

TEST(Contraction, ConvVariantsCompile) {
  const Layout H = Layout::NHWC, C = Layout::NCHW;
  std::vector<ConvCase> cases = {
      {"3x3 f16", DType::F16, 64, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, H, H, {"relu"}, true, true},
      {"3x3 bf16",
       DType::BF16,
       64,
       128,
       3,
       3,
       {1, 1},
       {1, 1},
       {1, 1},
       1,
       H,
       H,
       {"silu"},
       true,
       true},
      {"1x1", DType::F16, 256, 64, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, H, H, {}, false, true},
      {"7x7 s2 stem C=3",
       DType::F16,
       3,
       64,
       7,
       7,
       {2, 2},
       {3, 3},
       {1, 1},
       1,
       H,
       H,
       {"relu"},
       true,
       true},
      {"stride2 asym pad",
       DType::F16,
       32,
       48,
       3,
       3,
       {2, 2},
       {0, 1, 1, 0},
       {1, 1},
       1,
       H,
       H,
       {"add", "relu"},
       true,
       true},
      {"dilation 2",
       DType::BF16,
       16,
       32,
       3,
       3,
       {1, 1},
       {2, 2},
       {2, 2},
       1,
       H,
       H,
       {"gelu_tanh"},
       true,
       true},
      {"odd C K", DType::F16, 5, 7, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, H, H, {"sigmoid"}, true, true},
      {"stem C=4 (8-byte loads)",
       DType::F16,
       4,
       64,
       7,
       7,
       {2, 2},
       {3, 3},
       {1, 1},
       1,
       H,
       H,
       {"relu"},
       true,
       true},
      {"C=12 (8-byte loads)",
       DType::BF16,
       12,
       24,
       3,
       3,
       {1, 1},
       {1, 1},
       {1, 1},
       1,
       H,
       H,
       {"silu"},
       true,
       true},
      {"KCRS filter",
       DType::F16,
       16,
       16,
       3,
       3,
       {1, 1},
       {1, 1},
       {1, 1},
       1,
       H,
       C,
       {"tanh"},
       false,
       true},
      {"scale shift clamp",
       DType::F16,
       64,
       64,
       3,
       3,
       {1, 1},
       {1, 1},
       {1, 1},
       1,
       H,
       H,
       {"scale_shift", "clamp"},
       true,
       true},
      {"cast f32 out",
       DType::BF16,
       64,
       64,
       1,
       1,
       {1, 1},
       {0, 0},
       {1, 1},
       1,
       H,
       H,
       {"leaky_relu", "cast_f32"},
       true,
       true},
      {"batchnorm epilogue",
       DType::BF16,
       32,
       32,
       3,
       3,
       {1, 1},
       {1, 1},
       {1, 1},
       1,
       H,
       H,
       {"batchnorm", "relu"},
       false,
       true},
      {"groups 4",
       DType::F16,
       32,
       64,
       3,
       3,
       {1, 1},
       {1, 1},
       {1, 1},
       4,
       H,
       H,
       {"relu"},
       true,
       false},
      {"depthwise",
       DType::F16,
       32,
       32,
       3,
       3,
       {2, 2},
       {1, 1},
       {1, 1},
       32,
       H,
       H,
       {"relu"},
       true,
       false},
      {"nchw f16",
       DType::F16,
       16,
       32,
       3,
       3,
       {1, 1},
       {1, 1},
       {1, 1},
       1,
       C,
       C,
       {"relu"},
       true,
       false},
      {"f32 nhwc", DType::F32, 16, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, H, H, {"elu"}, true, false},
      {"f32 nchw 5x5", DType::F32, 3, 8, 5, 5, {2, 2}, {2, 2}, {1, 1}, 1, C, C, {}, false, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    Graph g = conv_graph(c);
    FusionGroup grp = make_group(g);
    KernelSpec k = emit(g, grp);
    EXPECT_EQ(uses_mma(k), c.expect_mma) << k.name;
    // NHWC grouped / depthwise convs take the grouped kernel, everything else a tiled one.
    EXPECT_FALSE(uses_direct(k)) << k.name;
    EXPECT_EQ(k.group, 7);
    EXPECT_EQ(k.name.rfind("conv_", 0), 0u) << k.name;
    for (const auto& op : c.epi) {
      if (op == "relu" || op == "silu" || op == "sigmoid") {
        EXPECT_NE(k.name.find(op), std::string::npos) << k.name;
      }
    }
    if (c.bias) {
      EXPECT_NE(k.name.find("bias"), std::string::npos) << k.name;
    }
    // The batch size is never baked in: the grid grows with it, and the kernel takes it as an
    // argument unless its grid covers the batch exactly (the tiled depthwise kernel: one CTA per
    // image tile, the image from blockIdx).
    bool has_n = false;
    for (const auto& a : k.args)
      if (a.kind == KernelArg::Kind::Int && !a.value.is_static()) has_n = true;
    EXPECT_TRUE(has_n || k.name.find("_nhwc_dw") != std::string::npos) << k.name;
    EXPECT_FALSE(k.grid[0].is_static()) << k.name;
    compile_for(k);
  }
}

// Every variant of the grouped / depthwise kernel generates source NVRTC compiles for sm_80 and
// sm_90, under a name that says what it is; NCHW and 128-channel groups keep the direct kernel.
TEST(Contraction, GroupedConvVariantsCompile) {
  const Layout H = Layout::NHWC, C = Layout::NCHW;
  struct G {
    DType dt;
    int64_t c, k, r, s;
    std::array<int64_t, 2> stride, dil;
    int64_t groups;
    Layout xl;
    std::vector<std::string> epi;
    const char* name;  // expected kernel name ("" : the direct kernel)
  };
  const std::vector<G> cases = {
      {DType::F16,
       32,
       32,
       3,
       3,
       {2, 2},
       {1, 1},
       32,
       H,
       {"relu"},
       "conv_f16_nhwc_dw3x3_s2_t10x10c32_bias_relu"},
      {DType::F16,
       24,
       24,
       5,
       5,
       {1, 1},
       {1, 1},
       24,
       H,
       {"add"},
       "conv_f16_nhwc_dw5x5_t20x20c24_bias_add"},
      {DType::BF16, 96, 96, 7, 7, {1, 1}, {1, 1}, 96, H, {}, "conv_bf16_nhwc_dw7x7_t11x20c32_bias"},
      {DType::F16,
       40,
       40,
       9,
       9,
       {2, 2},
       {1, 1},
       40,
       H,
       {"silu"},
       "conv_f16_nhwc_dw9x9_s2_t6x5c40_bias_silu"},
      {DType::F32,
       36,
       36,
       3,
       3,
       {1, 1},
       {2, 2},
       36,
       H,
       {"relu"},
       "conv_f32_nhwc_dw3x3_d2_c4x4_bias_relu"},
      {DType::F16, 16, 32, 3, 3, {1, 1}, {1, 1}, 16, H, {}, "conv_f16_nhwc_dw3x3_m2_c8x6_bias"},
      {DType::F16, 7, 7, 3, 3, {1, 1}, {1, 1}, 7, H, {}, "conv_f16_nhwc_dw3x3_c1x6_bias"},
      {DType::F16,
       128,
       128,
       3,
       3,
       {1, 1},
       {1, 1},
       32,
       H,
       {"relu"},
       "conv_f16_nhwc_g32_3x3_c8x6_bias_relu"},
      {DType::F16,
       64,
       64,
       3,
       3,
       {2, 2},
       {1, 1},
       8,
       H,
       {"add", "relu"},
       "conv_f16_nhwc_g8_3x3_s2_mma_m128n8k8_bias_add_relu"},
      {DType::BF16,
       64,
       64,
       3,
       3,
       {1, 1},
       {1, 1},
       4,
       H,
       {},
       "conv_bf16_nhwc_g4_3x3_mma_m128n16k16_bias"},
      {DType::F16,
       96,
       96,
       3,
       3,
       {1, 1},
       {1, 1},
       2,
       H,
       {},
       "conv_f16_nhwc_g2_3x3_mma_m128n24k16_bias"},
      {DType::F32,
       36,
       36,
       3,
       3,
       {1, 1},
       {2, 2},
       6,
       H,
       {"relu"},
       "conv_f32_nhwc_g6_3x3_d2_c2x4_bias_relu"},
      {DType::F32, 64, 64, 3, 3, {1, 1}, {1, 1}, 32, H, {}, "conv_f32_nhwc_g32_3x3_c4x6_bias"},
      {DType::F16,
       1024,
       1024,
       3,
       3,
       {2, 2},
       {1, 1},
       32,
       H,
       {"relu"},
       "conv_f16_nhwc_g32_3x3_s2_mma_m128n32k16_bias_relu"},
      {DType::BF16,
       32,
       64,
       3,
       3,
       {1, 1},
       {2, 2},
       2,
       H,
       {"add"},
       "conv_bf16_nhwc_g2_3x3_d2_mma_m128n32k16_bias_add"},
      {DType::F16, 256, 256, 3, 3, {1, 1}, {1, 1}, 2, H, {}, ""},
      {DType::F16, 32, 32, 3, 3, {1, 1}, {1, 1}, 32, C, {}, ""},
  };
  for (const G& c : cases) {
    SCOPED_TRACE(c.name);
    ConvCase cc{"grouped", c.dt,     c.c,  c.k,  c.r,   c.s,  c.stride, {c.r / 2, c.s / 2},
                c.dil,     c.groups, c.xl, c.xl, c.epi, true, false};
    Graph g = conv_graph(cc);
    KernelSpec k = emit(g, make_group(g));
    if (*c.name == 0) {
      EXPECT_TRUE(uses_direct(k)) << k.name;
      continue;
    }
    EXPECT_EQ(k.name, c.name);
    EXPECT_LE(k.smem_bytes, 48 * 1024);
    compile_for(k);
  }
}

TEST(Contraction, PreActivationIsAlsoWritten) {
  Graph g("pre");
  Tensor x = g.input("x", DType::F16, {"N", 64, 14, 14}, Layout::NHWC);
  Tensor w =
      g.constant_random("w", {DType::F16, {64, 64, 3, 3}, Layout::NHWC, {}}, "normal", 0, 0.1, 1);
  Conv2dOptions o;
  o.padding = {1, 1};
  Tensor y = g.conv2d(x, w, {}, o);
  Tensor r = g.relu(y);
  g.output(r);
  g.output(y);
  FusionGroup grp = make_group(g);
  KernelSpec k = emit(g, grp);
  // One (pair) store per output tensor, in the kernel itself.
  std::string kernel = k.source.substr(k.source.find("extern \"C\""));
  size_t stores = 0;
  for (size_t pos = 0; (pos = kernel.find("= kc_pack_f16(", pos)) != std::string::npos; ++pos)
    ++stores;
  EXPECT_EQ(stores, 2u) << kernel;
  int tensors = 0;
  for (const auto& a : k.args) tensors += a.kind == KernelArg::Kind::Tensor;
  EXPECT_EQ(tensors, 4);  // x, w, y, relu(y)
  compile_for(k);
}

struct MatmulCase {
  const char* label;
  DType dt;
  Shape a, b;
  bool ta, tb, bias;
  std::vector<std::string> epi;
  bool expect_mma;
};

TEST(Contraction, MatmulVariantsCompile) {
  std::vector<MatmulCase> cases = {
      {"plain bf16 gelu", DType::BF16, {"M", 256}, {256, 512}, false, false, true, {"gelu"}, true},
      {"ta f16", DType::F16, {128, "M"}, {128, 64}, true, false, false, {}, true},
      {"tb f16", DType::F16, {"M", 96}, {80, 96}, false, true, true, {"relu"}, true},
      {"ta tb bf16", DType::BF16, {64, "M"}, {40, 64}, true, true, false, {"silu"}, true},
      {"odd K", DType::F16, {"M", 37}, {37, 19}, false, false, true, {}, true},
      {"batched broadcast",
       DType::F16,
       {"B", "M", 64},
       {64, 32},
       false,
       false,
       false,
       {"tanh"},
       true},
      {"batched both",
       DType::BF16,
       {2, "B", 16, 64},
       {1, "B", 48, 64},
       false,
       true,
       true,
       {},
       true},
      {"f32", DType::F32, {"M", 64}, {64, 32}, false, false, true, {"relu"}, false},
      {"f32 batched ta", DType::F32, {"B", 64, "M"}, {"B", 64, 32}, true, false, false, {}, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    Graph g("mm");
    Tensor a = g.input("a", c.dt, c.a);
    Tensor b = g.input("b", c.dt, c.b);
    Dim n = c.tb ? c.b[c.b.size() - 2] : c.b.back();
    Tensor bias;
    if (c.bias) bias = g.constant_random("bias", {c.dt, {n}, Layout::NCHW, {}}, "normal", 0, 1, 3);
    Tensor y = g.matmul(a, b, bias, c.ta, c.tb);
    for (const auto& op : c.epi)
      y = op == "gelu" ? g.gelu(y, GeluApprox::Tanh) : g.add_node1(op, {y});
    g.output(y);
    KernelSpec k = emit(g, make_group(g));
    EXPECT_EQ(uses_mma(k), c.expect_mma) << k.name;
    EXPECT_EQ(k.name.rfind("matmul_", 0), 0u) << k.name;
    compile_for(k);
  }
}

TEST(Contraction, LargeMatmulPicksBigTensorCoreTile) {
  Graph g("big");
  Tensor a = g.input("a", DType::BF16, {8192, 16384});
  Tensor b = g.input("b", DType::BF16, {16384, 4096});
  Tensor bias =
      g.constant_random("bias", {DType::BF16, {4096}, Layout::NCHW, {}}, "normal", 0, 1, 3);
  Tensor y = g.gelu(g.matmul(a, b, bias), GeluApprox::Tanh);
  g.output(y);
  KernelSpec k = emit(g, make_group(g));
  EXPECT_TRUE(uses_mma(k));
  EXPECT_NE(k.name.find("matmul_bf16_t"), std::string::npos) << k.name;
  EXPECT_NE(k.name.find("bias_gelu"), std::string::npos) << k.name;
  EXPECT_GE(k.block[0], 128);
  EXPECT_GT(k.smem_bytes, 48 * 1024);
  EXPECT_EQ(k.grid[0].value() * k.grid[1].value() >= 132, true);
  compile_for(k);
}

TEST(Contraction, ConfigAlwaysExists) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (int64_t m : {1, 7, 100, 100000})
      for (int64_t n : {1, 8, 64, 1000})
        for (int64_t kk : {1, 3, 64, 5000}) {
          ContractionProblemInfo p;
          p.m = m;
          p.n = n;
          p.k = kk;
          p.dtype = dt;
          ContractionConfig c = choose_contraction_config(p);
          if (dt == DType::F32 || kk < 16) {
            EXPECT_EQ(c.kind, ContractionConfig::Kind::Simt);
          } else {
            ASSERT_EQ(c.kind, ContractionConfig::Kind::Mma);
            EXPECT_LE(c.smem_bytes(), p.smem_optin);
            EXPECT_EQ(c.bm % c.wm, 0);
            EXPECT_EQ(c.bn % c.wn, 0);
          }
        }
  // Small problems get small tiles (more CTAs), big ones big tiles.
  ContractionProblemInfo small;
  small.m = 32 * 49;
  small.n = 512;
  small.k = 4608;
  ContractionProblemInfo big;
  big.m = 128 * 56 * 56;
  big.n = 256;
  big.k = 576;
  ContractionConfig cs = choose_contraction_config(small), cb = choose_contraction_config(big);
  EXPECT_LT(cs.bm * cs.bn, cb.bm * cb.bn) << cs.str() << " vs " << cb.str();
}

TEST(Contraction, NonPointwiseEpilogueIsAUserError) {
  Graph g("bad");
  Tensor a = g.input("a", DType::F16, {"M", 64});
  Tensor b = g.input("b", DType::F16, {64, 32});
  Tensor y = g.softmax(g.matmul(a, b));
  g.output(y);
  FusionGroup grp = make_group(g);
  try {
    emit(g, grp);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::User);
    EXPECT_NE(std::string(e.what()).find("softmax"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("group 7"), std::string::npos) << e.what();
  }
}

TEST(Contraction, DISABLED_DumpSource) {
  Graph g("dump");
  Tensor x = g.input("x", DType::F16, {"N", 64, 56, 56}, Layout::NHWC);
  Tensor w =
      g.constant_random("w", {DType::F16, {64, 64, 3, 3}, Layout::NHWC, {}}, "normal", 0, 0.1, 1);
  Tensor b = g.constant_random("b", {DType::F16, {64}, Layout::NCHW, {}}, "normal", 0, 0.1, 2);
  Conv2dOptions o;
  o.padding = {1, 1};
  g.output(g.relu(g.conv2d(x, w, b, o)));
  KernelSpec k = emit(g, make_group(g));
  Graph g2("mm");
  Tensor a2 = g2.input("a", DType::BF16, {"B", 64, "M"});
  Tensor b2 = g2.input("b", DType::BF16, {1, 48, 64});
  g2.output(g2.matmul(a2, b2, {}, true, true));
  KernelSpec k2 = emit(g2, make_group(g2));
  printf("%s\n", k2.source.substr(k2.source.find("typedef KcGemm")).c_str());
  std::string src = k.source.substr(k.source.find("typedef KcGemm"));
  printf("%s\n", src.c_str());
}

namespace {

// The ResNet-50 layers of bench/bench_conv.py and the benchmark matmul, as graphs.
Graph bench_conv_graph(int64_t c, int64_t k, int64_t h, int64_t r, int64_t stride, int64_t pad) {
  Graph g("bconv");
  Tensor x = g.input("x", DType::F16, {"N", c, h, h}, Layout::NHWC);
  Tensor w =
      g.constant_random("w", {DType::F16, {k, c, r, r}, Layout::NHWC, {}}, "normal", 0, 0.05, 1);
  Tensor b = g.constant_random("b", {DType::F16, {k}, Layout::NCHW, {}}, "normal", 0, 1, 2);
  Conv2dOptions o;
  o.stride = {stride, stride};
  o.padding = {pad, pad};
  g.output(g.relu(g.conv2d(x, w, b, o)));
  return g;
}

Graph bench_matmul_graph(bool ta, bool tb, DType dt = DType::BF16) {
  Graph g("bmm");
  Tensor a = g.input("a", dt, ta ? Shape{16384, "M"} : Shape{"M", 16384});
  Tensor b = g.input("b", dt, tb ? Shape{4096, 16384} : Shape{16384, 4096});
  Tensor bias = g.constant_random("bias", {dt, {4096}, Layout::NCHW, {}}, "normal", 0, 1, 3);
  g.output(g.gelu(g.matmul(a, b, bias, ta, tb), GeluApprox::Tanh));
  return g;
}

std::vector<Graph> bench_graphs() {
  std::vector<Graph> gs;
  gs.push_back(bench_conv_graph(64, 64, 56, 3, 1, 1));
  gs.push_back(bench_conv_graph(256, 64, 56, 1, 1, 0));
  gs.push_back(bench_conv_graph(128, 128, 28, 3, 1, 1));
  gs.push_back(bench_conv_graph(256, 256, 14, 3, 1, 1));
  gs.push_back(bench_conv_graph(1024, 256, 14, 1, 1, 0));
  gs.push_back(bench_conv_graph(512, 512, 7, 3, 1, 1));
  gs.push_back(bench_conv_graph(3, 64, 224, 7, 2, 3));
  gs.push_back(bench_matmul_graph(false, false));
  gs.push_back(bench_matmul_graph(false, true, DType::F16));
  return gs;
}

KernelSpec emit_arch_specific(const Graph& g, const std::string& schedule = "") {
  CodegenOptions o;
  o.sm = 90;
  o.arch_specific = true;
  o.schedule = parse_schedule_overrides(schedule);
  EmitContext cx{g, o};
  return emit_contraction(cx, make_group(g));
}

}  // namespace

// With arch-specific code allowed on sm_90, every benchmark layer takes the wgmma path, compiles
// for sm_90a and fits in registers (ptxas reports no spills).
TEST(Contraction, WgmmaKernelsCompileForSm90aWithoutSpills) {
  for (const Graph& g : bench_graphs()) {
    KernelSpec k = emit_arch_specific(g);
    SCOPED_TRACE(k.name);
    EXPECT_NE(k.name.find("_wg"), std::string::npos);
    EXPECT_EQ(k.arch, "sm_90a");
    EXPECT_NE(k.source.find("wgmma.mma_async"), std::string::npos);
    EXPECT_EQ(k.block[0] % 128, 0);
    EXPECT_LE(k.smem_bytes, 232448);
    try {
      NvrtcResult r = nvrtc_compile(k.source, k.name, k.arch, {"--ptxas-options=-v"});
      EXPECT_FALSE(r.cubin.empty());
      EXPECT_NE(r.log.find("0 bytes spill stores"), std::string::npos) << r.log;
      EXPECT_EQ(r.log.find("bytes stack frame") != std::string::npos &&
                    r.log.find(" 0 bytes stack frame") == std::string::npos,
                false)
          << r.log;
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

// Where the operands allow TMA loads the rules take the warp-specialized TMA kernel (it beat the
// cp.async tiles on every layer measured): 3x3 convs with C % 64 == 0 through pixel blocks of one
// image (the tile is scored by those blocks: 7x7 outputs take 64-row 8x8 blocks), 1x1 convs and
// matmuls as plain GEMMs; never split-K, never more than two consumer warpgroups. Other operands
// keep the cp.async kernels, and autotuning measures the TMA tiles first.
TEST(Contraction, TmaKernelsWhereTheOperandsAllowThem) {
  struct Case {
    Graph g;
    std::string tile;  // "" = any TMA tile
  };
  std::vector<Case> cases;
  // 3x3 convs: im2col TMA, tiles over GEMM rows (N = 32 where the batch is symbolic).
  cases.push_back({bench_conv_graph(128, 128, 28, 3, 1, 1), "wg64x128x64_s4_i2c"});
  cases.push_back({specialize_graph(bench_conv_graph(128, 128, 28, 3, 1, 1), {{"N", 128}}),
                   "wg128x128x64_s5_i2c"});
  cases.push_back({bench_conv_graph(64, 64, 56, 3, 1, 1), "wg128x64x64_s4_i2c"});
  cases.push_back({specialize_graph(bench_conv_graph(512, 512, 7, 3, 1, 1), {{"N", 32}}),
                   "wg64x128x64_s4_i2c"});
  cases.push_back({specialize_graph(bench_conv_graph(512, 512, 7, 3, 1, 1), {{"N", 128}}),
                   "wg64x128x64_s4_i2c"});
  cases.push_back({specialize_graph(bench_conv_graph(256, 256, 14, 3, 1, 1), {{"N", 128}}),
                   "wg128x128x64_s5_i2c"});
  cases.push_back({bench_conv_graph(256, 64, 56, 1, 1, 0), "wg128x64x64_s4_tma"});
  cases.push_back({bench_conv_graph(128, 128, 28, 3, 2, 1), "_i2c"});  // strided
  cases.push_back({bench_matmul_graph(false, false), ""});
  for (const Case& c : cases) {
    KernelSpec k = emit_arch_specific(c.g);
    SCOPED_TRACE(k.name);
    EXPECT_NE(k.name.find(c.tile.empty() ? "_tma" : c.tile), std::string::npos);
    EXPECT_EQ(k.name.find("_sk"), std::string::npos);
    EXPECT_LE(k.block[0], 3 * 128);
    int maps = 0;
    for (const KernelArg& a : k.args) maps += a.kind == KernelArg::Kind::TensorMap;
    EXPECT_GE(maps, 1);
    FusionGroup grp = make_group(c.g);
    contraction::Problem pr = contraction::describe(c.g, grp);
    std::vector<ContractionConfig> cands =
        contraction_candidates(contraction::problem_info(pr, 90, true));
    ASSERT_GE(cands.size(), 6u);
    for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(cands[i].tma) << cands[i].str();
  }
  // No TMA: C not a multiple of 64 (3x3), transposed A, or arch-specific code not allowed.
  for (const Graph& g : {bench_conv_graph(96, 128, 28, 3, 1, 1), bench_matmul_graph(true, false)}) {
    KernelSpec k = emit_arch_specific(g);
    EXPECT_EQ(k.name.find("_tma"), std::string::npos) << k.name;
  }
  Graph g = bench_conv_graph(128, 128, 28, 3, 1, 1);
  EXPECT_EQ(emit(g, make_group(g)).name.find("_tma"), std::string::npos);
}

// C % 4 == 0 but not % 8 (the stem padded to 4 channels): the "_c4" kernels copy each 16-byte
// chunk as two 8-byte halves (4 channels of one filter tap each), for A and for the KRSC filter,
// on the wgmma path (plain and warp-specialized) and the mma.sync path, without spills.
TEST(Contraction, FourChannelConvsLoadEightByteHalves) {
  for (int64_t c : {4, 12}) {
    Graph g = bench_conv_graph(c, 64, 30, 7, 2, 3);
    FusionGroup grp = make_group(g);
    contraction::Problem pr = contraction::describe(g, grp);
    ContractionConfig ws = wgmma_tile(128, 64, 4);
    ws.ws = true;
    ContractionConfig mma = choose_mma_config(contraction::problem_info(pr, 80));
    for (auto [cfg, arch] :
         {std::pair{choose_contraction_config(contraction::problem_info(pr, 90, true)), "sm_90a"},
          std::pair{ws, "sm_90a"}, std::pair{mma, "sm_80"}}) {
      KernelSpec k = contraction::emit_with_config(pr, cfg, 90);
      SCOPED_TRACE(k.name);
      EXPECT_NE(k.name.find("_c4_"), std::string::npos);
      EXPECT_NE(k.source.find("kc_cp_async8("), std::string::npos);
      EXPECT_EQ(k.source.find("kc_st_shared_v4(dst"), std::string::npos);
      try {
        NvrtcResult r = nvrtc_compile(k.source, k.name, arch, {"--ptxas-options=-v"});
        EXPECT_NE(r.log.find("0 bytes spill stores"), std::string::npos) << r.log;
      } catch (const Error& e) {
        ADD_FAILURE() << e.what();
      }
    }
  }
}

// Without arch-specific code (or off sm_90) the mma.sync kernel stays: it runs on any sm_80+.
TEST(Contraction, WgmmaOnlyWhenArchSpecific) {
  Graph g = bench_conv_graph(64, 64, 56, 3, 1, 1);
  KernelSpec plain = emit(g, make_group(g));
  EXPECT_TRUE(plain.arch.empty());
  EXPECT_EQ(plain.name.find("_wg"), std::string::npos) << plain.name;
  CodegenOptions o;
  o.sm = 80;
  o.arch_specific = true;
  EmitContext cx{g, o};
  KernelSpec a80 = emit_contraction(cx, make_group(g));
  EXPECT_TRUE(a80.arch.empty());
  EXPECT_EQ(a80.name.find("_wg"), std::string::npos) << a80.name;
  // Transposed A (M-major) has no wgmma variant: mma.sync.
  Graph t = bench_matmul_graph(true, false);
  KernelSpec kt = emit_arch_specific(t);
  EXPECT_TRUE(kt.arch.empty()) << kt.name;
  EXPECT_TRUE(uses_mma(kt)) << kt.name;
}

// Writes the sm_90a cubins of the benchmark kernels to /tmp/kiln_wgmma for cuobjdump -sass.
TEST(Contraction, DISABLED_DumpWgmmaCubins) {
  std::filesystem::create_directories("/tmp/kiln_wgmma");
  for (const Graph& g : bench_graphs()) {
    KernelSpec k = emit_arch_specific(g);
    NvrtcResult r = nvrtc_compile(k.source, k.name, k.arch, {"--ptxas-options=-v"});
    printf("%s\n%s\n", k.name.c_str(), r.log.c_str());
    std::ofstream("/tmp/kiln_wgmma/" + k.name + ".cubin", std::ios::binary)
        .write(r.cubin.data(), static_cast<std::streamsize>(r.cubin.size()));
    std::ofstream("/tmp/kiln_wgmma/" + k.name + ".cu") << k.source;
  }
}

// Every wgmma tile the heuristics (or the GPU tests) can force compiles for sm_90a without spills,
// for vectorized and scalar (C % 8 != 0, odd K) operand loaders, K-major and N-major B.
TEST(Contraction, EveryWgmmaTileCompiles) {
  std::vector<Graph> gs;
  gs.push_back(bench_conv_graph(64, 64, 56, 3, 1, 1));
  gs.push_back(bench_conv_graph(5, 7, 9, 3, 1, 1));
  {
    Graph g("odd");
    Tensor a = g.input("a", DType::F16, {"M", 37});
    Tensor b = g.input("b", DType::F16, {37, 19});
    g.output(g.matmul(a, b));
    gs.push_back(std::move(g));
  }
  gs.push_back(bench_matmul_graph(false, true, DType::F16));
  const std::vector<std::array<int, 3>> tiles = {{128, 256, 4}, {256, 128, 4}, {128, 128, 5},
                                                 {128, 64, 4},  {64, 128, 4},  {64, 64, 4},
                                                 {64, 256, 3}};
  for (const Graph& g : gs) {
    FusionGroup grp = make_group(g);
    contraction::Problem p = contraction::describe(g, grp);
    ASSERT_TRUE(contraction::wgmma_supported(p));
    for (auto [bm, bn, st] : tiles) {
      for (bool ws : {false, true}) {  // ws: plus a producer warpgroup (at most 2 consumers)
        if (ws && bm > 128) continue;
        ContractionConfig c = wgmma_tile(bm, bn, st);
        c.ws = ws;
        KernelSpec k = contraction::emit_with_config(p, c, 90);
        SCOPED_TRACE(k.name);
        EXPECT_EQ(k.block[0], bm / 64 * 128 + (ws ? 128 : 0));
        EXPECT_EQ(k.name.find("_ws") != std::string::npos, ws);
        EXPECT_EQ(k.source.find("KcWgmmaWs<") != std::string::npos, ws);
        expect_sm90a_without_spills(k);
      }
    }
  }
}

// TMA loads (ContractionConfig::tma): the plain-GEMM operands take 2-D boxes, other NHWC convs
// with C a multiple of 64 a spatially tiled kernel with 4-D boxes; every wgmma tile with at most
// two consumer warpgroups compiles for sm_90a without spills; anything else is a user error.
TEST(Contraction, TmaKernelsCompileForSm90a) {
  std::vector<Graph> gs;
  gs.push_back(bench_conv_graph(256, 64, 56, 1, 1, 0));  // 1x1 conv: [N*H*W, C] x [K, C]^T
  gs.push_back(bench_matmul_graph(false, true));         // B [N, K]: K-major boxes
  gs.push_back(bench_matmul_graph(false, false));        // B [K, N]: 64 x 64 slab boxes
  const std::vector<std::array<int, 3>> tiles = {
      {128, 256, 4}, {128, 128, 5}, {128, 64, 4}, {64, 128, 4}, {64, 64, 4}};
  for (const Graph& g : gs) {
    FusionGroup grp = make_group(g);
    contraction::Problem p = contraction::describe(g, grp);
    ASSERT_TRUE(contraction::tma_supported(p)) << g.name();
    for (auto [bm, bn, st] : tiles) {
      ContractionConfig c = wgmma_tile(bm, bn, st);
      c.ws = c.tma = true;
      KernelSpec k = contraction::emit_with_config(p, c, 90);
      SCOPED_TRACE(k.name);
      EXPECT_NE(k.name.find("_tma"), std::string::npos);
      EXPECT_EQ(k.block[0], bm / 64 * 128 + 128);
      EXPECT_NE(k.source.find("cp.async.bulk.tensor.2d"), std::string::npos);
      EXPECT_EQ(k.source.find("kc_cp_async16(dst"), std::string::npos);  // no cp.async loader
      int maps = 0;
      for (const KernelArg& a : k.args) {
        if (a.kind != KernelArg::Kind::TensorMap) continue;
        ++maps;
        ASSERT_EQ(a.map_box.size(), 2u);
        EXPECT_TRUE(a.map_box[0] == 64 && a.map_box[1] >= 64 && a.map_box[1] <= 256);
        // The kernel also takes the tensor itself (memory planning sees the read).
        EXPECT_TRUE(std::any_of(k.args.begin(), k.args.end(), [&](const KernelArg& t) {
          return t.kind == KernelArg::Kind::Tensor && t.tensor == a.tensor;
        }));
      }
      // A and B, and the output where its tile fits beside the stages (TMA store epilogue).
      const bool stored = k.source.find("kc_tile_store<") != std::string::npos;
      EXPECT_EQ(maps, stored ? 3 : 2);
      // ... where the tile costs no CTA per SM (228 KB per SM, 1 KB reserved per CTA).
      auto per_sm = [](int64_t smem) { return 233472 / (smem + 1024); };
      const int64_t region = (int64_t{bm + bn} * 128 * st + 16 * st + 1023) / 1024 * 1024;
      EXPECT_EQ(stored, per_sm(1024 + region + int64_t{bm} * bn * 2 + 8) >=
                            std::max<int64_t>(1, per_sm(c.smem_bytes())))
          << "tile " << bm << "x" << bn << " s" << st;
      expect_sm90a_without_spills(k);
    }
  }
  // Convs that are not plain GEMMs take the spatially tiled kernel: 4-D boxes per filter tap.
  for (auto [c, h, r, stride, pad] : std::vector<std::array<int, 5>>{
           {64, 56, 3, 1, 1}, {128, 28, 3, 2, 1}, {512, 7, 3, 1, 1}, {256, 14, 1, 2, 0}}) {
    Graph gs = bench_conv_graph(c, 64, h, r, stride, pad);
    FusionGroup grs = make_group(gs);  // the Problem points at it
    contraction::Problem ps = contraction::describe(gs, grs);
    EXPECT_FALSE(contraction::tma_supported(ps));
    ASSERT_TRUE(contraction::tma_spatial_supported(ps));
    for (auto [bm, bn, st] : tiles) {
      if (bm > 128) continue;
      ContractionConfig cs = wgmma_tile(bm, bn, st);
      cs.ws = cs.tma = true;
      KernelSpec k = contraction::emit_with_config(ps, cs, 90);
      SCOPED_TRACE(k.name);
      EXPECT_NE(k.source.find("cp.async.bulk.tensor.4d"), std::string::npos);
      EXPECT_NE(k.source.find("sp_oh0"), std::string::npos);
      int four_d = 0;
      for (const KernelArg& a : k.args)
        if (a.kind == KernelArg::Kind::TensorMap && a.map_dims.size() == 4) {
          ++four_d;
          EXPECT_EQ(a.map_box[0], 64);
          EXPECT_EQ(a.map_box[1] * a.map_box[2], bm * stride * stride);
          EXPECT_EQ(a.map_elem_strides[1], stride);
        }
      EXPECT_EQ(four_d, 1);
      expect_sm90a_without_spills(k);
    }
  }
  // The same convs by im2col-mode TMA: one load per filter tap of BM consecutive output pixels
  // (the bounding box's corners from the padding and the last window's start), GEMM rows.
  for (auto [c, h, r, stride, pad] : std::vector<std::array<int, 5>>{
           {64, 56, 3, 1, 1}, {128, 28, 3, 2, 1}, {512, 7, 3, 1, 1}, {256, 14, 1, 2, 0}}) {
    Graph gs = bench_conv_graph(c, 64, h, r, stride, pad);
    FusionGroup grs = make_group(gs);
    contraction::Problem ps = contraction::describe(gs, grs);
    ASSERT_TRUE(contraction::tma_im2col_supported(ps));
    const int oh = (h + 2 * pad - r) / stride + 1;
    for (auto [bm, bn, st] : tiles) {
      if (bm > 128) continue;
      ContractionConfig cs = wgmma_tma_tile(bm, bn, st, true);
      KernelSpec k = contraction::emit_with_config(ps, cs, 90);
      SCOPED_TRACE(k.name);
      EXPECT_NE(k.name.find("_i2c"), std::string::npos);
      EXPECT_NE(k.source.find("global.im2col.mbarrier"), std::string::npos);
      EXPECT_EQ(k.source.find("sp_oh0"), std::string::npos);
      EXPECT_EQ(k.grid[0].eval({{"N", 3}}), (3 * oh * oh + bm - 1) / bm);
      int i2c = 0;
      for (const KernelArg& a : k.args)
        if (a.kind == KernelArg::Kind::TensorMap && !a.map_im2col.empty()) {
          ++i2c;
          ASSERT_EQ(a.map_dims.size(), 4u);
          const int upper = (oh - 1) * stride - pad - (h - 1);
          EXPECT_EQ(a.map_im2col, (std::vector<int>{-pad, -pad, upper, upper, 64, bm}));
          EXPECT_EQ(a.map_elem_strides, (std::vector<int>{1, stride, stride, 1}));
        }
      EXPECT_EQ(i2c, 1);
      expect_sm90a_without_spills(k);
    }
  }
  // C not a multiple of 64 (a k tile would straddle two taps): neither TMA form.
  Graph g3 = bench_conv_graph(40, 64, 56, 3, 1, 1);
  FusionGroup gr3 = make_group(g3);
  contraction::Problem p3 = contraction::describe(g3, gr3);
  EXPECT_FALSE(contraction::tma_supported(p3));
  EXPECT_FALSE(contraction::tma_spatial_supported(p3));
  EXPECT_FALSE(contraction::tma_im2col_supported(p3));
  for (bool i2c : {false, true}) {
    ContractionConfig c = wgmma_tma_tile(128, 128, 4, i2c);
    try {
      contraction::emit_with_config(p3, c, 90);
      ADD_FAILURE() << "a TMA config for a C=40 3x3 conv was accepted: " << c.str();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::User);
      EXPECT_NE(std::string(e.what()).find("TMA"), std::string::npos) << e.what();
    }
  }
}

// A few N tiles (static N): a 1-D grid with N tiles fastest, so that the CTAs sharing an A tile
// run together; many (or a symbolic N): M tiles along x, N tiles along y.
TEST(Contraction, GridOrderPutsFewNTilesFastest) {
  Graph g = bench_conv_graph(1024, 256, 14, 1, 1, 0);
  FusionGroup grp = make_group(g);
  contraction::Problem pr = contraction::describe(g, grp);
  KernelSpec k = contraction::emit_with_config(pr, wgmma_tma_tile(128, 128, 5), 90);
  EXPECT_EQ(k.grid[1].eval({{"N", 2}}), 1);
  EXPECT_EQ(k.grid[0].eval({{"N", 2}}), (2 * 196 + 127) / 128 * 2);
  EXPECT_NE(k.source.find("kc_mt = blockIdx.x / 2;"), std::string::npos);
  EXPECT_NE(k.source.find("n0 = (long long)(blockIdx.x % 2) * 128;"), std::string::npos);
  KernelSpec one = contraction::emit_with_config(pr, wgmma_tma_tile(128, 256, 4), 90);
  EXPECT_EQ(one.grid[1].eval({{"N", 2}}), 1);
  EXPECT_NE(one.source.find("n0 = (long long)blockIdx.y * 256;"), std::string::npos);
  Graph m = bench_matmul_graph(false, false);
  FusionGroup grm = make_group(m);
  contraction::Problem pm = contraction::describe(m, grm);
  KernelSpec km = contraction::emit_with_config(pm, wgmma_tma_tile(128, 64, 4), 90);
  EXPECT_NE(km.source.find("blockIdx.y"), std::string::npos) << "many N tiles: M fastest";
}

// The rules load a non-GEMM conv's A by im2col TMA (whole GEMM-row tiles), keep the spatial
// pixel blocks among the autotune candidates, and take the pixel blocks when im2col is
// switched off (KILN_SCHEDULE contraction.im2col=2 clears Problem::im2col_allowed).
TEST(Contraction, Im2colTmaIsTheRuleForSpatialConvs) {
  Graph g = bench_conv_graph(128, 128, 28, 3, 1, 1);
  FusionGroup grp = make_group(g);
  contraction::Problem pr = contraction::describe(g, grp);
  ContractionProblemInfo info = contraction::problem_info(pr, 90, true);
  ASSERT_TRUE(info.tma_spatial && info.tma_im2col);
  ContractionConfig rule = choose_contraction_config(info);
  EXPECT_TRUE(rule.tma && rule.im2col) << rule.str();
  std::vector<ContractionConfig> cands = contraction_candidates(info);
  int i2c = 0, spatial = 0;
  for (const ContractionConfig& c : cands) {
    i2c += c.tma && c.im2col;
    spatial += c.tma && !c.im2col;
  }
  EXPECT_GE(i2c, 5);
  EXPECT_GE(spatial, 5);
  pr.im2col_allowed = false;
  ContractionProblemInfo off = contraction::problem_info(pr, 90, true);
  EXPECT_FALSE(off.tma_im2col);
  ContractionConfig r2 = choose_contraction_config(off);
  EXPECT_TRUE(r2.tma && !r2.im2col) << r2.str();
  for (const ContractionConfig& c : contraction_candidates(off)) EXPECT_FALSE(c.im2col) << c.str();
  // A 1x1 stride-1 conv stays a plain TMA GEMM.
  Graph g1 = bench_conv_graph(256, 64, 56, 1, 1, 0);
  FusionGroup grp1 = make_group(g1);
  contraction::Problem p1 = contraction::describe(g1, grp1);
  ContractionProblemInfo i1 = contraction::problem_info(p1, 90, true);
  EXPECT_TRUE(i1.tma_gemm && !i1.tma_im2col);
}

// A conv with C x stride_w = 8 and whole 16-byte chunks per filter row (the stem as the Engine
// widens it: C = 4, 7x8, stride 2, left padding 4) is row-folded by the rules on sm_90a: one TMA
// box of 16-byte chunks per filter row and tile row (no swizzle), the tile rows as output pixel
// blocks; its autotune candidates are row-folded tiles; KILN_SCHEDULE contraction.rowfold=2
// (Problem::rowfold_allowed) and convs that do not qualify get the other kernels.
TEST(Contraction, RowFoldedTmaIsTheRuleForTheStem) {
  auto conv = [](int64_t c, int64_t w, int64_t s, int64_t stride, std::vector<int64_t> pad) {
    Graph g("stem");
    Tensor x = g.input("x", DType::F16, {"N", c, 30, w}, Layout::NHWC);
    Tensor f =
        g.constant_random("w", {DType::F16, {64, c, 7, s}, Layout::NHWC, {}}, "normal", 0, 0.05, 1);
    Tensor b = g.constant_random("b", {DType::F16, {64}, Layout::NCHW, {}}, "normal", 0, 1, 2);
    Conv2dOptions o;
    o.stride = {2, stride};
    o.padding = std::move(pad);
    g.output(g.relu(g.conv2d(x, f, b, o)));
    return g;
  };
  Graph g = conv(4, 224, 8, 2, {3, 4, 3, 3});
  FusionGroup grp = make_group(g);
  contraction::Problem pr = contraction::describe(g, grp);
  ASSERT_TRUE(contraction::tma_rowfold_supported(pr));
  ContractionProblemInfo info = contraction::problem_info(pr, 90, true);
  ASSERT_TRUE(info.tma_rowfold);
  ContractionConfig rule = choose_contraction_config(info);
  EXPECT_TRUE(rule.tma && rule.rowfold && rule.bm == 128 && rule.bn == 64) << rule.str();
  int folded = 0;
  for (const ContractionConfig& c : contraction_candidates(info)) folded += c.rowfold;
  EXPECT_EQ(folded, 8);
  const int oh = (30 + 3 + 3 - 7) / 2 + 1, ow = (224 + 4 + 3 - 8) / 2 + 1;  // 15, 112
  for (auto [bm, bn, st] : std::vector<std::array<int, 3>>{{128, 64, 4}, {64, 128, 3}}) {
    KernelSpec k = contraction::emit_with_config(pr, wgmma_rowfold_tile(bm, bn, st), 90);
    SCOPED_TRACE(k.name);
    EXPECT_EQ(k.name.rfind("conv_f16_nhwc_7x8_s2_c4_wg", 0), 0u);
    EXPECT_NE(k.name.find("_rf_bias_relu"), std::string::npos);
    EXPECT_NE(k.source.find("static_assert(G::A_SUB_ROWS"), std::string::npos);
    // Tile rows of bw = 128 pixels (one 112-pixel output row) or 64: the grid covers them.
    const int bw = bm == 128 ? 128 : 64;
    EXPECT_EQ(k.grid[0].eval({{"N", 3}}), 3 * oh * ((ow + bw - 1) / bw));
    int maps = 0;
    for (const KernelArg& a : k.args) {
      if (a.kind != KernelArg::Kind::TensorMap) continue;
      ++maps;
      if (a.map_dims.size() != 4) continue;
      EXPECT_EQ(a.map_swizzle, 0);
      EXPECT_EQ(a.map_dims[0], Dim(8));
      EXPECT_EQ(a.map_dims[1], Dim(224 * 4 / 8));
      EXPECT_EQ(a.map_box, (std::vector<int>{8, (bw + 3 + 7) / 8 * 8, 1, 1}));
    }
    EXPECT_EQ(maps, 2);
    // Two chunks of the left padding 4 (x 4 channels = 16 values), row stride 2.
    EXPECT_NE(k.source.find("(int)sp_ow0 - 2, (int)(sp_oh0 + i) * 2 - 3 + r * 1"),
              std::string::npos);
    expect_sm90a_without_spills(k);
  }
  pr.rowfold_allowed = false;
  ContractionProblemInfo off = contraction::problem_info(pr, 90, true);
  EXPECT_FALSE(off.tma_rowfold);
  EXPECT_FALSE(choose_contraction_config(off).rowfold);
  // Not row-foldable: stride 1 with C = 4 (8 bytes per output column), an odd left padding
  // (half a chunk), an odd width (rows of half chunks), 7 columns (28 values per filter row).
  for (Graph o : {conv(4, 224, 8, 1, {3, 4, 3, 3}), conv(4, 224, 8, 2, {3, 3, 3, 4}),
                  conv(4, 223, 8, 2, {3, 4, 3, 3}), conv(4, 224, 7, 2, {3, 3, 3, 3})}) {
    FusionGroup go = make_group(o);
    contraction::Problem po = contraction::describe(o, go);
    EXPECT_FALSE(contraction::tma_rowfold_supported(po));
    try {
      contraction::emit_with_config(po, wgmma_rowfold_tile(128, 64, 4), 90);
      ADD_FAILURE() << "a row-fold config was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::User);
      EXPECT_NE(std::string(e.what()).find("row-fold"), std::string::npos) << e.what();
    }
  }
}

// A batched matmul with one B matrix (a transformer's projection, [N, T, C] x [C, D]) is one GEMM
// of N x T rows for the tensor-core kernels: a plain TMA GEMM on sm_90a, the epilogue splitting
// the row into (batch, token); with B batched, or A broadcast, it stays batched (grid z).
TEST(Contraction, BatchDimsFoldIntoGemmRowsWhenBIsOneMatrix) {
  auto mm = [](Shape a, Shape b) {
    Graph g("proj");
    Tensor x = g.input("x", DType::F16, a);
    Tensor w = g.input("w", DType::F16, b);
    Tensor bias =
        g.constant_random("b", {DType::F16, {b.back()}, Layout::NCHW, {}}, "normal", 0, 1, 2);
    g.output(g.gelu(g.matmul(x, w, bias)));
    return g;
  };
  Graph g = mm({"N", 197, 768}, {768, 512});
  FusionGroup grp = make_group(g);
  contraction::Problem p = contraction::describe(g, grp);
  EXPECT_FALSE(contraction::tma_supported(p));
  contraction::Problem f = contraction::fold_matmul_batch(p);
  ASSERT_TRUE(f.mm.batch.empty());
  EXPECT_EQ(f.mm.m.eval({{"N", 3}}), 3 * 197);
  EXPECT_TRUE(contraction::tma_supported(f));
  ContractionProblemInfo info = contraction::problem_info(p, 90, true);
  EXPECT_TRUE(info.tma_gemm);
  EXPECT_EQ(info.batch, 1);
  ContractionConfig rule = choose_contraction_config(info);
  ASSERT_TRUE(rule.tma) << rule.str();
  KernelSpec k = contraction::emit_with_config(p, rule, 90);
  SCOPED_TRACE(k.name);
  EXPECT_EQ(k.name.find("batched"), std::string::npos);
  EXPECT_NE(k.source.find("const long long frow = q % 197LL; q /= 197LL;"), std::string::npos);
  EXPECT_EQ(k.grid[2].eval({{"N", 3}}), 1);
  EXPECT_EQ(k.grid[0].eval({{"N", 3}}) * k.grid[1].eval({{"N", 3}}),
            (3 * 197 + rule.bm - 1) / rule.bm * ((512 + rule.bn - 1) / rule.bn));
  expect_sm90a_without_spills(k);
  // The mma.sync kernel (sm_80) takes the same rows.
  KernelSpec k80 =
      contraction::emit_with_config(p, choose_mma_config(contraction::problem_info(p, 80)), 80);
  EXPECT_NE(k80.source.find("frow"), std::string::npos);
  // B batched: batched GEMMs (grid z), unchanged.
  Graph o = mm({"N", 197, 768}, {"N", 768, 512});
  FusionGroup go = make_group(o);
  contraction::Problem po = contraction::fold_matmul_batch(contraction::describe(o, go));
  EXPECT_TRUE(po.mm.fold.empty());
  EXPECT_EQ(po.mm.batch.size(), 1u);
  EXPECT_GT(contraction::emit_with_config(po, wgmma_tile(128, 128, 4), 90).grid[2].eval({{"N", 3}}),
            1);
}

// The tile follows the concrete M where the graph is static (or shape-specialized): res3 3x3 128
// at N=128 (M = 100352) takes a big tile, while the symbolic graph's estimate (N = 32) keeps the
// small one; 256x128 (four warpgroups) fits the shared memory and runs 512 threads.
TEST(Contraction, WgmmaTileFromConcreteM) {
  auto info = [](int64_t n) {
    ContractionProblemInfo p;
    p.m = n * 28 * 28;
    p.n = 128;
    p.k = 9 * 128;
    p.wgmma_ok = true;
    return p;
  };
  ContractionConfig c32 = choose_contraction_config(info(32));
  ContractionConfig c128 = choose_contraction_config(info(128));
  ASSERT_EQ(c32.kind, ContractionConfig::Kind::Wgmma);
  ASSERT_EQ(c128.kind, ContractionConfig::Kind::Wgmma);
  EXPECT_GT(c128.bm * c128.bn, c32.bm * c32.bn) << c32.str() << " vs " << c128.str();
  EXPECT_EQ(c128.str(), "wg256x128x64_s4");
  EXPECT_EQ(c128.threads(), 512);
  EXPECT_LE(c128.smem_bytes(), info(128).smem_optin);

  // Through codegen: the static graph's kernel is the concrete-M tile, the symbolic one's the
  // N = 32 estimate (C = 96: no TMA path, whose tiles stop at two consumer warpgroups).
  Graph sym = bench_conv_graph(96, 128, 28, 3, 1, 1);
  Graph st = specialize_graph(sym, {{"N", 128}});
  KernelSpec ks = emit_arch_specific(sym), kt = emit_arch_specific(st);
  EXPECT_NE(ks.name.find(c32.str()), std::string::npos) << ks.name;
  EXPECT_NE(kt.name.find("wg256x128x64_s4"), std::string::npos) << kt.name;
  EXPECT_EQ(kt.block[0], 512);
}

// Split-K: res5 3x3 512 at N = 32 (M = 1568, K = 4608) has too few output tiles for 132 SMs and
// gets split; res4 1x1 (K = 1024) and symbolic M do not. A split kernel takes grid.z = splits,
// a scratch workspace of splits f32 tiles per output tile and one counter per tile, and compiles
// for sm_90a (wgmma) and sm_80 (mma.sync) without spills.
TEST(Contraction, SplitKForSmallMLargeK) {
  ContractionProblemInfo p;
  p.m = 1568;
  p.n = 512;
  p.k = 4608;
  p.wgmma_ok = true;
  ContractionConfig c = choose_contraction_config(p);
  ASSERT_EQ(c.kind, ContractionConfig::Kind::Wgmma);
  EXPECT_GT(c.split_k, 1) << c.str();
  p.m_is_estimate = true;
  EXPECT_EQ(choose_contraction_config(p).split_k, 1);
  p.m_is_estimate = false;
  p.m = 6272;
  p.n = 256;
  p.k = 1024;
  EXPECT_EQ(choose_contraction_config(p).split_k, 1);

  Graph sym = bench_conv_graph(480, 512, 7, 3, 1, 1);  // C % 64 != 0: the cp.async path
  Graph st = specialize_graph(sym, {{"N", 32}});
  KernelSpec ks = emit_arch_specific(sym), kt = emit_arch_specific(st);
  EXPECT_EQ(ks.name.find("_sk"), std::string::npos) << ks.name;
  EXPECT_NE(kt.name.find("_sk"), std::string::npos) << kt.name;
  int scratch = 0, counters = 0;
  for (const KernelArg& a : kt.args) {
    scratch += a.kind == KernelArg::Kind::Scratch;
    counters += a.kind == KernelArg::Kind::Counters;
  }
  EXPECT_EQ(scratch, 1);
  EXPECT_EQ(counters, 1);
  Bindings none;
  EXPECT_GT(kt.grid[2].eval(none), 1);

  Graph odd = bench_conv_graph(5, 7, 9, 3, 1, 1);
  for (const Graph* g : {&st, &odd}) {
    FusionGroup grp = make_group(*g);
    contraction::Problem pr = contraction::describe(*g, grp);
    ContractionConfig w = wgmma_tile(128, 128, 5, 3);
    ContractionProblemInfo info = contraction::problem_info(pr, 80);
    ContractionConfig m = choose_mma_config(info);
    m.split_k = 3;
    for (auto [cfg, arch] : {std::pair{w, "sm_90a"}, std::pair{m, "sm_80"}}) {
      KernelSpec k = contraction::emit_with_config(pr, cfg, 90);
      SCOPED_TRACE(k.name);
      EXPECT_NE(k.name.find("_sk3"), std::string::npos);
      try {
        NvrtcResult r = nvrtc_compile(k.source, k.name, arch, {"--ptxas-options=-v"});
        EXPECT_NE(r.log.find("0 bytes spill stores"), std::string::npos) << r.log;
      } catch (const Error& e) {
        ADD_FAILURE() << e.what();
      }
    }
  }
}

// No column check in the tiled epilogue when the tiles divide N (it would be dead code, and its
// compare-and-branch per column group costs NVRTC time); a ragged N keeps it.
TEST(Contraction, ColumnCheckOnlyForPartialTiles) {
  auto graph = [](int64_t k) {
    Graph g("cols");
    Tensor x = g.input("x", DType::F16, {"N", 256, 14, 14}, Layout::NHWC);
    Tensor w = g.constant_random("w", {DType::F16, {k, 256, 1, 1}, Layout::NHWC, {}}, "normal", 0,
                                 0.05, 1);
    Tensor b = g.constant_random("b", {DType::F16, {k}, Layout::NCHW, {}}, "normal", 0, 1, 2);
    Tensor r = g.input("r", DType::F16, {"N", k, 14, 14}, Layout::NHWC);
    g.output(g.relu(g.add(g.conv2d(x, w, b, Conv2dOptions{}), r)));
    return g;
  };
  for (int64_t k : {256, 200}) {
    Graph g = graph(k);
    for (bool arch_specific : {false, true}) {
      KernelSpec ks = arch_specific ? emit_arch_specific(g) : emit(g, make_group(g), 80);
      SCOPED_TRACE(ks.name);
      EXPECT_TRUE(uses_mma(ks));
      std::string body = ks.source.substr(ks.source.find("extern \"C\""));
      EXPECT_EQ(body.find("if (col0 >= ") != std::string::npos, k == 200);
      compile_for(ks, {arch_specific ? "sm_90a" : "sm_80"});
    }
  }
}

namespace {
// A 1x1 conv 256 -> k at 14x14, f16 NHWC, with bias and a residual add of dtype `res_dt`, relu.
Graph residual_conv_graph(int64_t k, DType res_dt) {
  Graph g("residual_conv");
  Tensor x = g.input("x", DType::F16, {"N", 256, 14, 14}, Layout::NHWC);
  Tensor w =
      g.constant_random("w", {DType::F16, {k, 256, 1, 1}, Layout::NHWC, {}}, "normal", 0, 0.05, 1);
  Tensor b = g.constant_random("b", {DType::F16, {k}, Layout::NCHW, {}}, "normal", 0, 1, 2);
  Tensor y = g.conv2d(x, w, b, Conv2dOptions{});
  Tensor r = g.input("r", res_dt, {"N", k, 14, 14}, Layout::NHWC);
  g.output(g.relu(g.add(y, res_dt == DType::F16 ? r : g.cast(r, DType::F16))));
  return g;
}
size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

// The tiled epilogue reads a 16-bit operand that runs along the columns (bias, residual) as one
// 32-bit word per column pair (half the loads, less NVRTC time); f32 operands stay scalar loads.
// (The residual prefetch is off here: see PrefetchedResidualTile.)
TEST(Contraction, EpiloguePairLoads) {
  const std::string no_prefetch = "contraction.prefetch=2";
  {  // bias and residual as pairs
    KernelSpec k = emit_arch_specific(residual_conv_graph(256, DType::F16), no_prefetch);
    SCOPED_TRACE(k.name);
    std::string body = k.source.substr(k.source.find("extern \"C\""));
    EXPECT_EQ(count(body, "kc_ld_x2("), 2u);
    EXPECT_EQ(count(body, "kc_f16_of_x2("), 2u);
    EXPECT_EQ(count(body, "kc_ld_f16("), 0u);
    EXPECT_EQ(count(body, "if (col0 >="), 0u);
    compile_for(k, {"sm_90a"});
  }
  {  // an f32 residual stays a scalar load; the bias is still a pair
    KernelSpec k = emit_arch_specific(residual_conv_graph(256, DType::F32), no_prefetch);
    SCOPED_TRACE(k.name);
    std::string body = k.source.substr(k.source.find("extern \"C\""));
    EXPECT_EQ(count(body, "kc_ld_x2("), 1u);
    EXPECT_EQ(count(body, "kc_ld_f32("), 1u);
    compile_for(k, {"sm_90a"});
  }
  {  // the bias tensor also an epilogue operand: one word for both reads
    Graph g("bias_twice");
    Tensor a = g.input("a", DType::BF16, {"M", 512});
    Tensor w =
        g.constant_random("w", {DType::BF16, {512, 768}, Layout::NCHW, {}}, "normal", 0, 0.05, 1);
    Tensor b = g.constant_random("b", {DType::BF16, {768}, Layout::NCHW, {}}, "normal", 0, 1, 2);
    g.output(g.add(g.matmul(a, w, b), b));
    KernelSpec k = emit_arch_specific(g, no_prefetch);
    SCOPED_TRACE(k.name);
    std::string body = k.source.substr(k.source.find("extern \"C\""));
    EXPECT_EQ(count(body, "kc_ld_x2("), 1u);
    EXPECT_EQ(count(body, "kc_bf16_of_x2("), 2u);
    compile_for(k, {"sm_90a"});
  }
  {  // K = 200 (a partial last column tile) and mma.sync alike
    Graph g = residual_conv_graph(200, DType::F16);
    for (bool arch_specific : {false, true}) {
      KernelSpec k =
          arch_specific ? emit_arch_specific(g, no_prefetch) : emit(g, make_group(g), 80);
      SCOPED_TRACE(k.name);
      EXPECT_TRUE(uses_mma(k));
      std::string body = k.source.substr(k.source.find("extern \"C\""));
      EXPECT_EQ(count(body, "if (col0 >= 200LL) continue;"), 1u);
      EXPECT_EQ(count(body, "kc_ld_x2("), 2u);
      compile_for(k, {arch_specific ? "sm_90a" : "sm_80"});
    }
  }
}

// The TMA kernels prefetch a 16-bit residual operand's tile into shared memory with TMA (one
// barrier of its own, BN / 64 swizzled slabs after the stages) and read it there in the
// epilogue; an f32 residual, or KILN_SCHEDULE contraction.prefetch=2, keeps the global loads. A
// single 16-bit output is written into the same tile and stored by TMA
// (contraction_epilogue_tile.cuh).
TEST(Contraction, PrefetchedResidualTile) {
  auto maps = [](const KernelSpec& k) {
    int n = 0;
    for (const KernelArg& a : k.args) n += a.kind == KernelArg::Kind::TensorMap;
    return n;
  };
  KernelSpec k = emit_arch_specific(residual_conv_graph(256, DType::F16));
  SCOPED_TRACE(k.name);
  ASSERT_NE(k.name.find("_tma"), std::string::npos);
  std::string body = k.source.substr(k.source.find("extern \"C\""));
  EXPECT_EQ(count(body, "kc_mbar_wait(kc_rbar, 0);"), 1u);
  // read there, and the output written over it, then stored by TMA
  EXPECT_EQ(count(body, "*kc_tword(lrow, lcol)"), 2u);
  EXPECT_EQ(count(body, "kc_tile_load<"), 1u);
  EXPECT_EQ(count(body, "kc_tile_store<"), 1u);
  EXPECT_EQ(count(body, "kc_ld_x2("), 1u);  // the bias only
  EXPECT_EQ(maps(k), 4);
  compile_for(k, {"sm_90a"});
  // K = 256 is 4 k tiles: the pipeline keeps at most 4 stages, and the tile fits beside them.
  EXPECT_NE(k.name.find("_s4_"), std::string::npos);
  EXPECT_LE(k.smem_bytes, 232448);
  KernelSpec off =
      emit_arch_specific(residual_conv_graph(256, DType::F16), "contraction.prefetch=2");
  EXPECT_EQ(off.source.find("kc_mbar_wait(kc_rbar"), std::string::npos);
  EXPECT_EQ(maps(off), 3);  // the output tile still goes by TMA
  EXPECT_EQ(off.smem_bytes, k.smem_bytes);
  KernelSpec none = emit_arch_specific(residual_conv_graph(256, DType::F16),
                                       "contraction.prefetch=2,contraction.tmastore=2");
  EXPECT_EQ(none.source.find("kc_tword"), std::string::npos);
  EXPECT_EQ(maps(none), 2);
  EXPECT_LT(none.smem_bytes, k.smem_bytes);
  KernelSpec f32 = emit_arch_specific(residual_conv_graph(256, DType::F32));
  EXPECT_EQ(f32.source.find("kc_mbar_wait(kc_rbar"), std::string::npos);
  EXPECT_NE(f32.source.find("kc_tile_store<"), std::string::npos);  // f16 output
  compile_for(f32, {"sm_90a"});
  // Two outputs (the pre-activation kept): per-fragment global stores.
  Graph g2("two_outputs");
  Tensor x = g2.input("x", DType::F16, {"N", 256, 14, 14}, Layout::NHWC);
  Tensor w = g2.constant_random("w", {DType::F16, {256, 256, 1, 1}, Layout::NHWC, {}}, "normal", 0,
                                0.05, 1);
  Tensor c = g2.conv2d(x, w);
  g2.output(c);
  g2.output(g2.relu(c));
  KernelSpec two = emit_arch_specific(g2);
  EXPECT_EQ(two.source.find("kc_tile_store<"), std::string::npos) << two.name;
  EXPECT_EQ(two.source.find("kc_tile_word"), std::string::npos) << two.name;  // no tile code
  EXPECT_EQ(make_group(g2).outputs.size(), 2u);
}

// The staged epilogue (contraction.staged) is gone: the key is refused like any unknown one.
TEST(Contraction, StagedEpilogueKeyIsRefused) {
  EXPECT_THROW(parse_schedule_overrides("contraction.staged=1"), Error);
  EXPECT_NO_THROW(parse_schedule_overrides("contraction.prefetch=2,contraction.tmastore=2"));
}
