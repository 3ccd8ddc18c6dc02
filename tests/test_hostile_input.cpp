// Hostile input (issue 24), at the library: one test (or a few) per row of the issue's table.
// Every bad input ends in one located kiln::Error(User), no signal, no hang, nothing written
// outside kiln's own directories; the big-but-valid ones (rows 3 and 4) load in bounded time and
// memory. The same rows through the CLI are in test_hostile_cli.cpp.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>

#include "codegen/kernel_cache.hpp"
#include "codegen/kernel_spec.hpp"
#include "codegen/nvrtc.hpp"
#include "engine/base/env.hpp"
#include "engine/base/file_io.hpp"
#include "engine/base/hash.hpp"
#include "engine/base/random.hpp"
#include "engine/ir/json_io.hpp"
#include "engine/planner/plan.hpp"
#include "heuristics/device_info.hpp"
#include "heuristics/schedule.hpp"
#include "heuristics/tuning_table.hpp"
#include "kiln/io.hpp"
#include "kiln/reference.hpp"
#include "tests/hostile_util.hpp"
#include "tests/user_error.hpp"

using namespace kiln;
using namespace kiln::hostile;

namespace {

bool contains(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

std::string nested(int depth) {
  return std::string(static_cast<size_t>(depth), '[') +
         std::string(static_cast<size_t>(depth), ']');
}

// The environment of a test: the user's KILN_* variables kept out, a cache dir of its own.
class EnvScope {
 public:
  explicit EnvScope(const EnvConfig& c) { set_env_override(&c); }
  ~EnvScope() { set_env_override(nullptr); }
};

std::string kernel_source(int variant) {
  return "extern \"C\" __global__ void k(float* y, long long n) {\n"
         "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i < n) y[i] = " +
         std::to_string(variant) + ".0f;\n}\n";
}

bool is_regular_file_not_link(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

// ---- row 1: nesting ~100,000 deep: a located error, not a crash in a recursive parse

TEST(Hostile, Row1DeepGraphFileIsALocatedError) {
  std::string text = R"({"kiln": 1, "doc": )" + nested(100000) + R"(, "outputs": ["x"]})";
  std::string m = test::user_error([&] { load_graph_string(text, "g.json"); });
  EXPECT_TRUE(contains(m, "g.json:1:")) << m;
  EXPECT_TRUE(contains(m, "nesting deeper than 256 levels")) << m;
  // Up to the limit is fine (the top-level object is one level).
  std::string ok = R"({"kiln": 1, "doc": )" + nested(255) +
                   R"(, "inputs": {"x": {"dtype": "f32", "shape": [2]}}, "outputs": ["x"]})";
  EXPECT_NO_THROW(load_graph_string(ok, "ok.json"));
  std::string over = R"({"kiln": 1, "doc": )" + nested(256) + R"(, "outputs": ["x"]})";
  EXPECT_TRUE(contains(test::user_error([&] { load_graph_string(over, "g.json"); }), "nesting"));
  // Nesting inside strings does not count.
  std::string in_string =
      R"({"kiln": 1, "doc": ")" + std::string(100000, '[') +
      R"(", "inputs": {"x": {"dtype": "f32", "shape": [2]}}, "outputs": ["x"]})";
  EXPECT_NO_THROW(load_graph_string(in_string, "s.json"));
}

TEST(Hostile, Row1DeepSafetensorsHeaderIsALocatedError) {
  TempDir d;
  for (const std::string& h :
       {R"({"__metadata__": )" + nested(100000) + "}",
        R"({"w": {"dtype": "F32", "shape": )" + nested(100000) + R"(, "data_offsets": [0, 4]}})"}) {
    write_raw_safetensors(d / "deep.safetensors", h, std::string(4, '\0'));
    std::string m = test::user_error([&] { SafetensorsFile f((d / "deep.safetensors").string()); });
    EXPECT_TRUE(contains(m, "deep.safetensors (header):1:")) << m;
    EXPECT_TRUE(contains(m, "nesting deeper than 256 levels")) << m;
  }
}

// ---- row 2: no write through a link planted at a cache temp name or a dump name

