#include "codegen/kernel_cache.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include "codegen/nvrtc.hpp"
#include "engine/base/check.hpp"
#include "engine/base/env.hpp"
#include "engine/base/file_io.hpp"
#include "engine/base/hash.hpp"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

namespace fs = std::filesystem;

namespace kiln {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'B', 'I', 'N'};
constexpr uint32_t kFormatVersion = 1;
constexpr const char* kSuffix = ".cubin";

void put_u32(std::vector<char>* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::vector<char>* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// An entry is a cubin and a small header: anything much larger is not one of kiln's (a sparse
// file planted there would otherwise be read into memory on every run).
constexpr uint64_t kMaxEntryBytes = uint64_t{256} << 20;

// Warnings about an unusable cache directory: once per directory and process.
void warn_once(const std::string& dir, const std::string& what) {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(dir).second)
    fmt::print(stderr, "kiln: warning: kernel cache {}: {}\n", dir, what);
}

// Removes whatever is at `p` (a file, a link, a directory planted in place of an entry).
void remove_entry(const fs::path& p) {
  std::error_code ec;
  if (!fs::remove(p, ec) || ec) fs::remove_all(p, ec);
}

}  // namespace

const char* cache_source_name(CacheSource s) {
  switch (s) {
    case CacheSource::Nvrtc:
      return "nvrtc";
    case CacheSource::Memory:
      return "memory";
    case CacheSource::Disk:
      return "disk";
  }
  return "?";
}

std::string default_cache_dir() {
  return kiln_cache_dir();
}

std::vector<char> encode_cache_entry(const std::string& key, const std::vector<char>& payload) {
  std::vector<char> out(kMagic, kMagic + 8);
  put_u32(&out, kFormatVersion);
  put_u32(&out, static_cast<uint32_t>(key.size()));
  out.insert(out.end(), key.begin(), key.end());
  put_u64(&out, payload.size());
  put_u64(&out, hash64(payload.data(), payload.size()));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

bool decode_cache_entry(const std::vector<char>& b, const std::string& key,
                        std::vector<char>* payload, std::string* why) {
  auto no = [&](std::string w) {
    if (why) *why = std::move(w);
    return false;
  };
  if (b.size() < 16 || std::memcmp(b.data(), kMagic, 8) != 0) return no("bad magic");
  uint32_t ver = static_cast<uint32_t>(get_le(b.data() + 8, 4));
  if (ver != kFormatVersion)
    return no(fmt::format("format version {}, expected {}", ver, kFormatVersion));
  uint64_t klen = get_le(b.data() + 12, 4);
  size_t pos = 16;
  if (klen > 1024 || b.size() < pos + klen + 16) return no("truncated header");
  if (std::string(b.data() + pos, klen) != key) return no("key mismatch");
  pos += klen;
  uint64_t size = get_le(b.data() + pos, 8);
  uint64_t sum = get_le(b.data() + pos + 8, 8);
  pos += 16;
  if (b.size() - pos != size)
    return no(fmt::format("payload is {} bytes, header says {}", b.size() - pos, size));
  if (hash64(b.data() + pos, size) != sum) return no("payload checksum mismatch");
  if (size == 0) return no("empty payload");
  payload->assign(b.begin() + static_cast<std::ptrdiff_t>(pos), b.end());
  return true;
}

KernelCache::KernelCache(Options opts)
    : dir_(opts.dir.empty() ? default_cache_dir() : opts.dir),
      disk_(opts.disk),
      require_disk_(opts.require_disk) {
  stats_.dir = dir_;
  if (disk_ && require_disk_) disk_ready();  // a cache that must be written fails up front
}

bool KernelCache::disk_ready() {
  std::lock_guard<std::mutex> lock(disk_mu_);
  if (!disk_checked_) {
    // The per-user default under /tmp must be a real directory: a link planted in its place
    // would send the entries elsewhere.
    bool follow = !(dir_ == kiln_cache_dir() && kiln_cache_dir_is_shared_fallback());
    disk_ok_ = prepare_private_dir(dir_, &disk_why_, follow);
    disk_checked_ = true;
    if (!disk_ok_ && !require_disk_)
      warn_once(dir_, disk_why_ + ": compiling without the disk cache");
  }
  KILN_CHECK(disk_ok_ || !require_disk_, "kernel cache {}: {}", dir_, disk_why_);
  return disk_ok_;
}

KernelCache::~KernelCache() = default;

std::string KernelCache::key_for(const std::string& source, const std::string& arch,
                                 const std::vector<std::string>& extra_opts) {
  Hasher h;
  h.field("kiln-kernel-v1").field(source).field(arch);
  std::vector<std::string> opts = nvrtc_options(arch, extra_opts);
  h.u64(opts.size());
  for (const std::string& o : opts) h.field(o);
  h.field(nvrtc_version()).field(KILN_VERSION);
  return h.hex();
}

std::string KernelCache::entry_path(const std::string& key) const {
  return (fs::path(dir_) / (key + kSuffix)).string();
}

bool KernelCache::read_disk(const std::string& key, std::vector<char>* cubin) {
  fs::path p = entry_path(key);
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return false;  // no entry
  std::string why;
  std::vector<char> bytes;
  ReadOnlyFile f;
  // Only a regular file of plausible size is read (never through a link, never a FIFO); a
  // directory or a sparse giant in its place is removed like a corrupt entry.
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) <= kMaxEntryBytes &&
      f.open(p.string(), &why, /*follow_links=*/false) && f.size() <= kMaxEntryBytes) {
    bytes.resize(static_cast<size_t>(f.size()));
    if (f.read_at(0, bytes.data(), bytes.size()) && decode_cache_entry(bytes, key, cubin, &why))
      return true;
  }
  // Never load a bad entry: delete it so that the rebuilt one replaces it.
  remove_entry(p);
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.disk_rejected;
  return false;
}

