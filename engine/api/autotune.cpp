#include "engine/api/autotune.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <thread>

#include "engine/base/env.hpp"
#include "kiln/error.hpp"
#include "runtime/kernel_timer.hpp"

namespace kiln {

namespace {

// Empty when `got` matches `ref` for every tensor (max |a - b| / max |b| within the storage
// dtype's tolerance, NaN never matching); otherwise what differs.
std::string output_mismatch(const Graph& g, const std::map<int, std::vector<float>>& got,
                            const std::map<int, std::vector<float>>& ref) {
  for (const auto& [id, want] : ref) {
    auto it = got.find(id);
    if (it == got.end() || it->second.size() != want.size())
      return fmt::format("tensor '{}' missing", g.tensor(id).name);
    double scale = 1e-30, err = 0;
    for (float v : want)
      if (std::isfinite(v)) scale = std::max(scale, static_cast<double>(std::abs(v)));
    for (size_t j = 0; j < want.size(); ++j) {
      const double a = it->second[j], w = want[j];
      if (std::isnan(a) != std::isnan(w))
        return fmt::format("'{}' has NaN where the rules' has not", g.tensor(id).name);
      if (std::isfinite(a) && std::isfinite(w)) err = std::max(err, std::abs(a - w));
    }
    const double tol = g.tensor(id).desc.dtype == DType::F32 ? 1e-3 : 2e-2;
    if (err / scale > tol)
      return fmt::format("'{}' max rel diff {:.3g} > {}", g.tensor(id).name, err / scale, tol);
  }
  return "";
}

}  // namespace

std::vector<AutotuneResult> autotune_contractions(const Graph& g, const Plan& plan,
                                                  const std::vector<TuningSite>& sites,
                                                  KernelCache& cache, const std::string& arch,
                                                  const std::string& device, TuningTable& table,
                                                  int iters) {
  std::vector<AutotuneResult> out;
  bool changed = false;
  for (const TuningSite& site : sites) {
    AutotuneResult r;
    r.group = site.group;
    r.key = site.key;
    r.rule = site.configs.front().str();
    if (std::optional<TuningEntry> have = table.find_for(site.key, device)) {
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
    // Every candidate computes what the rules' config (the first) computes, on the same data, or
    // it is not used: a faster kernel with a wrong result must never win.
    std::vector<int> outs;
    for (const FusionGroup& grp : plan.groups)
      if (grp.id == site.group) outs = grp.outputs;
    std::map<int, std::vector<float>> ref;
    size_t best = n;
    std::vector<double> ms(n, -1);
    for (size_t i = 0; i < n; ++i) {
      if (errors[i].empty()) {
        try {
          std::map<int, std::vector<float>> got;
          ms[i] =
              cuda::time_kernel_alone(site.kernels[i], *cubins[i].cubin, g, b, iters, outs, &got);
          if (i == 0) {
            ref = std::move(got);
          } else if (!ref.empty()) {
            std::string why = output_mismatch(g, got, ref);
            if (!why.empty()) {
              errors[i] = "its output differs from the rules' config: " + why;
              fmt::print(stderr, "kiln: autotune: {} not used ({}): {}\n", site.kernels[i].name,
                         errors[i], "a kiln bug; please report it");
            }
          }
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      }
      if (!errors[i].empty()) {
        r.skipped.push_back(fmt::format("{}: {}", site.configs[i].str(), errors[i]));
        continue;
      }
      ++r.candidates;
      if (env().dump_tune)
        fmt::print(stderr, "kiln: autotune {}: {} {:.4f} ms{}\n", site.key, site.configs[i].str(),
                   ms[i], i == 0 ? " (rules)" : "");
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
    table.put(device_tuning_key(site.key, device), e);
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