TEST(Hostile, Row2CacheEntriesAreNeverWrittenThroughAPlantedLink) {
  TempDir d;
  fs::path dir = d / "cache";
  EnvConfig c;
  c.cache_dir = dir.string();
  EnvScope env(c);
  const std::string victim_text = "precious\n";
  write_file(d / "victim", victim_text);
  KernelCache cache(KernelCacheOptions{dir.string(), true});
  const std::string src = kernel_source(2);
  const std::string key = KernelCache::key_for(src, "sm_80");
  fs::create_directories(dir);
  // The names an attacker could predict before: the entry and the old pid+counter temp names.
  fs::create_symlink(d / "victim", cache.entry_path(key));
  for (int n = 0; n < 4; ++n)
    fs::create_symlink(d / "victim", dir / ("." + key + ".tmp." + std::to_string(getpid()) + "." +
                                            std::to_string(n)));
  CachedKernel k = cache.get(src, "k", "sm_80");
  EXPECT_EQ(k.source, CacheSource::Nvrtc);
  EXPECT_EQ(read_all(d / "victim"), victim_text);
  EXPECT_TRUE(is_regular_file_not_link(cache.entry_path(key)));
  EXPECT_EQ(cache.stats().disk_rejected, 1);  // the planted link, removed like a bad entry
  // The entry reads back from disk in a fresh cache.
  KernelCache again(KernelCacheOptions{dir.string(), true});
  EXPECT_EQ(again.get(src, "k", "sm_80").source, CacheSource::Disk);
}

TEST(Hostile, Row2DumpsAreNeverWrittenThroughAPlantedLink) {
  TempDir d;
  EnvConfig c;
  c.cache_dir = (d / "kiln").string();
  c.dump_cuda = true;
  EnvScope env(c);
  write_file(d / "victim", "precious\n");
  const std::string src = kernel_source(3);
  fs::create_directories(d / "kiln");
  fs::path dump = d / "kiln" / ("kiln-k-" + hash_hex(src).substr(0, 16) + ".cu");
  fs::create_symlink(d / "victim", dump);
  nvrtc_compile(src, "k", "sm_80");
  EXPECT_EQ(read_all(d / "victim"), "precious\n");
  EXPECT_TRUE(is_regular_file_not_link(dump));
  EXPECT_EQ(read_all(dump), src);
}

