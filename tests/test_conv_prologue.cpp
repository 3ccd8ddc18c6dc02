// A conv's A prologue (engine/planner: claim_conv_prologue; codegen/contraction/prologue.cpp):
// the elementwise chain making a 1x1 conv's input (a squeeze-excite channel scale, DenseNet's
// pre-activation batchnorm + relu) runs in the conv's cp.async loaders, on every tensor-core
// path, and compiles for sm_80 and sm_90a; what the loaders cannot take stays a kernel of its own.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "codegen/nvrtc.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/error.hpp"
#include "kiln/graph.hpp"
#include "tests/golden_file.hpp"
#include "tests/prologue_graphs.hpp"

namespace kiln {
namespace {

struct Built {
  std::shared_ptr<const Graph> g;
  Plan plan;
  std::vector<KernelSpec> kernels;
};

Built build(std::shared_ptr<Graph> g, int sm, bool prologue = true) {
  Built b;
  b.g = apply_engine_passes(std::move(g), true, nullptr);
  PlanOptions po;
  po.sm = sm;
  po.contraction_prologue = prologue;
  b.plan = plan_fusion(*b.g, po);
  CodegenOptions co;
  co.sm = sm;
  co.arch_specific = sm == 90;
  b.kernels = generate_kernels(*b.g, b.plan, co);
  return b;
}

std::vector<const KernelSpec*> named(const Built& b, const std::string& part) {
  std::vector<const KernelSpec*> out;
  for (const KernelSpec& k : b.kernels)
    if (k.name.find(part) != std::string::npos) out.push_back(&k);
  return out;
}

void expect_compiles(const KernelSpec& k, int sm) {
  const char* arch = sm == 90 ? "sm_90a" : "sm_80";
  try {
    EXPECT_FALSE(nvrtc_compile(k.source, k.name, arch).cubin.empty()) << k.name;
  } catch (const Error& e) {
    ADD_FAILURE() << arch << " " << k.name << ": " << e.what();
  }
}

// The group of the first node running `op`.
const FusionGroup& group_of(const Built& b, OpKind op) {
  for (const FusionGroup& grp : b.plan.groups)
    for (int n : grp.nodes)
      if (b.g->nodes()[n].op == op) return grp;
  throw std::runtime_error("no such node");
}

TEST(ConvPrologue, SqueezeExciteScaleRunsInTheProjection) {
  for (DType dt : {DType::F16, DType::BF16})
    for (int sm : {90, 80}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " sm_" << sm);
      Built b = build(test::se_block(32, 24, 9, 7, dt), sm);
      EXPECT_TRUE(named(b, "pointwise_").empty());
      const auto pre = named(b, "_pre_mul_bias_relu");
      ASSERT_EQ(pre.size(), 1u);
      EXPECT_EQ(group_of(b, OpKind::Mul).kind, GroupKind::Contraction);
      // every thread loads A (the rewrite is the copying thread's): no TMA, no producer warps
      EXPECT_EQ(pre[0]->name.find("_tma"), std::string::npos) << pre[0]->name;
      EXPECT_EQ(pre[0]->name.find("_ws"), std::string::npos) << pre[0]->name;
      EXPECT_NE(pre[0]->source.find("xform_a"), std::string::npos);
      expect_compiles(*pre[0], sm);
      // KILN_SCHEDULE contraction.prologue=2: the scale is a pointwise kernel again
      Built off = build(test::se_block(32, 24, 9, 7, dt), sm, false);
      EXPECT_EQ(named(off, "pointwise_").size(), 1u);
      EXPECT_TRUE(named(off, "_pre_").empty());
    }
}

TEST(ConvPrologue, DenseNetPreActivationReadsTheConcatInPlace) {
  for (int sm : {90, 80}) {
    SCOPED_TRACE(sm);
    Built b = build(test::dense_layers(24, 16, 5, 6), sm);
    const auto pre = named(b, "_pre_batchnorm_relu_bias_relu");
    ASSERT_EQ(pre.size(), 2u);
    // the one pointwise kernel places x in the block's buffer
    for (const KernelSpec* k : named(b, "pointwise_")) EXPECT_EQ(k->name, "pointwise_f16_identity");
    // the second layer's source is the first concat, a view in the block's buffer
    bool strided_source = false;
    for (const FusionGroup& grp : b.plan.groups) {
      if (grp.kind != GroupKind::Contraction) continue;
      for (int t : grp.inputs)
        strided_source |= b.g->tensor(t).desc.layout == Layout::Strided &&
                          b.g->tensor(t).desc.shape.size() == 4 &&
                          b.g->tensor(t).desc.shape[1] == Dim(40);
    }
    EXPECT_TRUE(strided_source);
    for (const KernelSpec* k : pre) expect_compiles(*k, sm);
  }
}

// Autotuning may pick any candidate: each of the SE projection's compiles, none has a producer
// warpgroup or TMA.
TEST(ConvPrologue, EveryAutotuneCandidateCompiles) {
  Built b = build(test::se_block(136, 72, 9, 7), 90);
  CodegenOptions co;
  co.sm = 90;
  co.arch_specific = true;
  int pre = 0;
  for (const TuningSite& site : contraction_tuning_sites(*b.g, b.plan, co)) {
    if (site.kernels.empty() || site.kernels[0].name.find("_pre_") == std::string::npos) continue;
    ++pre;
    EXPECT_GE(site.kernels.size(), 6u);
    for (const KernelSpec& k : site.kernels) {
      EXPECT_EQ(k.name.find("_tma"), std::string::npos) << k.name;
      EXPECT_EQ(k.name.find("_ws"), std::string::npos) << k.name;
      expect_compiles(k, 90);
    }
  }
  EXPECT_EQ(pre, 1);
}

// The generated kernels pinned: the squeeze-excite projection on the sm_90a wgmma kernel and a
// dense layer's 1x1 conv on the mma.sync one (their bodies: the device files have tests of their
// own).
TEST(ConvPrologue, GoldenSource) {
  std::string text;
  auto body = [&](const KernelSpec& k) {
    const size_t at = k.source.find("extern \"C\" __global__");
    ASSERT_NE(at, std::string::npos) << k.name;
    text += fmt::format("// ---- {} grid=({}, {}) block={}\n", k.name, k.grid[0].str(),
                        k.grid[1].str(), k.block[0]);
    text += k.source.substr(at);
  };
  Built se = build(test::se_block(32, 24, 9, 7), 90);
  body(*named(se, "_pre_mul").at(0));
  Built dense = build(test::dense_layers(24, 16, 5, 6), 80);
  body(*named(dense, "_pre_batchnorm_relu").at(1));
  test::expect_golden("conv_prologue.cu", text);
}

// A conv after `scale` * x, x [N, c, 6, 5].
std::shared_ptr<Graph> scaled_conv(int64_t c, std::vector<Dim> scale_shape, int r, DType dt,
                                   bool scaled_is_output = false) {
  auto g = std::make_shared<Graph>("scaled_conv");
  Tensor x = g->input("x", dt, {"N", c, 6, 5}, Layout::NHWC);
  Tensor s = g->input("s", dt, std::move(scale_shape));
  Tensor y = g->mul(x, s);
  if (scaled_is_output) g->output(y);
  Conv2dOptions o;
  o.padding = {r / 2, r / 2};
  g->output(g->conv2d(y, g->input("w", dt, {8, c, r, r}, Layout::NHWC), {}, o));
  return g;
}

TEST(ConvPrologue, ChainsTheLoadersCannotTakeStayKernels) {
  auto mul_kind = [](std::shared_ptr<Graph> g, int sm = 90) {
    return group_of(build(std::move(g), sm), OpKind::Mul).kind;
  };
  const std::vector<Dim> per_nc = {"N", 16, 1, 1};
  EXPECT_EQ(mul_kind(scaled_conv(16, per_nc, 1, DType::F16)), GroupKind::Contraction);
  EXPECT_EQ(mul_kind(scaled_conv(16, {16, 1, 1}, 1, DType::F16)), GroupKind::Contraction);
  // a 3x3 conv (the rule keeps its TMA loaders)
  EXPECT_EQ(mul_kind(scaled_conv(16, per_nc, 3, DType::F16)), GroupKind::Pointwise);
  // a scale varying along W
  EXPECT_EQ(mul_kind(scaled_conv(16, {"N", 16, 1, 5}, 1, DType::F16)), GroupKind::Pointwise);
  // the scaled tensor is needed elsewhere (a graph output)
  EXPECT_EQ(mul_kind(scaled_conv(16, per_nc, 1, DType::F16, true)), GroupKind::Pointwise);
  // channels not in 16-byte chunks; f32 (no tensor cores)
  EXPECT_EQ(mul_kind(scaled_conv(12, {"N", 12, 1, 1}, 1, DType::F16)), GroupKind::Pointwise);
  EXPECT_EQ(mul_kind(scaled_conv(16, per_nc, 1, DType::F32)), GroupKind::Pointwise);
}

}  // namespace
}  // namespace kiln
