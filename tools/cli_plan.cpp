// `kiln plan GRAPH`: the fusion plan the Engine builds (kiln/lowering.hpp) and its kernels.
#include <fmt/format.h>

#include "kiln/io.hpp"
#include "kiln/lowering.hpp"
#include "tools/cli_common.hpp"

namespace kiln::cli {
namespace {

int run_plan(const std::vector<std::string>& argv) {
  Args a = parse_args("plan", argv, {{"--no-fusion", false, false}, {"--arch", true, false}}, 1, 1);
  LoweringOptions lo;
  lo.target = default_device(a.get("--arch", "sm_90"), "--arch");
  lo.fusion = !a.has("--no-fusion");
  // Printed once planned: a group codegen then refuses is named after the plan that shows it.
  lo.planned = [](const Lowering& l) {
    if (!l.passes_note.empty()) fmt::print("# {}\n", l.passes_note);
    fmt::print("{}", l.plan_text);
  };
  Lowering low = lower_graph(load_graph_file(a.positional[0]), lo);
  const size_t nodes = low.graph->nodes().size();
  fmt::print("\n{} kernel{} for {} node{}:\n", low.kernels.size(),
             low.kernels.size() == 1 ? "" : "s", nodes, nodes == 1 ? "" : "s");
  for (const LoweredKernel& k : low.kernels)
    fmt::print("  group {:>3}  {}  grid=[{}, {}, {}] block=[{}, {}, {}] smem={} bytes={}\n",
               k.group, k.name, k.grid[0].str(), k.grid[1].str(), k.grid[2].str(), k.block[0],
               k.block[1], k.block[2], k.smem_bytes, k.bytes_moved.str());
  return 0;
}

}  // namespace

KILN_CLI_COMMAND(
    plan, "plan", "show the fusion plan: groups, nodes, kernels, and why",
    "usage: kiln plan GRAPH [--no-fusion] [--arch sm_XX]\n\n"
    "Prints every fusion group with its nodes, inputs, outputs and the reason for each\n"
    "boundary, then the kernel generated for each group (name, launch geometry as\n"
    "expressions over the graph's symbols, bytes moved).\n",
    run_plan);

}  // namespace kiln::cli