TEST(Hostile, Row2WithoutHomeTheCacheIsAPrivatePerUserDirectory) {
  TempDir d;
  auto saved = [](const char* n) -> std::optional<std::string> {
    const char* v = std::getenv(n);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  std::optional<std::string> home = saved("HOME"), xdg = saved("XDG_CACHE_HOME"),
                             tmp = saved("TMPDIR");
  ::unsetenv("HOME");
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("TMPDIR", d.path().c_str(), 1);
  {
    EnvScope env(EnvConfig{});
    const fs::path expect = d / ("kiln-" + std::to_string(::geteuid()));
    EXPECT_EQ(kiln_cache_dir(), expect.string());
    EXPECT_TRUE(kiln_cache_dir_is_shared_fallback());
    EXPECT_EQ(dump_dir(), expect.string());
    {
      KernelCache cache;
      EXPECT_EQ(cache.get(kernel_source(4), "k", "sm_80").source, CacheSource::Nvrtc);
      struct stat st {};
      ASSERT_EQ(::lstat(expect.c_str(), &st), 0);
      EXPECT_TRUE(S_ISDIR(st.st_mode));
      EXPECT_EQ(st.st_mode & 0777, 0700u);
    }
    // A link planted in its place (pointing at a directory of the attacker's choice) is refused:
    // the cache stays in memory and nothing lands behind the link.
    fs::remove_all(expect);
    fs::create_directories(d / "elsewhere");
    fs::create_symlink(d / "elsewhere", expect);
    {
      KernelCache cache;
      EXPECT_EQ(cache.get(kernel_source(5), "k", "sm_80").source, CacheSource::Nvrtc);
    }
    EXPECT_TRUE(fs::is_empty(d / "elsewhere"));
    // A directory owned by someone else is refused too.
    if (::geteuid() == 0) {
      fs::remove(expect);
      fs::create_directories(expect);
      ASSERT_EQ(::chown(expect.c_str(), 65534, 65534), 0);
      std::string why;
      EXPECT_FALSE(prepare_private_dir(expect.string(), &why, false));
      EXPECT_TRUE(contains(why, "owned by another user")) << why;
    }
  }
  auto restore = [](const char* n, const std::optional<std::string>& v) {
    if (v)
      ::setenv(n, v->c_str(), 1);
    else
      ::unsetenv(n);
  };
  restore("HOME", home);
  restore("XDG_CACHE_HOME", xdg);
  restore("TMPDIR", tmp);
}

TEST(Hostile, Row2PrivateDirectoryRules) {
  TempDir d;
  std::string why;
  fs::path fresh = d / "a" / "b";
  ASSERT_TRUE(prepare_private_dir(fresh.string(), &why)) << why;
  struct stat st {};
  ASSERT_EQ(::stat(fresh.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  fs::permissions(fresh, fs::perms::all);  // world-writable, no sticky bit
  EXPECT_FALSE(prepare_private_dir(fresh.string(), &why));
  EXPECT_TRUE(contains(why, "world-writable")) << why;
  fs::permissions(fresh, fs::perms::sticky_bit, fs::perm_options::add);
  EXPECT_TRUE(prepare_private_dir(fresh.string(), &why)) << why;
  write_file(d / "file", "x");
  EXPECT_FALSE(prepare_private_dir((d / "file").string(), &why));
  EXPECT_TRUE(contains(why, "not a directory")) << why;
  // Temp names are random: two writes of one name never share one.
  EXPECT_NE(random_hex(), random_hex());
  EXPECT_EQ(random_hex().size(), 32u);
}

// ---- row 3: linear time for big files, planning a 100,000-node chain

TEST(Hostile, Row3ManySmallObjectsLoadInLinearTime) {
  std::string text = R"({"kiln": 1, "metadata": {)";
  for (int i = 0; i < 200000; ++i)
    text += (i ? ", " : "") + std::string("\"k") + std::to_string(i) + "\": {\"a\": 1}";
  text += R"(}, "inputs": {"x": {"dtype": "f32", "shape": [2]}}, "outputs": ["x"]})";
  double t0 = cpu_seconds();
  load_graph_string(text, "objects.json");
  EXPECT_LT(cpu_seconds() - t0, 5.0);
  // Duplicates are still found in a large object.
  text.insert(text.find("\"k199999\""), "\"k7\": 1, ");
  EXPECT_TRUE(contains(test::user_error([&] { load_graph_string(text, "objects.json"); }),
                       "objects.json: duplicate key 'k7'"));
}

TEST(Hostile, Row3LongChainLoadsAndPlansInLinearTime) {
  const std::string text = relu_chain(200000);
  double t0 = cpu_seconds();
  Graph g = load_graph_string(text, "chain.json");
  double load_s = cpu_seconds() - t0;
  EXPECT_LT(load_s, 5.0);
  EXPECT_EQ(g.nodes().size(), 200000u);

  Graph g100 = load_graph_string(relu_chain(100000), "chain.json");
  t0 = cpu_seconds();
  PlanOptions po;
  po.sm = 90;
  Plan p = plan_fusion(g100, po);
  std::vector<KernelSpec> ks =
      generate_kernels(g100, p, codegen_options(default_device_info("sm_90"), {}));
  double plan_s = cpu_seconds() - t0;
  EXPECT_LT(plan_s, 5.0);
  EXPECT_EQ(p.groups.size(), 1u);  // one pointwise kernel for the whole chain
  EXPECT_EQ(ks.size(), 1u);
  EXPECT_FALSE(ks[0].flops.str().empty());  // a dim over 100,000 terms: text without recursion
  EXPECT_GT(ks[0].flops.eval({{"N", 2}}), 0);
  EXPECT_LT(peak_rss_mib(), 1024.0);
  std::printf(
      "load of 200,000 nodes %.2f s; plan + codegen of 100,000 nodes %.2f s; peak %.0f MiB\n",
      load_s, plan_s, peak_rss_mib());
}

TEST(Hostile, Row3LargeSafetensorsHeaderParsesInLinearTime) {
  TempDir d;
  std::string h = "{";
  for (int i = 0; i < 100000; ++i)
    h += (i ? "," : "") + std::string("\"t") + std::to_string(i) +
         R"(": {"dtype": "F32", "shape": [1], "data_offsets": [)" + std::to_string(4 * i) + ", " +
         std::to_string(4 * i + 4) + "]}";
  h += "}";
  write_raw_safetensors(d / "many.safetensors", h, std::string(400000, '\0'));
  double t0 = cpu_seconds();
  SafetensorsFile f((d / "many.safetensors").string());
  EXPECT_LT(cpu_seconds() - t0, 5.0);
  EXPECT_EQ(f.entries().size(), 100000u);
}

// ---- row 4: a 2^30-element random constant costs nothing until it is used

TEST(Hostile, Row4RandomConstantsAreMadeWhenFirstUsed) {
  const std::string text =
      R"({"kiln":1,"constants":{"w":{"dtype":"f16","shape":[1073741824],"init":{"normal":{}}}},)"
      R"("outputs":["w"]})";
  double t0 = cpu_seconds();
  Graph g = load_graph_string(text, "big.json");
  std::string saved = save_graph_string(g);  // the source is saved, not the data
  EXPECT_LT(cpu_seconds() - t0, 1.0);
  const TensorInfo& w = g.tensor(g.find("w"));
  EXPECT_TRUE(w.data.has_value());
  EXPECT_FALSE(w.data.materialized());
  EXPECT_TRUE(contains(saved, "\"init\"")) << saved;
  EXPECT_LT(peak_rss_mib(), 1024.0);
  // Using it asks the host memory budget first, naming the constant.
  EnvConfig c;
  c.memory_budget = uint64_t{64} << 20;
  EnvScope env(c);
  std::string m = test::user_error([&] { (void)w.data->numel(); });
  EXPECT_TRUE(contains(m, "constant 'w'.init (f16[1073741824])")) << m;
  EXPECT_TRUE(contains(m, "over the budget of 64 MiB")) << m;
}

TEST(Hostile, Row4DeferredConstantsHoldTheSameValues) {
  // The values made in the constant's dtype are those of the f64 path they replace.
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    Graph g;
    TensorDesc d{dt, {3, 5, 7}};
    Tensor n = g.constant_random("n", d, "normal", 0.5, 2.0, 11);
    Tensor u = g.constant_random("u", d, "uniform", -1.0, 3.0, 12);
    EXPECT_EQ(g.tensor(n).data->data,
              HostTensor::from_f64(dt, {3, 5, 7}, random_values(true, 0.5, 2.0, 11, 105)).data);
    EXPECT_EQ(g.tensor(u).data->data,
              HostTensor::from_f64(dt, {3, 5, 7}, random_values(false, -1.0, 3.0, 12, 105)).data);
    // A copy of the graph shares the data; changing the copy's leaves the original alone.
    Graph c = g;
    c.mutable_tensors()[n.id].data->data[0] ^= std::byte{1};
    EXPECT_NE(c.tensor(n).data->data, g.tensor(n).data->data);
  }
}

TEST(Hostile, Row4FileConstantsAreReadWhenFirstUsed) {
  TempDir d;
  write_safetensors((d / "w.safetensors").string(),
                    {{"w", HostTensor::from_f64(DType::F32, {4}, {1, 2, 3, 4})}});
  write_file(d / "g.json",
             R"({"kiln":1,"constants":{"w":{"dtype":"f32","shape":[4],"file":"w.safetensors"}},)"
             R"("outputs":["w"]})");
  Graph g = load_graph_file((d / "g.json").string());
  const TensorInfo& w = g.tensor(g.find("w"));
  EXPECT_FALSE(w.data.materialized());
  // The file shrinks after loading: the read is a located error, not garbage.
  fs::resize_file(d / "w.safetensors", fs::file_size(d / "w.safetensors") - 8);
  std::string m = test::user_error([&] { (void)w.data->numel(); });
  EXPECT_TRUE(contains(m, "constants.w.file:")) << m;
}

// ---- row 5: host allocations sized by a flag are checked against the budget, by name

TEST(Hostile, Row5ReferenceChecksItsMemoryUpFront) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 256});
  g.output(g.gelu(g.relu(x), GeluApprox::None));
  EnvConfig c;
  c.memory_budget = uint64_t{6} << 20;
  EnvScope env(c);
  HostTensor in = HostTensor::zeros(DType::F32, {4096, 256});  // 4 MiB
  std::string m = test::user_error([&] { run_reference(g, {{"x", in}}); });
  EXPECT_TRUE(contains(m, "run_reference (graph 'graph'): f64 values at node")) << m;
  EXPECT_TRUE(contains(m, "f32[4096, 256]")) << m;
  EXPECT_TRUE(contains(m, "over the budget of 6 MiB (set by KILN_MEMORY_BUDGET)")) << m;
  // Within the budget it runs.
  c.memory_budget = uint64_t{64} << 20;
  EnvScope env2(c);
  EXPECT_NO_THROW(run_reference(g, {{"x", in}}));
}

