// The public lowering and the calls the CLI makes through the public headers: lower_graph
// describes exactly what the internal pipeline (and so the Engine) builds; the passes' notes, the
// plan and its hook, tuning sites, the device facts, the kernel cache, the environment check.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "codegen/kernel_spec.hpp"
#include "engine/api/lower.hpp"
#include "engine/base/env.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/device.hpp"
#include "kiln/engine.hpp"
#include "kiln/environment.hpp"
#include "kiln/io.hpp"
#include "kiln/kernel_cache.hpp"
#include "kiln/lowering.hpp"
#include "kiln/random.hpp"
#include "tests/engine_test_fixture.hpp"
#include "tests/test_paths.hpp"
#include "tests/user_error.hpp"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

Graph example(const std::string& name) {
  return load_graph_file(
      (fs::path(kiln::testing::source_dir()) / "examples" / "graphs" / name).string());
}

const char* const kExamples[] = {"add_layernorm_gelu.json", "resnet50_bottleneck.json",
                                 "transformer_mlp.json", "unet_resblock.json"};

// What lower_graph returns is what the stages called one by one build for the same device.
TEST(LowerGraph, DescribesWhatThePipelineBuilds) {
  for (const char* name : kExamples) {
    for (const char* arch : {"sm_90", "sm_80"}) {
      SCOPED_TRACE(std::string(name) + " " + arch);
      Graph g = example(name);
      LoweringOptions o;
      o.target = default_device(arch);
      Lowering low = lower_graph(g, o);

      std::string note;
      std::shared_ptr<const Graph> pg =
          apply_engine_passes(std::make_shared<const Graph>(g), true, &note);
      PlanOptions po;
      po.sm = o.target.sm;
      Plan p = plan_fusion(*pg, po);
      CodegenOptions co = codegen_options(default_device_info(arch), {});
      std::vector<KernelSpec> ks = generate_kernels(*pg, p, co);

      EXPECT_EQ(low.passes_note, note);
      EXPECT_EQ(low.plan_text, plan_to_string(*pg, p));
      EXPECT_EQ(low.graph->nodes().size(), pg->nodes().size());
      ASSERT_EQ(low.groups.size(), p.groups.size());
      for (size_t i = 0; i < p.groups.size(); ++i) {
        EXPECT_EQ(low.groups[i].id, p.groups[i].id);
        EXPECT_EQ(low.groups[i].kind, group_kind_name(p.groups[i].kind));
        EXPECT_EQ(low.groups[i].nodes, p.groups[i].nodes);
        EXPECT_EQ(low.groups[i].why, p.groups[i].why);
      }
      ASSERT_EQ(low.kernels.size(), ks.size());
      for (size_t i = 0; i < ks.size(); ++i) {
        const LoweredKernel& k = low.kernels[i];
        EXPECT_EQ(k.name, ks[i].name);
        EXPECT_EQ(k.entry, ks[i].entry);
        EXPECT_EQ(k.source, ks[i].source);
        EXPECT_EQ(k.arch, ks[i].arch.empty() ? std::string(arch) : ks[i].arch);
        EXPECT_EQ(k.group, ks[i].group);
        EXPECT_EQ(k.grid[0].str(), ks[i].grid[0].str());
        EXPECT_EQ(k.block, ks[i].block);
        EXPECT_EQ(k.smem_bytes, ks[i].smem_bytes);
        EXPECT_EQ(k.bytes_moved.str(), ks[i].bytes_moved.str());
        EXPECT_EQ(k.flops.str(), ks[i].flops.str());
      }
    }
  }
}

TEST(LowerGraph, PassesNoteFusionOffAndDefaultTarget) {
  Graph g = example("resnet50_bottleneck.json");
  Lowering low = lower_graph(g);  // default target: sm_90
  EXPECT_NE(low.passes_note.find("3 batchnorms folded"), std::string::npos) << low.passes_note;
  EXPECT_LT(low.graph->nodes().size(), g.nodes().size());
  for (const LoweredKernel& k : low.kernels) EXPECT_EQ(k.arch.rfind("sm_90", 0), 0u) << k.arch;
  Bindings b{{"N", 2}};
  for (const LoweredKernel& k : low.kernels) {
    EXPECT_GT(k.bytes_moved.eval(b), 0) << k.name;
    EXPECT_GT(k.flops.eval(b), 0) << k.name;
  }

  LoweringOptions off;
  off.fusion = false;
  Lowering each = lower_graph(g, off);
  EXPECT_EQ(each.passes_note, "");
  EXPECT_EQ(each.graph->nodes().size(), g.nodes().size());
  EXPECT_EQ(each.groups.size(), g.nodes().size());
}

