// Dynamic shapes without a GPU: the canonical graph key, the Engine's graph-level cache, shape
// classes (kernel sources, hence cache keys, never depend on the values of symbolic dims),
// specialized graphs, `kiln cache warm` and `kiln run --stats`.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "codegen/kernel_spec.hpp"
#include "engine/base/env.hpp"
#include "engine/ir/graph_key.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/engine.hpp"
#include "kiln/error.hpp"
#include "kiln/io.hpp"
#include "tests/engine_test_fixture.hpp"
#include "tests/test_paths.hpp"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

std::string src(const std::string& rel) {
  return (fs::path(kiln::testing::source_dir()) / rel).string();
}

// x[sym, 64] * w -> relu -> layernorm: intermediates and nodes named after `prefix`.
Graph keyed_graph(const std::string& prefix = "a_", double eps = 1e-5, const std::string& sym = "N",
                  DType dt = DType::F16) {
  Graph g("keyed");
  Tensor x = g.input("x", dt, {sym, 64});
  Tensor w = g.constant_random("w", TensorDesc{dt, {64}, Layout::NCHW, {}}, "uniform", 0.5, 1.5, 1);
  Tensor h = g.add_node("mul", {x, w}, {}, prefix + "mul", {prefix + "h"})[0];
  Tensor r = g.add_node("relu", {h}, {}, prefix + "relu", {prefix + "r"})[0];
  Tensor y = g.add_node("layernorm", {r}, {{"eps", eps}}, "ln", {"y"})[0];
  g.output(y);
  return g;
}

class DynamicShapes : public kiln::testing::CompileOnlyEngineTest {};

std::vector<std::string> sources(const Graph& g, int sm = 90) {
  CodegenOptions co;
  co.sm = sm;
  std::vector<std::string> s;
  for (const KernelSpec& k : generate_kernels(g, plan_fusion(g), co)) s.push_back(k.source);
  return s;
}

}  // namespace

TEST(GraphKey, NamesOfIntermediatesDoNotMatterEverythingElseDoes) {
  Graph a = keyed_graph("a_"), b = keyed_graph("b_");
  EXPECT_EQ(graph_key(a), graph_key(keyed_graph("a_")));
  EXPECT_EQ(graph_key(a), graph_key(b));  // only intermediate and node names differ
  EXPECT_EQ(graph_names_hash(a), graph_names_hash(keyed_graph("a_")));
  EXPECT_NE(graph_names_hash(a), graph_names_hash(b));
  EXPECT_EQ(graph_key(a).size(), 32u);

  EXPECT_NE(graph_key(a), graph_key(keyed_graph("a_", 1e-6)));                   // an attribute
  EXPECT_NE(graph_key(a), graph_key(keyed_graph("a_", 1e-5, "M")));              // a symbol
  EXPECT_NE(graph_key(a), graph_key(keyed_graph("a_", 1e-5, "N", DType::F32)));  // a dtype
  Graph c = keyed_graph("a_");
  c.mutable_tensors()[c.find("w")].data->data[5] ^= std::byte{1};  // one bit of constant data
  EXPECT_NE(graph_key(a), graph_key(c));
  Graph d = keyed_graph("a_");
  d.mutable_tensors()[d.find("y")].name = "z";  // an output's name is the run interface
  EXPECT_NE(graph_key(a), graph_key(d));
  Graph e = keyed_graph("a_");
  e.mutable_tensors()[e.find("x")].desc.shape[1] = Dim(128);  // a static dim
  EXPECT_NE(graph_key(a), graph_key(e));
  Graph f = keyed_graph("a_");
  f.set_name("other");
  EXPECT_NE(graph_key(a), graph_key(f));
}

