// The on-disk kernel cache the Engine compiles through (`kiln cache`): one file per compiled
// kernel, keyed by its source, NVRTC options, arch and the kiln and NVRTC versions. Entries are
// written atomically and checked when read, so a cache directory may be shared by processes.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

// `dir`, or when empty the default: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
// $HOME/.cache/kiln (else <tmp>/kiln-cache). EngineOptions::cache_dir resolves the same way.
std::string kernel_cache_dir(const std::string& dir = {});

struct KernelCacheInfo {
  std::string dir;
  int64_t entries = 0;  // cached kernels on disk
  int64_t bytes = 0;    // their size
};
// What is on disk in the cache `dir` now (kernel_cache_dir(dir)); a missing directory is empty.
KernelCacheInfo kernel_cache_info(const std::string& dir = {});

// Deletes every entry (and every temporary file a writer left) of the cache `dir`; returns how
// many entries were removed.
int64_t clear_kernel_cache(const std::string& dir = {});

}  // namespace kiln