void KernelCache::write_disk(const std::string& key, const std::vector<char>& cubin) {
  std::vector<char> bytes = encode_cache_entry(key, cubin);
  std::string why;
  if (write_file_atomic(entry_path(key), std::string_view(bytes.data(), bytes.size()), &why))
    return;
  // A cache that cannot be written is only slower, never wrong; `cache warm` exists to write it.
  KILN_CHECK(!require_disk_, "kernel cache {}: {}", dir_, why);
  warn_once(dir_, why + ": compiled kernels are not kept on disk");
}

KernelCache::InFlight& KernelCache::in_flight() {
  static InFlight* f = new InFlight;  // never destroyed: engines may outlive static teardown
  return *f;
}

CachedKernel KernelCache::get(const std::string& source, const std::string& name,
                              const std::string& arch, const std::vector<std::string>& extra_opts) {
  const std::string key = key_for(source, arch, extra_opts);
  CachedKernel out;
  out.key = key;
  std::promise<Entry> promise;
  // A memory hit (under mu_): this cache's entry, or one another cache compiled meanwhile.
  auto hit = [&](const Entry& e) {
    ++stats_.memory_hits;
    out.cubin = e.cubin;
    out.source = CacheSource::Memory;
    return out;
  };
  {
    // In-flight map first, then this cache: a compile puts its entry in before it leaves the map,
    // so a key in neither is compiled by nobody.
    InFlight& f = in_flight();
    std::unique_lock<std::mutex> flock(f.mu);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = mem_.find(key);
      if (it != mem_.end()) return hit(it->second);
    }
    auto fl = f.by_key.find(key);
    if (fl != f.by_key.end()) {
      std::shared_future<Entry> fut = fl->second;
      flock.unlock();
      Entry e = fut.get();  // rethrows the compile error
      std::lock_guard<std::mutex> lock(mu_);
      mem_[key] = e;
      return hit(e);
    }
    f.by_key.emplace(key, promise.get_future().share());
  }
  try {
    Entry e;
    std::vector<char> cubin;
    const bool disk = disk_ && !env().disable_disk_cache && disk_ready();
    bool from_disk = disk && read_disk(key, &cubin);
    if (from_disk) {
      out.source = CacheSource::Disk;
    } else {
      NvrtcResult r = nvrtc_compile(source, name, arch, extra_opts);
      cubin = std::move(r.cubin);
      out.source = CacheSource::Nvrtc;
      out.compile_ms = r.ms;
      out.log = std::move(r.log);
      if (disk) write_disk(key, cubin);
    }
    e.cubin = std::make_shared<const std::vector<char>>(std::move(cubin));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (from_disk) {
        ++stats_.disk_hits;
      } else {
        ++stats_.nvrtc_compiles;
        stats_.nvrtc_ms += out.compile_ms;
      }
      mem_[key] = e;
    }
    {
      std::lock_guard<std::mutex> flock(in_flight().mu);
      in_flight().by_key.erase(key);
    }
    promise.set_value(e);
    out.cubin = e.cubin;
    return out;
  } catch (...) {
    {
      std::lock_guard<std::mutex> flock(in_flight().mu);
      in_flight().by_key.erase(key);
    }
    promise.set_exception(std::current_exception());
    throw;
  }
}

KernelCacheStats KernelCache::stats() const {
  KernelCacheStats s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = stats_;
  }
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != kSuffix || !it->is_regular_file(ec)) continue;
    ++s.disk_entries;
    s.disk_bytes += static_cast<int64_t>(it->file_size(ec));
  }
  return s;
}

int64_t KernelCache::clear() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    mem_.clear();
  }
  int64_t removed = 0;
  std::error_code ec;
  std::vector<fs::path> victims;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::string fname = it->path().filename().string();
    bool entry = it->path().extension() == kSuffix;
    bool temp = fname.size() > 1 && fname[0] == '.' && fname.find(".tmp.") != std::string::npos;
    if (entry || temp) victims.push_back(it->path());
  }
  for (const fs::path& p : victims)
    if (fs::remove(p, ec) && p.extension() == kSuffix) ++removed;
  return removed;
}

std::vector<CachedKernel> compile_kernels(KernelCache& cache, const std::vector<KernelSpec>& specs,
                                          const std::string& arch, size_t threads,
                                          std::vector<std::exception_ptr>* errors) {
  std::vector<CachedKernel> out(specs.size());
  errors->assign(specs.size(), nullptr);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next.fetch_add(1); i < specs.size(); i = next.fetch_add(1)) {
      try {
        out[i] =
            cache.get(specs[i].source, specs[i].name, specs[i].arch.empty() ? arch : specs[i].arch);
      } catch (...) {
        (*errors)[i] = std::current_exception();
      }
    }
  };
  threads = std::min(threads, specs.size());
  if (threads <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
    for (std::thread& t : pool) t.join();
  }
  return out;
}

}  // namespace kiln