TEST(GraphKey, SpecializeGraphBakesEverySymbol) {
  Graph g("reshaped");
  Tensor x = g.input("x", DType::F32, {"N", 4, 16});
  Tensor r = g.reshape(x, {Dim("N"), Dim(64)});
  g.output(g.relu(r));
  ASSERT_EQ(g.symbols(), std::vector<std::string>{"N"});
  Graph s = specialize_graph(g, {{"N", 6}});
  EXPECT_TRUE(s.symbols().empty());
  EXPECT_EQ(s.tensor(s.find("x")).desc.str(), "f32[6, 4, 16]");
  EXPECT_EQ(s.tensor(s.outputs()[0]).desc.str(), "f32[6, 64]");
  EXPECT_EQ(s.nodes()[0].attr_dims("shape")[0], Dim(6));
  EXPECT_NE(graph_key(s), graph_key(g));
  EXPECT_NE(graph_key(s), graph_key(specialize_graph(g, {{"N", 7}})));
  EXPECT_THROW(specialize_graph(g, {{"M", 6}}), Error);  // N unbound
}

TEST_F(DynamicShapes, SecondCompileIsAGraphCacheHitWithExactCounters) {
  Engine e(opts());
  Graph g = keyed_graph("a_");
  CompiledGraph first = e.compile(g);
  EngineStats s0 = e.stats();
  size_t nk = first.kernels().size();
  ASSERT_GE(nk, 1u);
  EXPECT_EQ(s0.plans, 1);
  EXPECT_EQ(s0.graph_cache_hits, 0);
  EXPECT_EQ(s0.nvrtc_compiles + s0.memory_cache_hits + s0.disk_cache_hits,
            static_cast<int64_t>(nk));

  CompiledGraph again = e.compile(g);
  EngineStats s1 = e.stats();
  EXPECT_EQ(s1.graph_cache_hits, 1);
  EXPECT_EQ(s1.plans, 1);  // nothing planned, generated or looked up again
  EXPECT_EQ(s1.nvrtc_compiles, s0.nvrtc_compiles);
  EXPECT_EQ(s1.memory_cache_hits, s0.memory_cache_hits);
  EXPECT_EQ(s1.disk_cache_hits, s0.disk_cache_hits);
  ASSERT_EQ(again.kernels().size(), nk);
  for (size_t i = 0; i < nk; ++i) {
    EXPECT_EQ(again.kernels()[i].name, first.kernels()[i].name);
    EXPECT_EQ(again.kernels()[i].cache, "memory");
    EXPECT_EQ(again.kernels()[i].compile_ms, 0);
  }
  EXPECT_EQ(&again.graph(), &first.graph());  // one shared compiled graph
  EXPECT_EQ(again.workspace_size({{"N", 9}}), first.workspace_size({{"N", 9}}));

  // Other intermediate names: still a hit, but the handle reports its own names.
  Graph b = keyed_graph("b_");
  CompiledGraph renamed = e.compile(b);
  EXPECT_EQ(e.stats().graph_cache_hits, 2);
  EXPECT_EQ(e.stats().plans, 1);
  EXPECT_GE(renamed.graph().find("b_h"), 0);
  EXPECT_EQ(renamed.graph().find("a_h"), -1);
  bool saw_b = false;
  for (const KernelInfo& k : renamed.kernels())
    for (const std::string& n : k.nodes) {
      EXPECT_NE(n.rfind("a_", 0), 0u) << n;
      saw_b |= n.rfind("b_", 0) == 0;
    }
  EXPECT_TRUE(saw_b);
  for (const KernelInfo& k : first.kernels())  // the first handle is unchanged
    for (const std::string& n : k.nodes) EXPECT_NE(n.rfind("b_", 0), 0u) << n;

  // A different graph, and the same graph under KILN_DISABLE=fusion, are misses.
  e.compile(keyed_graph("a_", 1e-3));
  EXPECT_EQ(e.stats().plans, 2);
  EnvConfig c;
  c.cache_dir = dir_.string();
  c.disable_fusion = true;
  set_env_override(&c);
  e.compile(g);
  EXPECT_EQ(e.stats().plans, 3);
  EXPECT_EQ(e.stats().graph_cache_hits, 2);
}