TEST(LowerGraph, PlannedHookSeesThePlanBeforeTheKernels) {
  Graph g = example("transformer_mlp.json");
  LoweringOptions o;
  int calls = 0;
  o.planned = [&](const Lowering& so_far) {
    ++calls;
    EXPECT_FALSE(so_far.groups.empty());
    EXPECT_FALSE(so_far.plan_text.empty());
    EXPECT_TRUE(so_far.kernels.empty());
    ASSERT_NE(so_far.graph, nullptr);
  };
  Lowering low = lower_graph(g, o);
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(low.kernels.empty());
}

TEST(LowerGraph, TuningSitesListTheRulesConfigFirst) {
  Graph g = example("resnet50_bottleneck.json");
  EXPECT_TRUE(lower_graph(g).tuning_sites.empty());  // only when asked for
  LoweringOptions o;
  o.tuning_sites = true;
  Lowering low = lower_graph(g, o);
  ASSERT_EQ(low.tuning_sites.size(), 3u);  // one per conv
  for (const LoweredTuningSite& s : low.tuning_sites) {
    ASSERT_GE(s.configs.size(), 2u) << s.key;
    ASSERT_EQ(s.kernels.size(), s.configs.size());
    EXPECT_FALSE(s.key.empty());
    for (size_t i = 0; i < s.configs.size(); ++i)
      EXPECT_NE(s.kernels[i].name.find(s.configs[i]), std::string::npos) << s.kernels[i].name;
    // The rules' config is the one the plan's kernel uses.
    for (const LoweredKernel& k : low.kernels) {
      if (k.group == s.group) {
        EXPECT_EQ(k.source, s.kernels[0].source) << k.name;
      }
    }
  }
}

TEST(LowerGraph, ScheduleOverridesAreCheckedAndApplied) {
  Graph g = example("add_layernorm_gelu.json");
  LoweringOptions o;
  o.schedule = "rownorm.threads=512";
  Lowering tuned = lower_graph(g, o);
  EXPECT_NE(tuned.kernels[0].source, lower_graph(g).kernels[0].source);
  o.schedule = "rownorm.bogus=1";
  EXPECT_NE(test::user_error([&] { lower_graph(g, o); }).find("bogus"), std::string::npos);
}

// The internal lowering's hook gets the tuning sites before codegen (where autotuning measures
// them), and the tuned lookup then decides the kernel.
TEST(Lower, PlannedHookThenTunedConfig) {
  auto g = std::make_shared<const Graph>(example("resnet50_bottleneck.json"));
  LowerOptions o;
  o.tuning_sites = true;
  std::string key;
  std::optional<ContractionConfig> pick;
  o.planned = [&](const Lowered& l) {
    ASSERT_FALSE(l.tuning_sites.empty());
    EXPECT_TRUE(l.kernels.empty());
    key = l.tuning_sites[0].key;
    pick = l.tuning_sites[0].configs[1];  // what autotuning would have recorded
  };
  o.tuned = [&](const std::string& k) -> std::optional<ContractionConfig> {
    return k == key ? pick : std::nullopt;
  };
  Lowered low = lower(g, default_device_info("sm_90"), o);
  ASSERT_TRUE(pick);
  bool found = false;
  for (const KernelSpec& k : low.kernels)
    found = found || k.name.find(pick->str()) != std::string::npos;
  EXPECT_TRUE(found) << pick->str();
}

TEST(Lower, GraphWithoutOutputsIsAUserError) {
  auto g = std::make_shared<const Graph>("empty");
  EXPECT_NE(
      test::user_error([&] { lower(g, default_device_info("sm_90"), {}); }).find("no outputs"),
      std::string::npos);
}

