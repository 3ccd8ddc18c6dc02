// Autotuning without a device: the candidate configs, the shape-class key, the tuning file
// (round trip, atomic rewrite, garbage / truncated / implausible files ignored), codegen using a
// tuned config (and ignoring one that is not a candidate), and an Engine reusing a tuning file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <unistd.h>

#include "codegen/kernel_spec.hpp"
#include "engine/api/autotune.hpp"
#include "engine/planner/plan.hpp"
#include "heuristics/tuning_table.hpp"
#include "kiln/engine.hpp"
#include "kiln/error.hpp"
#include "kiln/graph.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;

ContractionProblemInfo conv_info(int64_t m, bool estimate) {
  ContractionProblemInfo p;
  p.m = m;
  p.n = 512;
  p.k = 512 * 9;
  p.m_is_estimate = estimate;
  p.dtype = DType::F16;
  p.sm = 90;
  p.wgmma_ok = true;
  return p;
}

TEST(Autotune, CandidatesStartWithTheRulesAndAreValidAndDistinct) {
  for (bool estimate : {false, true}) {
    ContractionProblemInfo p = conv_info(32 * 7 * 7, estimate);
    std::vector<ContractionConfig> c = contraction_candidates(p);
    ASSERT_GE(c.size(), 6u);
    EXPECT_LE(c.size(), 16u);
    EXPECT_TRUE(c.front() == choose_contraction_config(p));
    std::set<std::string> names;
    bool split = false;
    for (const ContractionConfig& x : c) {
      EXPECT_EQ(x.kind, ContractionConfig::Kind::Wgmma) << x.str();
      EXPECT_LE(x.smem_bytes(), p.smem_optin) << x.str();
      EXPECT_TRUE(names.insert(x.str()).second) << "duplicate " << x.str();
      split = split || x.split_k > 1;
    }
    // Split-K needs a concrete M (a symbolic batch may be much larger than the estimate).
    EXPECT_EQ(split, !estimate);
  }
  // Without wgmma: the mma.sync tiles; f32 without tensor cores: one candidate.
  ContractionProblemInfo mma = conv_info(4096, false);
  mma.wgmma_ok = false;
  for (const ContractionConfig& x : contraction_candidates(mma))
    EXPECT_EQ(x.kind, ContractionConfig::Kind::Mma) << x.str();
  EXPECT_GE(contraction_candidates(mma).size(), 4u);
  ContractionProblemInfo f32 = mma;
  f32.dtype = DType::F32;
  EXPECT_EQ(contraction_candidates(f32).size(), 1u);
  EXPECT_EQ(contraction_candidates(conv_info(512, false), 3).size(), 3u);
}

TEST(Autotune, KeySeparatesShapeClasses) {
  ContractionProblemInfo a = conv_info(1568, false), b = conv_info(1568, true);
  EXPECT_NE(contraction_tuning_key(a, "conv_x"), contraction_tuning_key(b, "conv_x"));
  EXPECT_NE(contraction_tuning_key(a, "conv_x"), contraction_tuning_key(a, "conv_y"));
  EXPECT_EQ(contraction_tuning_key(a, "conv_x"),
            contraction_tuning_key(conv_info(1568, false), "conv_x"));
  ContractionProblemInfo other_gpu = a;
  other_gpu.sm_count = 114;
  EXPECT_NE(contraction_tuning_key(a, "s"), contraction_tuning_key(other_gpu, "s"));
}

class TuningFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("kiln_tuning_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path() const { return (dir_ / "sub" / "tuning.json").string(); }
  void write(const std::string& text) const {
    fs::create_directories(dir_ / "sub");
    std::ofstream(path(), std::ios::binary) << text;
  }
  fs::path dir_;
};