TEST_F(DynamicShapes, ConcurrentCompilesOfOneGraphPlanOnce) {
  Engine e(opts());
  Graph g = keyed_graph();
  std::vector<std::thread> ts;
  std::vector<size_t> nk(4, 0);
  for (int i = 0; i < 4; ++i) ts.emplace_back([&, i] { nk[i] = e.compile(g).kernels().size(); });
  for (std::thread& t : ts) t.join();
  EngineStats s = e.stats();
  EXPECT_EQ(s.plans, 1);
  EXPECT_EQ(s.graph_cache_hits, 3);
  for (size_t n : nk) EXPECT_EQ(n, nk[0]);
  EXPECT_EQ(s.nvrtc_compiles + s.memory_cache_hits + s.disk_cache_hits,
            static_cast<int64_t>(nk[0]));
}

TEST_F(DynamicShapes, FailedCompileIsNotCached) {
  Engine e(opts());
  Graph g("no_outputs");
  g.input("x", DType::F32, {"N"});
  EXPECT_THROW(e.compile(g), Error);
  EXPECT_THROW(e.compile(g), Error);  // thrown again, not a cached half-built graph
  EXPECT_EQ(e.stats().graph_cache_hits, 0);
}

// Shape classes: a kernel's source depends on structure, dtypes, layouts and static dims only.
// Codegen never sees a binding, so every binding of a symbolic graph shares one set of kernels;
// only a specialized graph (values baked in) gets other kernels.
TEST_F(DynamicShapes, KernelSourcesDoNotDependOnRuntimeDims) {
  for (const char* file :
       {"examples/graphs/transformer_mlp.json", "examples/graphs/resnet50_bottleneck.json",
        "examples/graphs/add_layernorm_gelu.json"}) {
    SCOPED_TRACE(file);
    Graph g = load_graph_file(src(file));
    ASSERT_FALSE(g.symbols().empty());
    std::vector<std::string> generic = sources(g);
    EXPECT_EQ(sources(load_graph_file(src(file))), generic);

    // Every launch expression evaluates for any binding, from one set of sources.
    std::vector<KernelSpec> specs = generate_kernels(g, plan_fusion(g), {});
    for (int64_t v : {1, 2, 3, 7, 8, 13, 64, 255, 256}) {
      Bindings b;
      for (const std::string& s : g.symbols()) b[s] = v;
      for (const KernelSpec& k : specs) {
        for (const Dim& d : k.grid) EXPECT_GE(d.eval(b), 1) << k.name << " at " << v;
        for (const KernelArg& a : k.args) {
          if (a.kind == KernelArg::Kind::Int) {
            EXPECT_GE(a.value.eval(b), 0) << k.name;
          }
        }
      }
    }

    // Specialized graphs bake the values: their sources differ per binding (so the check above
    // would see a baked runtime value), and none of them is the generic one.
    Bindings b8, b32;
    for (const std::string& s : g.symbols()) {
      b8[s] = 8;
      b32[s] = 32;
    }
    std::vector<std::string> s8 = sources(specialize_graph(g, b8));
    std::vector<std::string> s32 = sources(specialize_graph(g, b32));
    EXPECT_NE(s8, s32);
    for (const std::string& s : s8)
      EXPECT_EQ(std::find(generic.begin(), generic.end(), s), generic.end());

    // Engine: one compile set for every binding; a second Engine compiles nothing.
    Engine e(opts());
    CompiledGraph cg = e.compile(g);
    int64_t compiles = e.stats().nvrtc_compiles;
    for (int64_t v : {1, 5, 64, 256}) {
      Bindings b;
      for (const std::string& s : g.symbols()) b[s] = v;
      CompiledGraph again = e.compile(g);
      EXPECT_GT(again.workspace_size(b) + again.intermediates_total(b), -1);
      EXPECT_FALSE(again.output_shapes(b).empty());
    }
    EXPECT_EQ(e.stats().nvrtc_compiles, compiles);
    EXPECT_EQ(e.stats().plans, 1);
    Engine fresh(opts());
    CompiledGraph cg2 = fresh.compile(g);
    EngineStats s = fresh.stats();
    EXPECT_EQ(s.nvrtc_compiles, 0);
    EXPECT_EQ(s.disk_cache_hits + s.memory_cache_hits, static_cast<int64_t>(cg2.kernels().size()));
  }
}