TEST(Device, DefaultsPerArchAndABadArchNamesItsFlag) {
  DeviceFacts h = default_device("sm_90");
  EXPECT_EQ(h.arch, "sm_90");
  EXPECT_EQ(h.sm, 90);
  EXPECT_EQ(h.sm_count, 132);
  EXPECT_FALSE(h.from_device);
  DeviceFacts a = default_device("sm_80");
  EXPECT_EQ(a.sm_count, 108);
  EXPECT_LT(a.mem_bandwidth, h.mem_bandwidth);
  EXPECT_EQ(test::user_error([] { default_device("sm_7", "--arch"); }).rfind("--arch: ", 0), 0u);
  EXPECT_EQ(test::user_error([] { default_device("bogus"); }).rfind("arch: ", 0), 0u);
  std::string why;
  if (!cuda_available(&why)) {
    EXPECT_FALSE(why.empty());
  }
}

TEST(RandomValues, AreDeterministic) {
  std::vector<double> a = random_values(true, 0.0, 1.0, 7, 64);
  EXPECT_EQ(a, random_values(true, 0.0, 1.0, 7, 64));
  EXPECT_NE(a, random_values(true, 0.0, 1.0, 8, 64));
  for (double v : random_values(false, -2.0, 2.0, 3, 256)) {
    EXPECT_GE(v, -2.0);
    EXPECT_LT(v, 2.0);
  }
}

class PublicCalls : public kiln::testing::CompileOnlyEngineTest {};

TEST_F(PublicCalls, KernelCacheInfoAndClear) {
  const std::string dir = dir_.string();
  EXPECT_EQ(kernel_cache_dir(dir), dir);
  EXPECT_FALSE(kernel_cache_dir().empty());
  KernelCacheInfo none = kernel_cache_info(dir);  // not created yet
  EXPECT_EQ(none.dir, dir);
  EXPECT_EQ(none.entries, 0);
  Engine e(opts());
  CompiledGraph cg = e.compile(example("add_layernorm_gelu.json"));
  KernelCacheInfo some = kernel_cache_info(dir);
  EXPECT_EQ(some.entries, static_cast<int64_t>(cg.kernels().size()));
  EXPECT_GT(some.bytes, 0);
  EXPECT_EQ(clear_kernel_cache(dir), some.entries);
  EXPECT_EQ(kernel_cache_info(dir).entries, 0);
}

// The Engine builds exactly the kernels lower_graph describes.
TEST_F(PublicCalls, EngineCompilesTheLoweredKernels) {
  Graph g = example("transformer_mlp.json");
  Engine e(opts());
  CompiledGraph cg = e.compile(g);
  Lowering low = lower_graph(g);
  ASSERT_EQ(cg.kernels().size(), low.kernels.size());
  for (size_t i = 0; i < low.kernels.size(); ++i) {
    EXPECT_EQ(cg.kernels()[i].name, low.kernels[i].name);
    EXPECT_EQ(cg.kernels()[i].group, low.kernels[i].group);
  }
  EngineStats st = e.stats();
  EXPECT_EQ(st.plans, 1);
  EXPECT_GE(st.passes_ms, 0);
  EXPECT_GT(st.codegen_ms, 0);
}

TEST_F(PublicCalls, CheckEnvironmentReportsTheSettings) {
  EnvConfig c;
  c.disable_fusion = true;
  c.cache_dir = "/some/dir";
  set_env_override(&c);
  Environment env = check_environment();
  EXPECT_TRUE(env.fusion_disabled);
  EXPECT_FALSE(env.disk_cache_disabled);
  EXPECT_EQ(env.cache_dir, "/some/dir");
  // KILN_DISABLE=fusion: lowering makes one group per node, as the Engine does.
  Graph g = example("add_layernorm_gelu.json");
  EXPECT_EQ(lower_graph(g).groups.size(), g.nodes().size());
  c.schedule = "rownorm.nosuch=1";
  set_env_override(&c);
  EXPECT_NE(test::user_error([] { check_environment(); }).find("nosuch"), std::string::npos);
}

}  // namespace
