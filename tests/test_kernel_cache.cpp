// The kernel cache: memory and disk hits, rejection of corrupt entries, concurrency, clear().
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "codegen/kernel_cache.hpp"
#include "engine/base/env.hpp"
#include "engine/base/hash.hpp"
#include "kiln/error.hpp"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

std::string kernel_source(int variant) {
  return "extern \"C\" __global__ void k(float* y, const float* x, long long n) {\n"
         "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i < n) y[i] = x[i] * 2.0f + " +
         std::to_string(variant) + ".0f;\n}\n";
}

bool is_elf(const std::vector<char>& b) {
  return b.size() > 64 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
}

class KernelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln-test-cache-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
            std::to_string(getpid()));
    fs::remove_all(dir_);
    EnvConfig c;  // keep the user's KILN_DISABLE etc. out of the test
    c.cache_dir = dir_.string();
    set_env_override(&c);
  }
  void TearDown() override {
    set_env_override(nullptr);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  KernelCacheOptions opts() const { return {dir_.string(), true}; }
  fs::path dir_;
};

}  // namespace

TEST(Hash, StableDistinctAndFieldSeparated) {
  EXPECT_EQ(hash_hex("abc"), hash_hex("abc"));
  EXPECT_EQ(hash_hex("abc").size(), 32u);
  EXPECT_NE(hash_hex("abc"), hash_hex("abd"));
  EXPECT_NE(Hasher().field("ab").field("c").hex(), Hasher().field("a").field("bc").hex());
  // The two halves are independent streams: flipping one input bit changes both.
  std::string a = hash_hex("kernel source 1"), b = hash_hex("kernel source 0");
  EXPECT_NE(a.substr(0, 16), b.substr(0, 16));
  EXPECT_NE(a.substr(16), b.substr(16));
}

TEST_F(KernelCacheTest, KeyDependsOnSourceArchAndOptions) {
  std::string s = kernel_source(1);
  EXPECT_EQ(KernelCache::key_for(s, "sm_90"), KernelCache::key_for(s, "sm_90"));
  EXPECT_NE(KernelCache::key_for(s, "sm_90"), KernelCache::key_for(s, "sm_80"));
  EXPECT_NE(KernelCache::key_for(s, "sm_90"), KernelCache::key_for(s, "sm_90a"));
  EXPECT_NE(KernelCache::key_for(s, "sm_90"), KernelCache::key_for(kernel_source(2), "sm_90"));
  EXPECT_NE(KernelCache::key_for(s, "sm_90"), KernelCache::key_for(s, "sm_90", {"-lineinfo"}));
}

TEST_F(KernelCacheTest, MemoryHitThenDiskHitInFreshCache) {
  std::string key;
  {
    KernelCache c(opts());
    CachedKernel a = c.get(kernel_source(1), "k", "sm_90");
    EXPECT_EQ(a.source, CacheSource::Nvrtc);
    EXPECT_GT(a.compile_ms, 0);
    EXPECT_TRUE(is_elf(*a.cubin));
    CachedKernel b = c.get(kernel_source(1), "k", "sm_90");
    EXPECT_EQ(b.source, CacheSource::Memory);
    EXPECT_EQ(b.cubin, a.cubin);
    KernelCacheStats s = c.stats();
    EXPECT_EQ(s.nvrtc_compiles, 1);
    EXPECT_EQ(s.memory_hits, 1);
    EXPECT_EQ(s.disk_hits, 0);
    EXPECT_EQ(s.disk_entries, 1);
    EXPECT_GT(s.disk_bytes, static_cast<int64_t>(a.cubin->size()));
    key = a.key;
    EXPECT_TRUE(fs::exists(c.entry_path(key)));
  }
  KernelCache fresh(opts());
  CachedKernel d = fresh.get(kernel_source(1), "k", "sm_90");
  EXPECT_EQ(d.source, CacheSource::Disk);
  EXPECT_EQ(d.key, key);
  EXPECT_TRUE(is_elf(*d.cubin));
  KernelCacheStats s = fresh.stats();
  EXPECT_EQ(s.nvrtc_compiles, 0);
  EXPECT_EQ(s.disk_hits, 1);
  EXPECT_EQ(s.disk_rejected, 0);
  // Another arch is another entry.
  EXPECT_EQ(fresh.get(kernel_source(1), "k", "sm_80").source, CacheSource::Nvrtc);
  EXPECT_EQ(fresh.stats().disk_entries, 2);
}