TEST(Hostile, Row5HostTensorsAndRandomValuesAskTheBudget) {
  EnvConfig c;
  c.memory_budget = uint64_t{1} << 20;
  EnvScope env(c);
  std::string m = test::user_error([] { HostTensor::zeros(DType::F32, {1024, 1024}); });
  EXPECT_TRUE(contains(m, "a host tensor f32[1024, 1024]: 4 MiB")) << m;
  m = test::user_error([] { random_values(true, 0, 1, 1, int64_t{1} << 40); });
  EXPECT_TRUE(contains(m, "1099511627776 random values")) << m;
  m = test::user_error([] { HostTensor::zeros(DType::F32, {int64_t{1} << 40, int64_t{1} << 40}); });
  EXPECT_TRUE(contains(m, "overflows 64 bits")) << m;
}

// ---- row 6: a FIFO (or any non-regular file) never blocks an open

TEST(Hostile, Row6FifosAreRefusedWithoutBlocking) {
  TempDir d;
  fs::path fifo = d / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto expect_refused = [&](const std::string& what, const std::function<void()>& f) {
    std::string r = in_child(10, [&] {
      f();
      return std::string("accepted");
    });
    EXPECT_TRUE(contains(r, "error: ") && contains(r, "is a FIFO, not a regular file"))
        << what << ": " << r;
  };
  expect_refused("graph", [&] { load_graph_file(fifo.string()); });
  expect_refused("input", [&] { read_safetensors(fifo.string()); });
  write_file(d / "g.json",
             R"({"kiln":1,"constants":{"w":{"dtype":"f32","shape":[4],"file":"fifo"}},)"
             R"("outputs":["w"]})");
  expect_refused("constant file", [&] { load_graph_file((d / "g.json").string()); });
  // tuning.json: ignored with a note.
  std::string r = in_child(10, [&] {
    std::string note;
    TuningTable t(fifo.string(), &note);
    return note;
  });
  EXPECT_TRUE(contains(r, "is a FIFO, not a regular file: ignored")) << r;
  // A cache entry: removed and rebuilt.
  r = in_child(30, [&] {
    EnvConfig c;
    c.cache_dir = (d / "cache").string();
    set_env_override(&c);
    KernelCache cache(KernelCacheOptions{c.cache_dir, true});
    const std::string src = kernel_source(6);
    fs::create_directories(c.cache_dir);
    ::mkfifo(cache.entry_path(KernelCache::key_for(src, "sm_80")).c_str(), 0600);
    CachedKernel k = cache.get(src, "k", "sm_80");
    return std::string(cache_source_name(k.source)) + " " +
           std::to_string(cache.stats().disk_rejected);
  });
  EXPECT_EQ(r, "nvrtc 1");
}