TEST_F(DynamicShapes, SpecializeAfterIsValidated) {
  EngineOptions o = opts();
  o.specialize_after = -1;
  EXPECT_THROW(Engine{o}, Error);
  o.specialize_after = 3;
  Engine e(o);  // compile-only: specialization stays off (nothing runs)
  e.compile(keyed_graph());
  EXPECT_EQ(e.stats().specializations, 0);
}

// ---------------------------------------------------------------- the CLI

namespace {

struct Cli {
  int rc = -1;
  std::string out, err;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Cli run_cli(const fs::path& tmp, const std::vector<std::string>& args) {
  fs::create_directories(tmp);
  std::string cmd = "env -u KILN_DISABLE -u KILN_DUMP " + quote(kiln::testing::cli_path());
  for (const std::string& a : args) cmd += " " + quote(a);
  cmd +=
      " >" + quote((tmp / "out").string()) + " 2>" + quote((tmp / "err").string()) + " </dev/null";
  int st = std::system(cmd.c_str());
  Cli r;
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = slurp(tmp / "out");
  r.err = slurp(tmp / "err");
  return r;
}

}  // namespace

TEST_F(DynamicShapes, CliCacheWarmCompilesOnceForEveryBinding) {
  std::string cache = (dir_ / "cache").string();
  std::string mlp = src("examples/graphs/transformer_mlp.json");
  Cli r = run_cli(dir_, {"cache", "warm", mlp, "--shape", "seq=1,8,32", "--dir", cache});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("(3 bindings)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("seq=1: 3 kernels"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("seq=8: 3 kernels"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("seq=32: 3 kernels"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 nvrtc, 0 disk, 0 memory (graph cache hit)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("total: 1 plans"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 graph cache hits"), std::string::npos) << r.out;

  // Warm again: everything from disk, nothing compiled.
  r = run_cli(dir_, {"cache", "warm", mlp, "--shape", "seq=4", "--dir", cache});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("0 nvrtc compiles"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("seq=4: 3 kernels, workspace"), std::string::npos) << r.out;

  // Usage errors: an unknown symbol, a list without a symbol, an unbound symbol, stats + GRAPH.
  r = run_cli(dir_, {"cache", "warm", mlp, "--shape", "N=1,2", "--dir", cache});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("no symbol 'N'"), std::string::npos) << r.err;
  r = run_cli(dir_, {"cache", "warm", mlp, "--shape", "8", "--dir", cache});
  EXPECT_EQ(r.rc, 2);
  r = run_cli(dir_, {"cache", "warm", mlp, "--dir", cache});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("symbol seq"), std::string::npos) << r.err;
  r = run_cli(dir_, {"cache", "stats", mlp});
  EXPECT_EQ(r.rc, 2);
  r = run_cli(dir_, {"cache", "warm", mlp, "--shape", "seq=2", "--dir", cache, "--arch", "sm90"});
  EXPECT_EQ(r.rc, 2);
}

TEST_F(DynamicShapes, CliRunStatsOnTheCpu) {
  Cli r = run_cli(dir_, {"run", src("examples/graphs/add_layernorm_gelu.json"), "--device", "cpu",
                         "--shape", "rows=2", "--stats"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("stats: none (the CPU reference compiles no kernels)"), std::string::npos)
      << r.out;
}