TEST_F(KernelCacheTest, TruncatedEntryIsRejectedDeletedAndRebuilt) {
  std::vector<char> good;
  std::string path;
  {
    KernelCache c(opts());
    good = *c.get(kernel_source(3), "k", "sm_90").cubin;
    path = c.entry_path(KernelCache::key_for(kernel_source(3), "sm_90"));
  }
  fs::resize_file(path, fs::file_size(path) / 2);
  {
    KernelCache c(opts());
    CachedKernel k = c.get(kernel_source(3), "k", "sm_90");
    EXPECT_EQ(k.source, CacheSource::Nvrtc);
    EXPECT_EQ(*k.cubin, good);
    KernelCacheStats s = c.stats();
    EXPECT_EQ(s.disk_rejected, 1);
    EXPECT_EQ(s.disk_hits, 0);
    EXPECT_EQ(s.nvrtc_compiles, 1);
  }
  KernelCache c(opts());  // the rebuilt entry is good again
  EXPECT_EQ(c.get(kernel_source(3), "k", "sm_90").source, CacheSource::Disk);
  EXPECT_EQ(c.stats().disk_rejected, 0);
}

TEST_F(KernelCacheTest, GarbageAndBitFlippedEntriesAreRejected) {
  std::string path;
  {
    KernelCache c(opts());
    c.get(kernel_source(4), "k", "sm_90");
    path = c.entry_path(KernelCache::key_for(kernel_source(4), "sm_90"));
  }
  size_t size = fs::file_size(path);
  {  // garbage of the same length
    std::mt19937 rng(7);
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    for (size_t i = 0; i < size; ++i) f.put(static_cast<char>(rng()));
  }
  {
    KernelCache c(opts());
    EXPECT_EQ(c.get(kernel_source(4), "k", "sm_90").source, CacheSource::Nvrtc);
    EXPECT_EQ(c.stats().disk_rejected, 1);
    EXPECT_EQ(c.stats().nvrtc_compiles, 1);
  }
  {  // one flipped payload byte: the header is fine, the checksum is not
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(size - 100));
    char ch = 0;
    f.seekg(static_cast<std::streamoff>(size - 100));
    f.get(ch);
    f.seekp(static_cast<std::streamoff>(size - 100));
    f.put(static_cast<char>(ch ^ 0x10));
  }
  {
    KernelCache c(opts());
    EXPECT_EQ(c.get(kernel_source(4), "k", "sm_90").source, CacheSource::Nvrtc);
    EXPECT_EQ(c.stats().disk_rejected, 1);
  }
  KernelCache c(opts());
  EXPECT_EQ(c.get(kernel_source(4), "k", "sm_90").source, CacheSource::Disk);
}

TEST(KernelCacheFormat, DecodeChecksEverything) {
  std::vector<char> payload(1000);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7);
  std::string key(32, 'a');
  std::vector<char> e = encode_cache_entry(key, payload);
  std::vector<char> out;
  std::string why;
  ASSERT_TRUE(decode_cache_entry(e, key, &out, &why)) << why;
  EXPECT_EQ(out, payload);
  EXPECT_FALSE(decode_cache_entry(e, std::string(32, 'b'), &out, &why));
  EXPECT_EQ(why, "key mismatch");
  std::vector<char> t(e.begin(), e.end() - 1);
  EXPECT_FALSE(decode_cache_entry(t, key, &out, &why));
  std::vector<char> longer = e;
  longer.push_back(0);
  EXPECT_FALSE(decode_cache_entry(longer, key, &out, &why));
  std::vector<char> v = e;
  v[8] = 2;  // format version
  EXPECT_FALSE(decode_cache_entry(v, key, &out, &why));
  EXPECT_FALSE(decode_cache_entry({}, key, &out, &why));
  EXPECT_FALSE(decode_cache_entry(std::vector<char>(e.begin(), e.begin() + 20), key, &out, &why));
}

