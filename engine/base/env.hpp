// The one registry of kiln's environment variables. Every KILN_* variable is read here and nowhere
// else. An unknown list item in a known variable is a user error listing the valid items; an
// unknown KILN_* name is ignored with one warning (naming the valid ones) per process, since
// another tool may own it.
//
//   KILN_DUMP           comma list of: plan, cuda, ptx, launch, tune, partition
//   KILN_DISABLE        comma list of: fusion, autotune, disk_cache
//   KILN_CACHE_DIR      path of the kernel cache (and of dumped sources)
//   KILN_MEMORY_BUDGET  host memory for tensors that files and flags size: bytes with an optional
//                       K/M/G/T suffix (powers of 1024), or a percentage of physical memory
//                       ("75%"); default 50 %
//   KILN_NVTX           1: NVTX ranges named after each fused kernel around its launch
//                       (0/empty: off)
//   KILN_SCHEDULE       hand overrides of the memory-bound schedule rules
//                       ("pointwise.vecs=2,...", heuristics/schedule.hpp lists the keys), for
//                       measuring alternatives
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln {

struct EnvConfig {
  // KILN_DUMP
  bool dump_plan = false;    // print the fusion plan
  bool dump_cuda = false;    // write every compiled CUDA source to dump_dir()
  bool dump_ptx = false;     // write the PTX of every compiled kernel too
  bool dump_launch = false;  // print every kernel launch (name, grid, block, bound dims)
  bool dump_tune = false;    // every autotune candidate's measured time, on stderr
  // the torch.compile backend's partition report (which FX nodes run in kiln, which in eager
  // PyTorch and why), on stderr; read by the Python package through check_environment()
  bool dump_partition = false;
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
  // KILN_MEMORY_BUDGET: bytes (0 when unset), or a fraction of physical memory (0 when unset).
  uint64_t memory_budget = 0;
  double memory_budget_fraction = 0;
  // KILN_* names that are not kiln's: ignored (env() warns about them once).
  std::vector<std::string> unknown;
};

// Parses a set of environment variables (name -> value). Variables not starting with "KILN_" are
// ignored; unknown KILN_ names are listed in `unknown`. Throws kiln::Error(User) for an unknown
// list item or a malformed value.
EnvConfig parse_env(const std::map<std::string, std::string>& vars);

// The process environment, parsed once (thread-safe). A parse error is thrown on every call. The
// first successful parse warns on stderr about unknown KILN_* names.
const EnvConfig& env();

// Tests only: replaces what env() returns until called again with nullptr (not thread-safe
// against concurrent env() readers).
void set_env_override(const EnvConfig* cfg);

// The directory of kiln's files (kernel cache, tuning file, dumps): $KILN_CACHE_DIR, else
// $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln, else /tmp/kiln-<uid> (a per-user directory that
// must be a real directory owned by this user: file_io's prepare_private_dir checks it).
std::string kiln_cache_dir();
// True when kiln_cache_dir() is the per-user fallback in the shared temp directory, where the
// directory itself must not be a symbolic link.
bool kiln_cache_dir_is_shared_fallback();

// The directory for dumped sources (KILN_DUMP=cuda/ptx and failed compiles): kiln_cache_dir().
std::string dump_dir();

// The valid variable names, for messages and docs: "KILN_DUMP, KILN_DISABLE, ...".
const char* env_variable_names();

// Parses a KILN_MEMORY_BUDGET value ("8G", "512M", "1073741824", "75%") into bytes or a fraction;
// a user error naming the variable otherwise.
void parse_memory_budget(const std::string& value, uint64_t* bytes, double* fraction);

}  // namespace kiln
