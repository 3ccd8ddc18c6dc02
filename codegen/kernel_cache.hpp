// The kernel cache: CUDA source -> cubin, in memory and on disk.
//
// Key: a 128-bit hash of (source, NVRTC options, arch, nvrtc_version(), KILN_VERSION). Disk entries
// are `<dir>/<key>.cubin` with a header (magic, format version, full key, payload size, payload
// checksum); they are written atomically (an unpredictable temp file created O_EXCL|O_NOFOLLOW in
// the same directory + rename) into a directory kiln owns (engine/base/file_io.hpp), and an entry
// that fails any check (not a regular file, implausibly large, corrupt) is deleted and rebuilt,
// never loaded. An unusable directory is a warning (memory-only cache), or an error under
// require_disk. Concurrent requests for one key
// compile once. Loaded modules are kept by the runtime (runtime/executor.hpp), not here.
#pragma once

#include <cstdint>
#include <exception>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"

namespace kiln {

enum class CacheSource { Nvrtc, Memory, Disk };
const char* cache_source_name(CacheSource s);  // "nvrtc", "memory", "disk"

struct CachedKernel {
  std::string key;  // 32 hex digits
  std::shared_ptr<const std::vector<char>> cubin;
  CacheSource source = CacheSource::Nvrtc;
  double compile_ms = 0;  // NVRTC wall time, 0 unless source == Nvrtc
  std::string log;        // NVRTC log (warnings), only when compiled now
};

struct KernelCacheStats {
  int64_t nvrtc_compiles = 0;
  int64_t memory_hits = 0;
  int64_t disk_hits = 0;
  int64_t disk_rejected = 0;  // corrupt/truncated/foreign entries deleted and rebuilt
  double nvrtc_ms = 0;
  // What is on disk now (scanned by stats()).
  std::string dir;
  int64_t disk_entries = 0;
  int64_t disk_bytes = 0;
};

// $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln, else /tmp/kiln-<uid>
// (engine/base/env.hpp kiln_cache_dir).
std::string default_cache_dir();

struct KernelCacheOptions {
  std::string dir;   // empty: default_cache_dir()
  bool disk = true;  // false: memory only
  // true: a directory that cannot be used or an entry that cannot be written is a user error
  // (`kiln cache warm`), not a warning.
  bool require_disk = false;
};

class KernelCache {
 public:
  using Options = KernelCacheOptions;
  explicit KernelCache(Options opts = {});
  ~KernelCache();
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // The cubin for `source` compiled for `arch`: from memory, disk, or NVRTC (in that order).
  // NVRTC failures propagate (kiln::Error Driver) to every waiter.
  CachedKernel get(const std::string& source, const std::string& name, const std::string& arch,
                   const std::vector<std::string>& extra_opts = {});

  // The key get() would use.
  static std::string key_for(const std::string& source, const std::string& arch,
                             const std::vector<std::string>& extra_opts = {});
  // Path of the disk entry for a key.
  std::string entry_path(const std::string& key) const;

  KernelCacheStats stats() const;
  // Drops the memory cache and deletes every disk entry; returns how many files were removed.
  int64_t clear();
  const std::string& dir() const { return dir_; }
  bool disk_enabled() const { return disk_; }

 private:
  struct Entry {
    std::shared_ptr<const std::vector<char>> cubin;
  };
  bool read_disk(const std::string& key, std::vector<char>* cubin);
  void write_disk(const std::string& key, const std::vector<char>& cubin);
  // Creates and checks the directory once; false (after one warning) when it cannot be used.
  bool disk_ready();

  std::string dir_;
  bool disk_ = true;
  bool require_disk_ = false;
  std::mutex disk_mu_;
  bool disk_checked_ = false, disk_ok_ = false;
  std::string disk_why_;  // why the directory cannot be used
  mutable std::mutex mu_;
  std::map<std::string, Entry> mem_;
  // Compiles and disk reads in flight in this process, by key, across every KernelCache: engines
  // on several devices (one cache each) compiling the same graph at once compile each kernel
  // once, the later askers waiting for the first's cubin.
  struct InFlight {
    std::mutex mu;
    std::map<std::string, std::shared_future<Entry>> by_key;
  };
  static InFlight& in_flight();
  KernelCacheStats stats_;
};

// The on-disk entry format, exposed for tests and `kiln cache`.
std::vector<char> encode_cache_entry(const std::string& key, const std::vector<char>& payload);
// False (with the reason) when the bytes are not a valid entry for `key`.
bool decode_cache_entry(const std::vector<char>& bytes, const std::string& key,
                        std::vector<char>* payload, std::string* why);

// Compiles every spec through `cache` on up to `threads` threads (NVRTC runs in parallel; the
// cache compiles each distinct source once), each for its own arch (KernelSpec::arch) or `arch`.
// errors[i] holds kernel i's failure (null when it compiled).
std::vector<CachedKernel> compile_kernels(KernelCache& cache, const std::vector<KernelSpec>& specs,
                                          const std::string& arch, size_t threads,
                                          std::vector<std::exception_ptr>* errors);

}  // namespace kiln
