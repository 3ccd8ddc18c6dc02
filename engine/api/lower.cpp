// Lowering (engine/api/lower.hpp): passes -> plan -> [tuning sites] -> codegen.
#include "engine/api/lower.hpp"

#include <fmt/format.h>

#include <chrono>

#include "engine/api/fold_constants.hpp"
#include "engine/base/check.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {

namespace {

// Microseconds since `t0`; restarts `t0`.
int64_t lap_us(std::chrono::steady_clock::time_point* t0) {
  auto now = std::chrono::steady_clock::now();
  int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(now - *t0).count();
  *t0 = now;
  return us;
}

}  // namespace

Lowered lower(std::shared_ptr<const Graph> g, const DeviceInfo& target, const LowerOptions& o) {
  Lowered out;
  auto t0 = std::chrono::steady_clock::now();
  // Constants first: the passes then see the folded results as the constants they are.
  std::string folded;
  if (o.fusion) g = fold_constants(std::move(g), &folded);
  out.graph = apply_engine_passes(std::move(g), o.fusion, &out.passes_note);
  if (!folded.empty())
    out.passes_note = out.passes_note.empty() ? folded : folded + "; " + out.passes_note;
  out.passes_us = lap_us(&t0);
  const Graph& graph = *out.graph;
  KILN_CHECK(!graph.outputs().empty(), "graph '{}': no outputs to compute", graph.name());

  PlanOptions po;
  po.fusion = o.fusion;
  po.fused_attention = o.schedule.attention_fused != 2;
  po.sm = parse_arch(target.arch);
  out.plan = plan_fusion(graph, po);
  if (o.dump_plan) fmt::print(stderr, "{}", plan_to_string(graph, out.plan));

  CodegenOptions co = codegen_options(target, o.schedule);
  // Before co.tuned is set: each site's first candidate is the rules' config.
  if (o.tuning_sites) out.tuning_sites = contraction_tuning_sites(graph, out.plan, co);
  if (o.planned) o.planned(out);
  co.tuned = o.tuned;
  out.kernels = generate_kernels(graph, out.plan, co);
  for (const KernelSpec& s : out.kernels)
    KILN_ASSERT(!s.name.empty() && !s.entry.empty() && !s.source.empty(),
                "codegen returned an incomplete kernel for group {} (name '{}', entry '{}')",
                s.group, s.name, s.entry);
  out.codegen_us = lap_us(&t0);
  return out;
}

}  // namespace kiln
