// Kernel sources without graph tensor ids: repeated blocks share one source, entry, compile.
#include <gtest/gtest.h>

#include <set>

#include "codegen/canonical_source.hpp"
#include "codegen/kernel_spec.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/engine.hpp"
#include "kiln/graph.hpp"

namespace kiln {
namespace {

TEST(CanonicalSource, RenamesTensorIdsConsistentlyAndNothingElse) {
  const std::string prelude = "KILN_DEVICE void f(float* t7) { asm(\"ld.v4 t7\"); }\n";
  const std::string src =
      prelude +
      "// group 12: add over t9\n"
      "extern \"C\" __global__ void k(const float* t9, float* t3, long long s0) "
      "{\n"
      "  float a9_0[4];  // t9's first vector\n"
      "  const float v3_1_2 = a9_0[0] * 1e-05f + 0x1f + r.v4 + p->t3;\n"
      "  asm volatile(\"st.global.v4 [%0], t3;\" ::\"l\"(t3));\n"
      "  const char c = 'x';\n"
      "  t3[0] = v3_1_2 + kt3 + base3 + b0_0 + t9x;\n"
      "}\n";
  const std::string want =
      prelude +
      "// group: add over t9\n"
      "extern \"C\" __global__ void k(const float* t_0, float* t_1, long long s0) "
      "{\n"
      "  float a_0_0[4];  // t9's first vector\n"
      "  const float v_1_1_2 = a_0_0[0] * 1e-05f + 0x1f + r.v4 + p->t3;\n"
      "  asm volatile(\"st.global.v4 [%0], t3;\" ::\"l\"(t_1));\n"
      "  const char c = 'x';\n"
      "  t_1[0] = v_1_1_2 + kt3 + base3 + b0_0 + t9x;\n"
      "}\n";
  EXPECT_EQ(canonical_source(src), want);
  EXPECT_EQ(canonical_source(want), want);  // idempotent
  EXPECT_EQ(canonical_source("no kernel here t5"), "no kernel here t5");
  EXPECT_EQ(code_without_comments("a; // b 'c\nd /* e */ \"// f\" 'g'"), "a; \nd  \"// f\" 'g'");
}

// x -> (layernorm, gelu) -> (layernorm, gelu): two groups of the same code on different tensors.
Graph two_blocks() {
  Graph g("two");
  Tensor x = g.input("x", DType::BF16, {"R", 768});
  Tensor h = g.add_node1("gelu", {g.layernorm(x)});
  g.output(g.add_node1("gelu", {g.layernorm(h)}));
  return g;
}

TEST(CanonicalSource, RepeatedBlocksShareSourceAndEntry) {
  Graph g = two_blocks();
  std::vector<KernelSpec> ks = generate_kernels(g, plan_fusion(g));
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_NE(ks[0].name, ks[1].name);  // names stay unique (reports, NVTX)
  EXPECT_EQ(ks[0].source, ks[1].source);
  EXPECT_EQ(ks[0].entry, ks[1].entry);
  EXPECT_NE(ks[0].args[0].tensor, ks[1].args[0].tensor);  // each launch gets its own tensors

  EngineOptions o;
  o.load_kernels = false;
  o.arch = "sm_90";
  o.disk_cache = false;
  Engine eng(o);
  CompiledGraph cg = eng.compile(g);
  EXPECT_EQ(eng.stats().nvrtc_compiles, 1);
  EXPECT_EQ(eng.stats().memory_cache_hits, 1);
  std::set<std::string> names;
  for (const KernelInfo& k : cg.kernels()) names.insert(k.name);
  EXPECT_EQ(names.size(), 2u);
}

}  // namespace
}  // namespace kiln
