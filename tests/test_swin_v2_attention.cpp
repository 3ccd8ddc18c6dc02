// Swin V2's cosine window attention (tests/swin_v2_attention.hpp) through the Engine's lowering:
// its constant subgraphs (the position-bias MLP, the per-head logit scale) fold to constants, the
// per-head scale moves onto q's normalization, and the chain is one fused attention whose v is
// read in place from the head split that q's and k's normalizations also read. The lowered graph
// computes the original's values; every kernel compiles with NVRTC. (q's and k's l2
// normalizations are row norms, engine/passes/l2_normalizations.cpp.)
#include <gtest/gtest.h>

#include <string>

#include "codegen/nvrtc.hpp"
#include "kiln/error.hpp"
#include "kiln/lowering.hpp"
#include "tests/golden_file.hpp"
#include "tests/same_values.hpp"
#include "tests/swin_v2_attention.hpp"

namespace kiln {
namespace {

Lowering lower_block(DType dt, const std::string& arch) {
  LoweringOptions o;
  o.target = default_device(arch);
  return lower_graph(test::swin_v2_attention(dt, 3, 32, 49), o);
}

TEST(SwinV2Attention, FoldsAndFuses) {
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Lowering l = lower_block(dt, "sm_90");
    int attention = 0;
    for (const LoweredGroup& grp : l.groups) {
      attention += grp.kind == "attention";
      for (int n : grp.nodes) {  // nothing of the constant subgraphs runs
        const std::string& name = l.graph->nodes()[n].name;
        EXPECT_TRUE(l.graph->nodes()[n].op != OpKind::Sigmoid &&
                    l.graph->nodes()[n].op != OpKind::Exp &&
                    l.graph->nodes()[n].op != OpKind::Gather)
            << name << "\n"
            << l.plan_text;
      }
    }
    EXPECT_EQ(attention, 1) << l.plan_text;
    // f16: q's and k's l2 normalizations are row norms (bf16 rows may have norms near eps: they
    // stay reductions and divides) that read their rows in place in the QKV projection's output,
    // as the attention reads v: the head split is a view, no copy kernel.
    for (const LoweredGroup& grp : l.groups)
      EXPECT_TRUE(dt != DType::F16 ||
                  (grp.kind != "reduction" && grp.kind != "pointwise" && grp.kind != "copy"))
          << l.plan_text;
    if (dt == DType::F16)
      EXPECT_NE(l.passes_note.find("transpose read row by row"), std::string::npos);
    EXPECT_NE(l.passes_note.find("constant subgraphs folded"), std::string::npos);
    EXPECT_NE(l.passes_note.find("per-batch scales moved"), std::string::npos);
  }
}

TEST(SwinV2Attention, LoweredGraphComputesTheSameValues) {
  const Graph g = test::swin_v2_attention(DType::F16, 3, 32, 49);
  const Lowering l = lower_block(DType::F16, "sm_90");
  test::expect_same_values(g, *l.graph, 1e-2);  // f16: q * scale rounds before the product
}

TEST(SwinV2Attention, EveryKernelCompiles) {
  int compiled = 0;
  for (DType dt : {DType::F16, DType::BF16})
    for (const char* arch : {"sm_80", "sm_90"})
      for (const LoweredKernel& k : lower_block(dt, arch).kernels) {
        try {
          EXPECT_FALSE(nvrtc_compile(k.source, k.name, k.arch).cubin.empty()) << k.name;
          ++compiled;
        } catch (const Error& e) {
          ADD_FAILURE() << arch << " " << k.name << ": " << e.what();
        }
      }
  EXPECT_GE(compiled, 4 * 4);
}

// The passes' note, the plan (folded constants, the row norms, v read in place) and the attention
// kernel's score functor (the per-head scale gone from it, the folded bias read as its mask) are
// pinned (UPDATE_GOLDEN=1 rewrites tests/golden/attention_swin_v2.cu).
TEST(SwinV2Attention, GoldenPlanAndSource) {
  const Lowering l = lower_block(DType::F16, "sm_90");
  std::string text = l.passes_note + "\n" + l.plan_text;
  for (const LoweredKernel& k : l.kernels) {
    if (k.name.rfind("attention_", 0) != 0) continue;
    const size_t at = k.source.find("struct KcScores");
    ASSERT_NE(at, std::string::npos) << k.name;
    text += "// ---- " + k.name + "\n" + k.source.substr(at);
  }
  test::expect_golden("attention_swin_v2.cu", text);
}

}  // namespace
}  // namespace kiln