TEST_F(TuningFile, RoundTripsAndRewritesAtomically) {
  std::string note;
  TuningTable t(path(), &note);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(note, "");  // no file yet is not a problem
  TuningEntry e;
  e.config = contraction_candidates(conv_info(1568, false))[3];
  e.ms = 0.031;
  e.rule_ms = 0.042;
  e.candidates = 12;
  t.put("k1", e);
  t.save();
  TuningTable back(path());
  ASSERT_EQ(back.size(), 1u);
  std::optional<TuningEntry> got = back.find("k1");
  ASSERT_TRUE(got);
  EXPECT_TRUE(got->config == e.config) << got->config.str();
  EXPECT_DOUBLE_EQ(got->ms, 0.031);
  EXPECT_EQ(got->candidates, 12);
  EXPECT_FALSE(back.find("k2"));
  back.put("k2", e);
  back.save();
  EXPECT_EQ(TuningTable(path()).size(), 2u);
  for (const auto& f : fs::directory_iterator(dir_ / "sub"))  // no temp file left behind
    EXPECT_EQ(f.path().filename(), "tuning.json");
}

TEST_F(TuningFile, GarbageTruncatedAndImplausibleFilesAreIgnored) {
  TuningTable good(path());
  TuningEntry e;
  e.config = choose_contraction_config(conv_info(1568, false));
  good.put("k", e);
  good.save();
  std::string text = good.to_json();
  const std::vector<std::string> bad = {"garbage \x01\x02", text.substr(0, text.size() / 2),
                                        "{\"kiln_tuning\": 2, \"entries\": {}}", "[1, 2, 3]"};
  for (const std::string& b : bad) {
    write(b);
    std::string note;
    TuningTable t(path(), &note);
    EXPECT_EQ(t.size(), 0u) << b;
    EXPECT_NE(note.find("not a valid kiln tuning file"), std::string::npos) << note;
  }
  // A syntactically fine entry with a config no emitter builds is not trusted either.
  std::string odd = text;
  size_t at = odd.find("\"bm\": ");
  ASSERT_NE(at, std::string::npos);
  odd.replace(at, odd.find(',', at) - at, "\"bm\": 96");
  write(odd);
  EXPECT_EQ(TuningTable(path()).size(), 0u);
}

Graph conv_graph_static() {
  Graph g("conv");
  Tensor x = g.input("x", DType::F16, {32, 512, 7, 7}, Layout::NHWC);
  Tensor w = g.constant_random("w", {DType::F16, {512, 512, 3, 3}, Layout::NHWC, {}}, "normal", 0,
                               0.02, 1);
  Tensor b = g.constant_random("b", {DType::F16, {512}, Layout::NCHW, {}}, "normal", 0, 1, 2);
  Conv2dOptions o;
  o.padding = {1, 1};
  g.output(g.add_node1("relu", {g.conv2d(x, w, b, o)}));
  return g;
}

TEST(Autotune, CodegenUsesATunedCandidateAndIgnoresAnythingElse) {
  Graph g = conv_graph_static();
  Plan plan = plan_fusion(g);
  CodegenOptions co;
  co.sm = 90;
  co.arch_specific = true;
  std::vector<TuningSite> sites = contraction_tuning_sites(g, plan, co);
  ASSERT_EQ(sites.size(), 1u);
  const TuningSite& s = sites[0];
  ASSERT_GE(s.configs.size(), 3u);
  ASSERT_EQ(s.kernels.size(), s.configs.size());
  EXPECT_TRUE(s.bindings.empty());  // a static graph
  for (size_t i = 0; i < s.configs.size(); ++i)
    EXPECT_NE(s.kernels[i].name.find(s.configs[i].str()), std::string::npos) << s.kernels[i].name;

  const std::string rule_name = generate_kernels(g, plan, co)[0].name;
  const ContractionConfig pick = s.configs[2];
  co.tuned = [&](const std::string& key) -> std::optional<ContractionConfig> {
    EXPECT_EQ(key, s.key);
    return pick;
  };
  const KernelSpec tuned = generate_kernels(g, plan, co)[0];
  EXPECT_NE(tuned.name.find(pick.str()), std::string::npos);
  EXPECT_EQ(tuned.source, s.kernels[2].source);  // the measured candidate's compile is reused
  ContractionConfig not_a_candidate = pick;
  not_a_candidate.stages = 7;
  co.tuned = [&](const std::string&) -> std::optional<ContractionConfig> {
    return not_a_candidate;
  };
  EXPECT_EQ(generate_kernels(g, plan, co)[0].name, rule_name);
}

