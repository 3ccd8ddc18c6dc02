// Autotuning of contractions (EngineOptions::autotune, `kiln bench --autotune`): for every
// tuning site of a lowered graph (engine/api/lower.hpp: one per contraction group, with its
// candidate configs and their kernels) whose shape class the tuning table lacks, compile the
// candidates, time each alone on the device (fresh random buffers, L2 flushed, median), and
// record the fastest in the table, which is saved to its file and used by codegen from then on,
// in this process and later ones. Like cuDNN's benchmark mode: the rules stay the instant
// default; a candidate that fails to compile or launch is skipped; the rules' config is always
// among the candidates, so a valid graph never ends without a plan.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_cache.hpp"
#include "codegen/kernel_spec.hpp"
#include "heuristics/tuning_table.hpp"

namespace kiln {

struct AutotuneResult {
  int group = -1;
  std::string key;
  std::string rule, winner;  // config names (ContractionConfig::str)
  double rule_ms = 0, winner_ms = 0;
  int candidates = 0;                // measured
  bool reused = false;               // the table already had this class: nothing measured
  std::vector<std::string> skipped;  // "config: why"
};

// Needs a CUDA device, its context current (the caller checks and scopes). `arch`: NVRTC target
// of the engine ("sm_90"); `device`: the device's name, which keys the results
// (device_tuning_key). Saves the table when anything new was measured.
std::vector<AutotuneResult> autotune_contractions(const Graph& g, const Plan& plan,
                                                  const std::vector<TuningSite>& sites,
                                                  KernelCache& cache, const std::string& arch,
                                                  const std::string& device, TuningTable& table,
                                                  int iters = 30);

}  // namespace kiln
