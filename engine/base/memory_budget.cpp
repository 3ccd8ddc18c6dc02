#include "engine/base/memory_budget.hpp"

#include <unistd.h>

#include "engine/base/check.hpp"
#include "engine/base/env.hpp"

namespace kiln {

namespace {

uint64_t physical_memory() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return uint64_t{16} << 30;  // unknown: a modest machine
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

std::string gib(uint64_t bytes) {
  double v = static_cast<double>(bytes);
  if (bytes >= (uint64_t{1} << 30)) return fmt::format("{:.3g} GiB", v / (1 << 30));
  if (bytes >= (uint64_t{1} << 20)) return fmt::format("{:.3g} MiB", v / (1 << 20));
  if (bytes >= (uint64_t{1} << 10)) return fmt::format("{:.3g} KiB", v / (1 << 10));
  return fmt::format("{} B", bytes);
}

}  // namespace

uint64_t host_memory_budget() {
  const EnvConfig& e = env();
  if (e.memory_budget > 0) return e.memory_budget;
  double f = e.memory_budget_fraction > 0 ? e.memory_budget_fraction : 0.5;
  return static_cast<uint64_t>(static_cast<double>(physical_memory()) * f);
}

std::string host_memory_budget_source() {
  const EnvConfig& e = env();
  if (e.memory_budget > 0) return "set by KILN_MEMORY_BUDGET";
  double f = e.memory_budget_fraction > 0 ? e.memory_budget_fraction : 0.5;
  return fmt::format(
      "{:g} % of {} of physical memory; {}", f * 100, gib(physical_memory()),
      e.memory_budget_fraction > 0 ? "set by KILN_MEMORY_BUDGET" : "KILN_MEMORY_BUDGET changes it");
}

std::string bytes_text(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} bytes", bytes);
  return fmt::format("{} ({} bytes)", gib(bytes), bytes);
}

void check_host_bytes(const std::string& what, uint64_t bytes) {
  uint64_t budget = host_memory_budget();
  KILN_CHECK(bytes <= budget, "{}: {} of host memory is over the budget of {} ({})", what,
             bytes_text(bytes), gib(budget), host_memory_budget_source());
}

}  // namespace kiln