// Later processes reuse the file: an Engine without a device (compile only) and without
// autotune builds the config the file names for the shape class.
TEST(Autotune, EngineReusesTheTuningFileWithoutADevice) {
  fs::path dir = fs::path(::testing::TempDir()) / ("kiln_tuning_e" + std::to_string(::getpid()));
  fs::remove_all(dir);
  Graph g = conv_graph_static();
  CodegenOptions co;
  co.sm = 90;
  co.arch_specific = true;
  std::vector<TuningSite> sites = contraction_tuning_sites(g, plan_fusion(g), co);
  ASSERT_EQ(sites.size(), 1u);
  TuningTable t((dir / "tuning.json").string());
  TuningEntry e;
  e.config = sites[0].configs[1];
  t.put(sites[0].key, e);
  t.save();

  EngineOptions o;
  o.arch = "sm_90";
  o.load_kernels = false;
  o.cache_dir = (dir / "cache").string();
  o.tuning_file = (dir / "tuning.json").string();
  o.autotune = true;  // no device: nothing is measured, the file is still used
  Engine eng(o);
  CompiledGraph cg = eng.compile(g);
  ASSERT_FALSE(cg.kernels().empty());
  EXPECT_NE(cg.kernels()[0].name.find(e.config.str()), std::string::npos) << cg.kernels()[0].name;
  EXPECT_EQ(eng.stats().autotune_measured, 0);
  fs::remove_all(dir);
}

// A shape class already in the table is reused without touching the device: the result names
// the file's config and the rules' config.
TEST(Autotune, ReusedClassMeasuresNothing) {
  fs::path dir = fs::path(::testing::TempDir()) / ("kiln_tuning_r" + std::to_string(::getpid()));
  fs::remove_all(dir);
  Graph g("conv_dyn");
  Tensor x = g.input("x", DType::F16, {"N", 64, 14, 14}, Layout::NHWC);
  Tensor w =
      g.constant_random("w", {DType::F16, {64, 64, 3, 3}, Layout::NHWC, {}}, "normal", 0, 0.05, 1);
  Tensor b = g.constant_random("b", {DType::F16, {64}, Layout::NCHW, {}}, "normal", 0, 1, 2);
  Conv2dOptions o;
  o.padding = {1, 1};
  g.output(g.add_node1("relu", {g.conv2d(x, w, b, o)}));
  Plan plan = plan_fusion(g);
  CodegenOptions co;
  co.sm = 90;
  co.arch_specific = true;
  std::vector<TuningSite> sites = contraction_tuning_sites(g, plan, co);
  ASSERT_EQ(sites.size(), 1u);
  TuningTable t((dir / "tuning.json").string());
  TuningEntry e;
  e.config = sites[0].configs[1];
  e.ms = 0.5;
  e.rule_ms = 0.75;
  e.candidates = 7;
  t.put(device_tuning_key(sites[0].key, "Test GPU"), e);
  t.save();
  TuningTable again((dir / "tuning.json").string());
  KernelCache cache(KernelCacheOptions{(dir / "cache").string(), false});
  std::vector<AutotuneResult> r =
      autotune_contractions(g, plan, sites, cache, "sm_90a", "Test GPU", again);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].reused);
  EXPECT_EQ(r[0].winner, e.config.str());
  EXPECT_EQ(r[0].rule, sites[0].configs[0].str());
  EXPECT_EQ(r[0].candidates, 7);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln
