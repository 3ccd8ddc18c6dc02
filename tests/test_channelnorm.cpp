// ChannelNorm schedule choice (codegen/emit_channelnorm.cpp): the sm_90 cluster path for NHWC
// inputs with static channels and spatial size, the per-group kernel otherwise; every kernel
// compiles with NVRTC. Numerics run in tests/gpu/test_ops_gpu.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "codegen/kernel_spec.hpp"
#include "codegen/nvrtc.hpp"
#include "engine/plan.hpp"
#include "kiln/error.hpp"
#include "kiln/graph.hpp"

namespace kiln {
namespace {

Tensor cst(Graph& g, const std::string& name, DType t, Shape s) {
  TensorDesc d;
  d.dtype = t;
  d.shape = std::move(s);
  return g.constant_random(name, d, "uniform", 0.5, 1.5, 3);
}

KernelSpec only_kernel(const Graph& g, int sm) {
  CodegenOptions co;
  co.sm = sm;
  std::vector<KernelSpec> ks = generate_kernels(g, plan_fusion(g), co);
  EXPECT_EQ(ks.size(), 1u);
  return ks.at(0);
}

void expect_compiles(const KernelSpec& k, int sm) {
  try {
    NvrtcResult r = nvrtc_compile(k.source, k.name, fmt::format("sm_{}", sm));
    EXPECT_FALSE(r.cubin.empty()) << k.name;
  } catch (const Error& e) {
    ADD_FAILURE() << k.name << ": " << e.what();
  }
}

TEST(ChannelNorm, ClusterPathForNhwcGroupnorm) {
  Graph g("gn");
  Tensor x = g.input("x", DType::F16, {"N", 320, 64, 64}, Layout::NHWC);
  Tensor y = g.groupnorm(x, 32, cst(g, "s", DType::F16, {320}), cst(g, "b", DType::F16, {320}));
  g.output(g.silu(y));
  KernelSpec k = only_kernel(g, 90);
  EXPECT_NE(k.name.find("_g32_cluster8"), std::string::npos) << k.name;
  EXPECT_NE(k.source.find("__cluster_dims__(8, 1, 1)"), std::string::npos);
  EXPECT_EQ(k.block[0], 320);  // 10 vectors per pixel x 32 pixel rows
  // 512 pixels x 80 channels x 2 bytes, plus 320 x 8 f32 partials.
  EXPECT_EQ(k.smem_bytes, 512 * 80 * 2 + 320 * 8 * 4);
  EXPECT_FALSE(k.grid[0].is_static());
  EXPECT_EQ(k.grid[0].eval({{"N", 16}}), 16 * 4 * 8);
  expect_compiles(k, 90);
  // Not sm_90: the per-group kernel.
  KernelSpec k80 = only_kernel(g, 80);
  EXPECT_NE(k80.name.find("_g32_pergroup"), std::string::npos) << k80.name;
  expect_compiles(k80, 80);
}

TEST(ChannelNorm, FallbackShapes) {
  {  // NCHW
    Graph g("gn");
    Tensor x = g.input("x", DType::F16, {"N", 320, 64, 64});
    g.output(g.groupnorm(x, 32));
    EXPECT_NE(only_kernel(g, 90).name.find("_pergroup"), std::string::npos);
  }
  {  // channels not a multiple of the vector
    Graph g("in");
    Tensor x = g.input("x", DType::BF16, {3, 7, 5, 3}, Layout::NHWC);
    g.output(g.instancenorm(x));
    EXPECT_NE(only_kernel(g, 90).name.find("_pergroup"), std::string::npos);
  }
  {  // symbolic spatial size
    Graph g("gn");
    Tensor x = g.input("x", DType::F16, {2, 64, "H", 8}, Layout::NHWC);
    g.output(g.groupnorm(x, 8));
    EXPECT_NE(only_kernel(g, 90).name.find("_pergroup"), std::string::npos);
  }
  {  // a prologue
    Graph g("gn");
    Tensor x = g.input("x", DType::F16, {2, 64, 8, 8}, Layout::NHWC);
    g.output(g.groupnorm(g.add_node1("relu", {x}), 8));
    KernelSpec k = only_kernel(g, 90);
    EXPECT_NE(k.name.find("_pergroup"), std::string::npos) << k.name;
    expect_compiles(k, 90);
  }
}

TEST(ChannelNorm, ClusterPathVariantsCompile) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    {  // instancenorm, small image: smaller clusters or one CTA
      Graph g("in");
      Tensor x = g.input("x", dt, {"N", 64, 6, 6}, Layout::NHWC);
      g.output(g.add_node1("relu", {g.instancenorm(x)}));
      KernelSpec k = only_kernel(g, 90);
      EXPECT_NE(k.name.find("_cluster"), std::string::npos) << k.name;
      expect_compiles(k, 90);
    }
    {  // residual epilogue reading the input, two outputs, f32 scale/bias, odd pixel count
      Graph g("gn");
      Tensor x = g.input("x", dt, {2, 96, 15, 9}, Layout::NHWC);
      Tensor y = g.groupnorm(x, 3, cst(g, "s", DType::F32, {96}), cst(g, "b", DType::F32, {96}));
      g.output(y);
      g.output(g.add_node1("add", {y, x}));
      KernelSpec k = only_kernel(g, 90);
      EXPECT_NE(k.name.find("_cluster"), std::string::npos) << k.name;
      expect_compiles(k, 90);
    }
  }
}

}  // namespace
}  // namespace kiln
