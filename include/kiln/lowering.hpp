// What the Engine builds for a graph, without building it: the graph after kiln's passes, the
// fusion plan with the reason for each boundary, and every generated kernel (CUDA source, launch
// geometry and costs as expressions over the graph's symbols). Needs no GPU. `kiln plan`,
// `kiln emit` and `kiln explain` print this; Engine::compile lowers the same way (plus the tuning
// file's configs), then compiles and loads the kernels.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/device.hpp"
#include "kiln/graph.hpp"

namespace kiln {

// One fusion group: the nodes one kernel computes (none for a view).
struct LoweredGroup {
  int id = 0;
  std::string kind;              // "pointwise", "rownorm", "channelnorm", "reduction", "window",
                                 // "contraction", "copy", "attention" or "view"
  int anchor = -1;               // node index of its reduction/norm/contraction/window op, or -1
  std::vector<int> nodes;        // node indices (into Lowering::graph) in execution order
  std::vector<int> inputs;       // tensor ids read from outside the group
  std::vector<int> outputs;      // tensor ids written to memory
  std::string name;              // the kernel-name stem
  std::vector<std::string> why;  // one line per boundary decision ("gelu -> matmul: contraction")
};

// One generated kernel. Grid, costs: expressions over the graph's symbols (Dim::str(), eval()).
struct LoweredKernel {
  std::string name;    // unique within the plan: "rownorm_bf16_c4096_add_layernorm_gelu"
  std::string entry;   // the __global__ function (extern "C")
  std::string source;  // complete CUDA source: prelude included, no toolkit headers
  std::string arch;    // its NVRTC target: the target's arch, or "sm_90a" for wgmma kernels
  int group = -1;      // LoweredGroup::id
  std::array<Dim, 3> grid{Dim(1), Dim(1), Dim(1)};
  std::array<int, 3> block{1, 1, 1};
  int smem_bytes = 0;  // dynamic shared memory
  Dim bytes_moved;     // minimum DRAM bytes (each input read once, each output written once)
  Dim flops;
};

// The autotune candidates of one conv/matmul group (LoweringOptions::tuning_sites): what
// EngineOptions::autotune times, the rules' config first.
struct LoweredTuningSite {
  int group = -1;
  std::string key;                     // the shape class (the tuning file's key)
  std::vector<std::string> configs;    // config names ("wg128x256x64_s4")
  std::vector<LoweredKernel> kernels;  // kernels[i] implements configs[i]
};

struct Lowering {
  std::shared_ptr<const Graph> graph;  // after the passes; node and tensor ids refer to it
  std::string passes_note;  // what the passes changed ("1 batchnorm folded ..."), "" if nothing
  std::vector<LoweredGroup> groups;  // in execution order
  std::string plan_text;             // the plan as `kiln plan` prints it
  std::vector<LoweredKernel> kernels;
  std::vector<LoweredTuningSite> tuning_sites;
  double passes_ms = 0, codegen_ms = 0;  // wall time of the passes; of planning and codegen
};

struct LoweringOptions {
  // The device the kernels are for: its arch picks the kernels (sm_90a ones on sm_90), its SMs
  // and L2 size single-wave grids. Empty arch: default_device("sm_90").
  DeviceFacts target;
  bool fusion = true;    // false: no graph passes, one kernel per op (also KILN_DISABLE=fusion)
  std::string schedule;  // overrides of the schedule rules ("rownorm.threads=256"); empty:
                         // $KILN_SCHEDULE, else the rules
  bool tuning_sites = false;  // also every conv/matmul's autotune candidates (Lowering)
  // Called once the graph is planned, before code generation, with what is lowered so far (graph,
  // passes_note, groups, plan_text, passes_ms; no kernels yet): to show the plan even when
  // codegen then fails.
  std::function<void(const Lowering& so_far)> planned;
};

// Lowers `g` for `o.target`. Throws kiln::Error(User) for a graph kiln cannot build (naming the
// group and its nodes) or a bad schedule override.
Lowering lower_graph(const Graph& g, const LoweringOptions& o = {});

}  // namespace kiln
