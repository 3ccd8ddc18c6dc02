// The one registry of kiln's environment variables. Every KILN_* variable is read here and nowhere
// else; an unknown KILN_* name or an unknown list item is a user error listing the valid names.
//
//   KILN_DUMP       comma list of: plan, cuda, ptx, launch
//   KILN_DISABLE    comma list of: fusion, autotune, disk_cache
//   KILN_CACHE_DIR  path of the kernel cache (and of dumped sources)
//   KILN_NVTX       1: NVTX ranges named after each fused kernel around its launch (0/empty: off)
//   KILN_SCHEDULE   hand overrides of the memory-bound schedule rules ("pointwise.vecs=2,...",
//                   heuristics/schedule.hpp lists the keys), for measuring alternatives
#pragma once

#include <map>
#include <string>

namespace kiln {

struct EnvConfig {
  // KILN_DUMP
  bool dump_plan = false;    // print the fusion plan
  bool dump_cuda = false;    // write every compiled CUDA source to dump_dir()
  bool dump_ptx = false;     // write the PTX of every compiled kernel too
  bool dump_launch = false;  // print every kernel launch (name, grid, block, bound dims)
  bool dump_tune = false;    // every autotune candidate's measured time, on stderr
  // KILN_DISABLE
  bool disable_fusion = false;
  bool disable_autotune = false;
  bool disable_disk_cache = false;
  // KILN_CACHE_DIR (empty when unset)
  std::string cache_dir;
  // KILN_NVTX=1
  bool nvtx = false;
  // KILN_SCHEDULE as given (empty when unset); heuristics/schedule.hpp parses it
  // (env_schedule_overrides), since that layer owns the keys.
  std::string schedule;
};

// Parses a set of environment variables (name -> value). Variables not starting with "KILN_" are
// ignored. Throws kiln::Error(User) for an unknown KILN_ name or list item.
EnvConfig parse_env(const std::map<std::string, std::string>& vars);

// The process environment, parsed once (thread-safe). A parse error is thrown on every call.
const EnvConfig& env();

// Tests only: replaces what env() returns until called again with nullptr (not thread-safe
// against concurrent env() readers).
void set_env_override(const EnvConfig* cfg);

// The directory for dumped sources (KILN_DUMP=cuda/ptx and failed compiles): $KILN_CACHE_DIR when
// set, else the system temp directory.
std::string dump_dir();

// The valid variable names and list items, for messages and docs.
const char*
env_variable_names();  // "KILN_DUMP, KILN_DISABLE, KILN_CACHE_DIR, KILN_NVTX, KILN_SCHEDULE"

}  // namespace kiln
