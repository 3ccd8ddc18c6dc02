// kiln::lower_graph (kiln/lowering.hpp): lowering (engine/api/lower.hpp) as the public
// description.
#include "kiln/lowering.hpp"

#include "engine/api/lower.hpp"
#include "engine/base/env.hpp"
#include "heuristics/schedule.hpp"
#include "runtime/device_facts.hpp"

namespace kiln {

namespace {

LoweredKernel public_kernel(KernelSpec&& k, const std::string& target_arch) {
  LoweredKernel p;
  p.name = std::move(k.name);
  p.entry = std::move(k.entry);
  p.source = std::move(k.source);
  p.arch = k.arch.empty() ? target_arch : std::move(k.arch);
  p.group = k.group;
  p.grid = k.grid;
  p.block = k.block;
  p.smem_bytes = k.smem_bytes;
  p.bytes_moved = k.bytes_moved;
  p.flops = k.flops;
  return p;
}

LoweredGroup public_group(const FusionGroup& g) {
  LoweredGroup p;
  p.id = g.id;
  p.kind = group_kind_name(g.kind);
  p.anchor = g.anchor;
  p.nodes = g.nodes;
  p.inputs = g.inputs;
  p.outputs = g.outputs;
  p.name = g.name;
  p.why = g.why;
  return p;
}

}  // namespace

Lowering lower_graph(const Graph& g, const LoweringOptions& o) {
  const DeviceInfo target =
      o.target.arch.empty() ? default_device_info("sm_90") : device_info(o.target);
  LowerOptions lo;
  lo.fusion = o.fusion && !env().disable_fusion;
  lo.schedule =
      o.schedule.empty() ? env_schedule_overrides() : parse_schedule_overrides(o.schedule);
  lo.tuning_sites = o.tuning_sites;
  Lowering out;
  lo.planned = [&](const Lowered& l) {
    out.graph = l.graph;
    out.passes_note = l.passes_note;
    for (const FusionGroup& grp : l.plan.groups) out.groups.push_back(public_group(grp));
    out.plan_text = plan_to_string(*l.graph, l.plan);
    out.passes_ms = static_cast<double>(l.passes_us) / 1e3;
    if (o.planned) o.planned(out);
  };
  Lowered low = lower(std::make_shared<const Graph>(g), target, lo);
  for (KernelSpec& k : low.kernels) out.kernels.push_back(public_kernel(std::move(k), target.arch));
  for (TuningSite& s : low.tuning_sites) {
    LoweredTuningSite site;
    site.group = s.group;
    site.key = s.key;
    for (const ContractionConfig& c : s.configs) site.configs.push_back(c.str());
    for (KernelSpec& k : s.kernels)
      site.kernels.push_back(public_kernel(std::move(k), target.arch));
    out.tuning_sites.push_back(std::move(site));
  }
  out.codegen_ms = static_cast<double>(low.codegen_us) / 1e3;
  return out;
}

}  // namespace kiln
