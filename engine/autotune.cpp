#include "engine/autotune.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <thread>

#include "kiln/error.hpp"
#include "runtime/kernel_timer.hpp"

namespace kiln {

std::vector<AutotuneResult> autotune_contractions(const Graph& g, const Plan& plan,
                                                  const CodegenOptions& co, KernelCache& cache,
                                                  const std::string& arch, TuningTable& table,
                                                  int iters) {
  std::vector<AutotuneResult> out;
  bool changed = false;
  for (TuningSite& site : contraction_tuning_sites(g, plan, co)) {
    AutotuneResult r;
    r.group = site.group;
    r.key = site.key;
    r.rule = site.configs.front().str();
    if (std::optional<TuningEntry> have = table.find(site.key)) {
      r.reused = true;
      r.winner = have->config.str();
      r.winner_ms = have->ms;
      r.rule_ms = have->rule_ms;
      r.candidates = have->candidates;
      out.push_back(r);
      continue;
    }
    // Compile every candidate at once (the cache compiles each distinct source once).
    const size_t n = site.kernels.size();
    std::vector<std::exception_ptr> compile_errors;
    std::vector<CachedKernel> cubins =
        compile_kernels(cache, site.kernels, arch,
                        std::max(1u, std::thread::hardware_concurrency()), &compile_errors);
    std::vector<std::string> errors(n);
    for (size_t i = 0; i < n; ++i) {
      if (!compile_errors[i]) continue;
      try {
        std::rethrow_exception(compile_errors[i]);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    }

    Bindings b(site.bindings.begin(), site.bindings.end());
    size_t best = n;
    std::vector<double> ms(n, -1);
    for (size_t i = 0; i < n; ++i) {
      if (errors[i].empty()) {
        try {
          ms[i] = cuda::time_kernel_alone(site.kernels[i], *cubins[i].cubin, g, b, iters);
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      }
      if (!errors[i].empty()) {
        r.skipped.push_back(fmt::format("{}: {}", site.configs[i].str(), errors[i]));
        continue;
      }
      ++r.candidates;
      if (best == n || ms[i] < ms[best]) best = i;
    }
    if (best == n) {  // nothing ran: keep the rules (the executor reports the real error)
      out.push_back(r);
      continue;
    }
    r.winner = site.configs[best].str();
    r.winner_ms = ms[best];
    r.rule_ms = std::max(0.0, ms[0]);  // 0: the rules' config itself failed
    TuningEntry e;
    e.config = site.configs[best];
    e.ms = ms[best];
    e.rule_ms = r.rule_ms;
    e.candidates = r.candidates;
    table.put(site.key, e);
    changed = true;
    out.push_back(r);
  }
  if (changed && !table.path().empty()) {
    // The measurements stand for this process even when the file cannot be written.
    try {
      table.save();
    } catch (const std::exception& e) {
      fmt::print(stderr, "kiln: autotune results not saved: {}\n", e.what());
    }
  }
  return out;
}

}  // namespace kiln
