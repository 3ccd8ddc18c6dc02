// kiln's environment variables, read once per process: KILN_DUMP (plan, cuda, ptx, launch, tune,
// partition), KILN_DISABLE (fusion, autotune, disk_cache), KILN_CACHE_DIR, KILN_NVTX and
// KILN_SCHEDULE (see README.md). The Engine and lowering apply them; an application may check them
// up front.
#pragma once

#include <string>

namespace kiln {

struct Environment {
  bool fusion_disabled = false;      // KILN_DISABLE=fusion
  bool autotune_disabled = false;    // KILN_DISABLE=autotune
  bool disk_cache_disabled = false;  // KILN_DISABLE=disk_cache
  std::string cache_dir;             // KILN_CACHE_DIR ("" when unset)
  std::string schedule;              // KILN_SCHEDULE as given ("" when unset)
  bool nvtx = false;                 // KILN_NVTX=1
  bool dump_partition = false;       // KILN_DUMP=partition (the torch.compile backend's report)
};

// Checks every KILN_* variable of the process: an unknown name or list item, or a bad
// KILN_SCHEDULE item, is a kiln::Error(User) naming it and listing the valid ones (what the first
// Engine or lowering would throw later). Returns what they set.
Environment check_environment();

}  // namespace kiln