// ---- row 7: a cache entry that is not a plausible file is removed and rebuilt

TEST(Hostile, Row7ImplausibleCacheEntriesAreRebuilt) {
  TempDir d;
  fs::path dir = d / "cache";
  EnvConfig c;
  c.cache_dir = dir.string();
  EnvScope env(c);
  const std::string src = kernel_source(7);
  const std::string key = KernelCache::key_for(src, "sm_80");
  fs::create_directories(dir);
  {
    KernelCache cache(KernelCacheOptions{dir.string(), true});
    fs::create_directories(fs::path(cache.entry_path(key)) / "inside");
    EXPECT_EQ(cache.get(src, "k", "sm_80").source, CacheSource::Nvrtc);
    EXPECT_TRUE(is_regular_file_not_link(cache.entry_path(key)));
  }
  {
    KernelCache cache(KernelCacheOptions{dir.string(), true});
    fs::remove(cache.entry_path(key));
    std::error_code ec;
    { std::ofstream f(cache.entry_path(key), std::ios::binary); }
    fs::resize_file(cache.entry_path(key), uint64_t{200} << 30, ec);  // 200 GB, sparse
    if (ec) GTEST_SKIP() << "no sparse 200 GB file here: " << ec.message();
    double rss0 = peak_rss_mib();
    EXPECT_EQ(cache.get(src, "k", "sm_80").source, CacheSource::Nvrtc);
    EXPECT_LT(fs::file_size(cache.entry_path(key)), uint64_t{1} << 20);
    EXPECT_LT(peak_rss_mib() - rss0, 256.0);
  }
  KernelCache cache(KernelCacheOptions{dir.string(), true});
  EXPECT_EQ(cache.get(src, "k", "sm_80").source, CacheSource::Disk);
}

// ---- row 8: an unusable cache directory: a warning when running, an error for `cache warm`

