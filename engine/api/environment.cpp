// check_environment (kiln/environment.hpp): the env registry and the schedule keys in one call.
#include "kiln/environment.hpp"

#include "engine/base/env.hpp"
#include "heuristics/schedule.hpp"

namespace kiln {

Environment check_environment() {
  const EnvConfig& e = env();
  env_schedule_overrides();  // KILN_SCHEDULE's keys belong to the heuristics
  Environment out;
  out.fusion_disabled = e.disable_fusion;
  out.autotune_disabled = e.disable_autotune;
  out.disk_cache_disabled = e.disable_disk_cache;
  out.cache_dir = e.cache_dir;
  out.schedule = e.schedule;
  out.nvtx = e.nvtx;
  out.dump_partition = e.dump_partition;
  return out;
}

}  // namespace kiln
