// Lowering: a graph -> the graph after the engine passes -> its fusion plan -> one kernel spec
// per group, for one target device. The only code that sequences these stages and builds their
// options (PlanOptions, CodegenOptions): the Engine, autotuning, `kiln plan|emit|explain` and the
// public kiln::lower_graph() all lower through it, so they all see the same kernels.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "engine/planner/plan.hpp"
#include "heuristics/contraction_config.hpp"
#include "heuristics/device_info.hpp"
#include "heuristics/schedule.hpp"
#include "kiln/graph.hpp"

namespace kiln {

struct Lowered {
  std::shared_ptr<const Graph> graph;  // after the passes (the input itself when none applied)
  std::string passes_note;             // what the passes changed ("" when nothing)
  Plan plan;
  std::vector<KernelSpec> kernels;
  std::vector<TuningSite> tuning_sites;  // with LowerOptions::tuning_sites
  // Wall time of the graph passes, and of planning + tuning + code generation.
  int64_t passes_us = 0, codegen_us = 0;
};

struct LowerOptions {
  bool fusion = true;          // false: no graph passes, one group per node
  ScheduleOverrides schedule;  // hand overrides of the schedule rules (KILN_SCHEDULE)
  // The tuned contraction config of a shape class (the tuning table); empty: the rules'.
  std::function<std::optional<ContractionConfig>(const std::string& key)> tuned;
  bool dump_plan = false;     // print the plan on stderr once it is made (KILN_DUMP=plan)
  bool tuning_sites = false;  // also every contraction's autotune candidates (Lowered)
  // Called once the graph is planned (and its tuning sites made, when asked for), before codegen,
  // with what is lowered so far (no kernels yet): autotuning measures the sites there, for
  // `tuned` to find; `kiln plan` prints the plan even when codegen then fails.
  std::function<void(const Lowered& so_far)> planned;
};

// `target`: the device's facts (queried, or default_device_info for an arch); its arch decides
// the planner's and codegen's sm. Throws a user error for a graph without outputs or a combination
// codegen does not support.
Lowered lower(std::shared_ptr<const Graph> g, const DeviceInfo& target, const LowerOptions& o);

}  // namespace kiln
