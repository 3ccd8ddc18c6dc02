// Elementwise ops moved above channels-last relabels (engine/passes/relabel_epilogues.cpp):
// ConvNeXt's layer scale and residual add join fc2's epilogue (no pointwise kernel is left), the
// rewritten graph computes what the original does, and what must stay stays.
#include <gtest/gtest.h>

#include <string>

#include "codegen/kernel_spec.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/graph.hpp"
#include "tests/convnext_graphs.hpp"
#include "tests/same_values.hpp"

namespace kiln {
namespace {

std::vector<std::string> kernels_of(std::shared_ptr<const Graph> g) {
  auto f = apply_engine_passes(g, true, nullptr);
  CodegenOptions co;
  co.sm = 90;
  co.arch_specific = true;
  std::vector<std::string> names;
  for (const KernelSpec& k : generate_kernels(*f, plan_fusion(*f), co)) names.push_back(k.name);
  return names;
}

TEST(RelabelEpilogues, LayerScaleAndResidualJoinFc2) {
  auto g = test::convnext_blocks(16, DType::F32);
  Graph c = *g;
  std::vector<std::string> moved;
  EXPECT_EQ(elementwise_before_relabels(c, &moved), 4) << ::testing::PrintToString(moved);
  test::expect_same_values(*g, c);
  for (const std::string& k : kernels_of(g)) {
    EXPECT_EQ(k.rfind("pointwise_", 0), std::string::npos) << k;
    EXPECT_EQ(k.rfind("copy_", 0), std::string::npos) << k;
  }
}

// The layout decisions pinned: the sm_90a kernels of two blocks of 96 channels (stage 1's width).
TEST(RelabelEpilogues, GoldenKernels) {
  const std::vector<std::string> want = {"conv_f16_nhwc_dw7x7_t6x5c96_bias",
                                         "rownorm_f16_r96_layernorm",
                                         "matmul_f16_wg128x128x64_s3_tma_bias_gelu",
                                         "matmul_f16_wg128x128x64_s5_tma_bias_mul_add",
                                         "conv_f16_nhwc_dw7x7_t6x5c96_bias_g7",
                                         "rownorm_f16_r96_layernorm_g9",
                                         "matmul_f16_wg128x128x64_s3_tma_bias_gelu_g10",
                                         "matmul_f16_wg128x128x64_s5_tma_bias_mul_add_g11",
                                         "conv_f16_nhwc_1x1_wg64x64x64_s3_tma",
                                         "window_f16_r30_global_avgpool"};
  EXPECT_EQ(kernels_of(test::convnext_blocks(96)), want);
}

TEST(RelabelEpilogues, WhatMustStayStays) {
  {  // the relabeled map is read by something else too: the matmul's result has two readers
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N", 8, 3, 4}, Layout::NHWC);
    Tensor w = g.constant_random("w", TensorDesc{DType::F32, {8, 8}, Layout::NCHW, {}}, "normal", 0,
                                 0.3, 1);
    Tensor back = g.transpose(g.matmul(g.transpose(x, {0, 2, 3, 1}), w), {0, 3, 1, 2});
    g.output(g.relu(g.add(back, x)));
    g.output(g.relu(back));
    EXPECT_EQ(elementwise_before_relabels(g), 0);
  }
  {  // the op's output is a graph output (its layout is the caller's)
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N", 8, 3, 4}, Layout::NHWC);
    Tensor w = g.constant_random("w", TensorDesc{DType::F32, {8, 8}, Layout::NCHW, {}}, "normal", 0,
                                 0.3, 1);
    g.output(g.add(g.transpose(g.matmul(g.transpose(x, {0, 2, 3, 1}), w), {0, 3, 1, 2}), x));
    EXPECT_EQ(elementwise_before_relabels(g), 0);
  }
  {  // a constant whose dims would change order ([8, 3, 1] -> [1, 3, 1, 8]... its 3 before 8)
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N", 8, 3, 4}, Layout::NHWC);
    Tensor w = g.constant_random("w", TensorDesc{DType::F32, {8, 8}, Layout::NCHW, {}}, "normal", 0,
                                 0.3, 1);
    Tensor s = g.constant_random("s", TensorDesc{DType::F32, {8, 3, 1}, Layout::NCHW, {}}, "normal",
                                 0, 0.3, 2);
    Tensor back = g.transpose(g.matmul(g.transpose(x, {0, 2, 3, 1}), w), {0, 3, 1, 2});
    Tensor cw = g.constant_random("cw", TensorDesc{DType::F32, {8, 8, 1, 1}, Layout::NHWC, {}},
                                  "normal", 0, 0.3, 3);
    g.output(g.relu(g.conv2d(g.mul(back, s), cw)));
    Graph c = g;
    EXPECT_EQ(elementwise_before_relabels(c), 0);
  }
}

}  // namespace
}  // namespace kiln