TEST(Hostile, Row8UnusableCacheDirectoryWarnsOrFails) {
  TempDir d;
  write_file(d / "not_a_dir", "x");
  EnvConfig c;
  c.cache_dir = (d / "not_a_dir").string();
  EnvScope env(c);
  std::string m = test::user_error([&] {
    KernelCache strict(KernelCacheOptions{c.cache_dir, true, /*require_disk=*/true});
  });
  EXPECT_TRUE(contains(m, "kernel cache " + c.cache_dir + ": is a regular file, not a directory"))
      << m;
  KernelCache lenient(KernelCacheOptions{c.cache_dir, true});
  EXPECT_EQ(lenient.get(kernel_source(8), "k", "sm_80").source, CacheSource::Nvrtc);
  EXPECT_EQ(read_all(d / "not_a_dir"), "x");
  if (::geteuid() != 0) {  // root writes anywhere: a read-only directory is not one for it
    fs::create_directories(d / "ro");
    fs::permissions(d / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    m = test::user_error([&] {
      KernelCache strict(KernelCacheOptions{(d / "ro").string(), true, true});
    });
    EXPECT_TRUE(contains(m, "not writable")) << m;
  }
}

// ---- row 9: archs older than sm_80 are refused up front

TEST(Hostile, Row9ArchsBeforeSm80AreRefusedUpFront) {
  for (const char* a : {"sm_70", "sm_75", "sm_72"}) {
    std::string m = test::user_error([&] { parse_arch(a, nullptr, "--arch"); });
    EXPECT_TRUE(contains(m, "--arch: kiln needs sm_80 or newer")) << m;
    EXPECT_TRUE(contains(m, "sm_90a")) << m;  // names the supported ones
  }
  EXPECT_EQ(parse_arch("sm_80"), 80);
  EXPECT_EQ(parse_arch("sm_86"), 86);
}

// ---- row 10: sizes in checked arithmetic

TEST(Hostile, Row10SizesNeverWrap) {
  Dim n("N");
  Dim bytes = (n * Dim(64)) * Dim(2);
  std::string m = test::user_error([&] { bytes.eval({{"N", int64_t{1} << 60}}); });
  EXPECT_TRUE(contains(m, "size 128*N overflows 64 bits with N=1152921504606846976")) << m;
  EXPECT_EQ(bytes.eval({{"N", 3}}), 384);
  EXPECT_EQ((Dim(-7) + n).eval({{"N", 2}}), -5);
  EXPECT_EQ(((n - Dim(9)) / Dim(4)).eval({{"N", 2}}), -2);  // floor
  Graph g = load_graph_string(kSmallGraph, "small.json");
  m = test::user_error([&] { g.bind({}, {{"N", int64_t{1} << 61}}); });
  EXPECT_TRUE(contains(m, "tensor 'x' (f32[N, 8]) would be more than 2^63 bytes")) << m;
}

// ---- row 11: nothing but whitespace after the JSON value

TEST(Hostile, Row11NulAndJunkAfterTheValueAreRefused) {
  std::string text = std::string(kSmallGraph) + std::string("\0junk", 5);
  std::string m = test::user_error([&] { load_graph_string(text, "g.json"); });
  EXPECT_TRUE(contains(m, "g.json:1:")) << m;
  EXPECT_TRUE(contains(m, "NUL byte")) << m;
  EXPECT_TRUE(contains(
      test::user_error([&] { load_graph_string(std::string(kSmallGraph) + " x", "g.json"); }),
      "invalid JSON"));
  EXPECT_NO_THROW(load_graph_string(std::string(kSmallGraph) + " \n\t ", "g.json"));

  TempDir d;
  const std::string h = R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})";
  for (const std::string& tail :
       {std::string("\0junk", 5), std::string(" xx"), std::string("\0", 1)}) {
    write_raw_safetensors(d / "t.safetensors", h + tail, std::string(4, '\0'));
    m = test::user_error([&] { SafetensorsFile f((d / "t.safetensors").string()); });
    EXPECT_TRUE(contains(m, "t.safetensors (header):1:")) << m;
    EXPECT_TRUE(contains(m, "invalid JSON")) << m;
  }
  write_raw_safetensors(d / "pad.safetensors", h + "      ", std::string(4, '\0'));
  EXPECT_NO_THROW(SafetensorsFile((d / "pad.safetensors").string()));  // space padding is the spec
}
