// `kiln explain`: the text names every fusion group and kernel of the plan with a roofline bound,
// and --dot writes Graphviz that `dot -Tsvg` renders (skipped with a reason when dot is missing).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "codegen/kernel_spec.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/io.hpp"
#include "tests/shell_util.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

using kiln::testing::run_shell;
int run(const std::string& cmd, std::string* out) {
  return run_shell(cmd, out);
}

std::string read(const fs::path& p) {
  std::ifstream is(p);
  std::stringstream ss;
  ss << is.rdbuf();
  return ss.str();
}

class Explain : public ::testing::TestWithParam<const char*> {};

TEST_P(Explain, TextNamesEveryGroupAndDotRenders) {
  fs::path graph = fs::path(kiln::testing::source_dir()) / "examples" / "graphs" / GetParam();
  fs::path tmp = fs::temp_directory_path() /
                 ("kiln_explain_" + std::to_string(getpid()) + "_" + GetParam() + ".dot");
  std::string out;
  ASSERT_EQ(run(std::string("'") + kiln::testing::cli_path() + "' explain '" + graph.string() +
                    "' --arch sm_90 --dot '" + tmp.string() + "'",
                &out),
            0)
      << out;

  // Every group and kernel of the plan the Engine builds (after batchnorm folding; sm_90a
  // contractions), with a bound and a predicted time.
  std::shared_ptr<const Graph> gp =
      apply_engine_passes(std::make_shared<const Graph>(load_graph_file(graph.string())), true);
  const Graph& g = *gp;
  Plan p = plan_fusion(g);
  CodegenOptions co;
  co.sm = 90;
  co.arch_specific = true;
  std::vector<KernelSpec> ks = generate_kernels(g, p, co);
  ASSERT_FALSE(ks.empty());
  for (const KernelSpec& k : ks) {
    EXPECT_NE(out.find("group " + std::to_string(k.group) + " ["), std::string::npos)
        << k.group << "\n"
        << out;
    EXPECT_NE(out.find("kernel " + k.name), std::string::npos) << k.name << "\n" << out;
  }
  for (const Node& n : g.nodes()) EXPECT_NE(out.find(n.name + " ("), std::string::npos) << n.name;
  size_t bounds = 0;
  for (size_t at = out.find("-bound, predicted"); at != std::string::npos;
       at = out.find("-bound, predicted", at + 1))
    ++bounds;
  EXPECT_EQ(bounds, ks.size()) << out;
  EXPECT_NE(out.find("total predicted"), std::string::npos) << out;
  if (!g.symbols().empty()) {
    EXPECT_NE(out.find("set to 1"), std::string::npos) << out;
  }

  // The DOT: one cluster per group, every node, the inputs and outputs.
  std::string dot = read(tmp);
  ASSERT_FALSE(dot.empty());
  for (const FusionGroup& grp : p.groups)
    EXPECT_NE(dot.find("subgraph cluster_g" + std::to_string(grp.id) + " "), std::string::npos)
        << grp.id;
  for (size_t n = 0; n < g.nodes().size(); ++n)
    EXPECT_NE(dot.find("  n" + std::to_string(n) + " ["), std::string::npos) << n;
  for (int id : g.inputs())
    EXPECT_NE(dot.find("t" + std::to_string(id) + " [label=\"" + g.tensor(id).name),
              std::string::npos);
  for (int id : g.outputs())
    EXPECT_NE(dot.find("out" + std::to_string(id) + " ["), std::string::npos);

  std::string which;
  if (run("command -v dot", &which) != 0) {
    fs::remove(tmp);
    GTEST_SKIP() << "graphviz 'dot' is not installed: the DOT was not rendered";
  }
  fs::path svg = tmp;
  svg.replace_extension(".svg");
  ASSERT_EQ(run("dot -Tsvg '" + tmp.string() + "' -o '" + svg.string() + "'", &out), 0)
      << out << "\n"
      << dot;
  std::string s = read(svg);
  EXPECT_NE(s.find("<svg"), std::string::npos);
  for (const KernelSpec& k : ks) EXPECT_NE(s.find(k.name), std::string::npos) << k.name;
  fs::remove(tmp);
  fs::remove(svg);
}

INSTANTIATE_TEST_SUITE_P(ExampleGraphs, Explain,
                         ::testing::Values("add_layernorm_gelu.json", "resnet50_bottleneck.json",
                                           "transformer_mlp.json", "unet_resblock.json"),
                         [](const auto& info) {
                           std::string s = info.param;
                           return s.substr(0, s.find('.'));
                         });

TEST(ExplainCli, BadArgumentsAreUsageErrors) {
  std::string out;
  EXPECT_EQ(run(std::string("'") + kiln::testing::cli_path() + "' explain", &out), 2) << out;
  EXPECT_EQ(run(std::string("'") + kiln::testing::cli_path() + "' explain '" +
                    kiln::testing::source_dir() +
                    "/examples/graphs/add_layernorm_gelu.json' --shape nosuch=3",
                &out),
            2)
      << out;
  EXPECT_NE(out.find("nosuch"), std::string::npos) << out;
}

}  // namespace