TEST_F(KernelCacheTest, ConcurrentGetsCompileOnce) {
  KernelCache c(opts());
  constexpr int kThreads = 8;
  std::atomic<int> ready{0};
  std::vector<std::shared_ptr<const std::vector<char>>> got(kThreads);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      got[t] = c.get(kernel_source(5), "k", "sm_90").cubin;
    });
  }
  for (auto& t : ts) t.join();
  KernelCacheStats s = c.stats();
  EXPECT_EQ(s.nvrtc_compiles, 1);
  EXPECT_EQ(s.memory_hits, kThreads - 1);
  EXPECT_EQ(s.disk_hits, 0);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(got[t], got[0]) << t;
  EXPECT_TRUE(is_elf(*got[0]));
}

// Engines on several devices have a cache each: asked for one kernel at once (disk cache off, so
// no entry can be shared that way), the caches compile it once between them.
TEST_F(KernelCacheTest, ConcurrentGetsCompileOnceAcrossCaches) {
  constexpr int kCaches = 4;
  std::vector<std::unique_ptr<KernelCache>> caches;
  for (int i = 0; i < kCaches; ++i)
    caches.push_back(std::make_unique<KernelCache>(KernelCacheOptions{dir_.string(), false}));
  std::atomic<int> ready{0};
  std::vector<std::shared_ptr<const std::vector<char>>> got(kCaches);
  std::vector<std::thread> ts;
  for (int t = 0; t < kCaches; ++t) {
    ts.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kCaches) std::this_thread::yield();
      got[t] = caches[t]->get(kernel_source(6), "k", "sm_90").cubin;
    });
  }
  for (auto& t : ts) t.join();
  int64_t compiles = 0, hits = 0;
  for (auto& c : caches) {
    compiles += c->stats().nvrtc_compiles;
    hits += c->stats().memory_hits;
  }
  EXPECT_EQ(compiles, 1);
  EXPECT_EQ(hits, kCaches - 1);
  for (int t = 0; t < kCaches; ++t) EXPECT_EQ(got[t], got[0]) << t;
  EXPECT_TRUE(is_elf(*got[0]));
  EXPECT_EQ(caches[1]->get(kernel_source(6), "k", "sm_90").source, CacheSource::Memory);
}

TEST_F(KernelCacheTest, CompileErrorReachesEveryWaiterAndIsNotCached) {
  KernelCache c(opts());
  std::string bad = "extern \"C\" __global__ void k(float* y) { y[0] = ; }\n";
  std::atomic<int> errors{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&] {
      try {
        c.get(bad, "bad", "sm_90");
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::Driver) errors.fetch_add(1);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(errors.load(), 4);
  EXPECT_EQ(c.stats().disk_entries, 0);
  EXPECT_THROW(c.get(bad, "bad", "sm_90"), Error);  // retried, not a cached failure
}

TEST_F(KernelCacheTest, DiskDisabledWritesNothingAndClearRemovesEntries) {
  {
    KernelCache c({dir_.string(), false});
    c.get(kernel_source(6), "k", "sm_90");
    EXPECT_EQ(c.stats().disk_entries, 0);
  }
  {
    EnvConfig cfg;
    cfg.cache_dir = dir_.string();
    cfg.disable_disk_cache = true;  // KILN_DISABLE=disk_cache
    set_env_override(&cfg);
    KernelCache c(opts());
    c.get(kernel_source(6), "k", "sm_90");
    EXPECT_EQ(c.stats().disk_entries, 0);
    EnvConfig plain;
    plain.cache_dir = dir_.string();
    set_env_override(&plain);
  }
  KernelCache c(opts());
  c.get(kernel_source(6), "k", "sm_90");
  c.get(kernel_source(7), "k", "sm_90");
  EXPECT_EQ(c.stats().disk_entries, 2);
  EXPECT_EQ(c.clear(), 2);
  EXPECT_EQ(c.stats().disk_entries, 0);
  EXPECT_EQ(c.get(kernel_source(6), "k", "sm_90").source, CacheSource::Nvrtc);  // memory cleared
}

TEST_F(KernelCacheTest, DefaultDirFollowsKilnCacheDir) {
  EXPECT_EQ(default_cache_dir(), dir_.string());
  EXPECT_EQ(KernelCache().dir(), dir_.string());
}
