// The public kernel-cache calls (kiln/kernel_cache.hpp) over codegen's KernelCache.
#include "kiln/kernel_cache.hpp"

#include "codegen/kernel_cache.hpp"

namespace kiln {

std::string kernel_cache_dir(const std::string& dir) {
  return dir.empty() ? default_cache_dir() : dir;
}

KernelCacheInfo kernel_cache_info(const std::string& dir) {
  KernelCacheStats s = KernelCache(KernelCacheOptions{dir, true}).stats();
  return KernelCacheInfo{s.dir, s.disk_entries, s.disk_bytes};
}

int64_t clear_kernel_cache(const std::string& dir) {
  return KernelCache(KernelCacheOptions{dir, true}).clear();
}

}  // namespace kiln
