// NVRTC: real compiles of a self-contained kernel to cubin for several archs, and the failure path
// (Driver error with options, log and a dumped source that exists).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "codegen/nvrtc.hpp"
#include "engine/base/env.hpp"
#include "kiln/error.hpp"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

const char* kAxpb = R"(
extern "C" __global__ void axpb(float* y, const float* x, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * 2.0f + 1.0f;
}
)";

bool is_elf(const std::vector<char>& b) {
  return b.size() > 64 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
}

// Points KILN_CACHE_DIR (the dump dir) at a fresh directory for one test.
struct ScopedDumpDir {
  explicit ScopedDumpDir(const std::string& tag, bool cuda = false, bool ptx = false) {
    dir = fs::temp_directory_path() / fmt_dir(tag);
    fs::remove_all(dir);
    fs::create_directories(dir);
    EnvConfig c;
    c.cache_dir = dir.string();
    c.dump_cuda = cuda;
    c.dump_ptx = ptx;
    set_env_override(&c);
  }
  ~ScopedDumpDir() {
    set_env_override(nullptr);
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  static std::string fmt_dir(const std::string& tag) {
    return "kiln-test-nvrtc-" + tag + "-" + std::to_string(getpid());
  }
  fs::path dir;
};

}  // namespace

TEST(Nvrtc, VersionLooksLikeMajorMinor) {
  EXPECT_TRUE(std::regex_match(nvrtc_version(), std::regex(R"(\d+\.\d+)"))) << nvrtc_version();
}

TEST(Nvrtc, OptionsHaveArchAndNoFastMath) {
  std::vector<std::string> o = nvrtc_options("sm_90a", {"-lineinfo"});
  EXPECT_EQ(o.front(), "--gpu-architecture=sm_90a");
  EXPECT_EQ(o.back(), "-lineinfo");
  for (const std::string& s : o) {
    EXPECT_EQ(s.find("fast_math"), std::string::npos) << s;
    EXPECT_NE(s.rfind("-I", 0), 0u) << s;
  }
  EXPECT_THROW(nvrtc_options("compute_90"), Error);
  EXPECT_THROW(nvrtc_options("sm_9"), Error);
}

TEST(Nvrtc, CompilesCubinForSm80Sm90Sm90a) {
  for (const char* arch : {"sm_80", "sm_90", "sm_90a"}) {
    NvrtcResult r = nvrtc_compile(kAxpb, "axpb", arch);
    EXPECT_TRUE(is_elf(r.cubin)) << arch << ": " << r.cubin.size() << " bytes";
    EXPECT_GT(r.ms, 0.0) << arch;
  }
  // Different archs give different machine code.
  EXPECT_NE(nvrtc_compile(kAxpb, "axpb", "sm_80").cubin,
            nvrtc_compile(kAxpb, "axpb", "sm_90").cubin);
}

// The one-time start runs once per process (a background start and later waits share it), and
// compiles after it still work; its time is positive and stays the same.
TEST(Nvrtc, OneTimeStartIsSharedAndMeasured) {
  nvrtc_start_async();
  nvrtc_start_async();
  const double first = nvrtc_start_ms();
  EXPECT_GT(first, 0.0);
  EXPECT_EQ(nvrtc_start_ms(), first);
  NvrtcResult r = nvrtc_compile(kAxpb, "axpb", "sm_80");
  EXPECT_FALSE(r.cubin.empty());
  EXPECT_GT(r.ms, 0.0);
}

TEST(Nvrtc, SyntaxErrorGivesDriverErrorWithLogAndDumpedSource) {
  ScopedDumpDir d("fail");
  std::string bad =
      std::string(kAxpb) + "\nextern \"C\" __global__ void broken(float* y) { y[0] = ; }\n";
  try {
    nvrtc_compile(bad, "broken_kernel", "sm_90");
    FAIL() << "expected a Driver error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Driver);
    std::string m = e.what();
    EXPECT_NE(m.find("broken_kernel"), std::string::npos) << m;
    EXPECT_NE(m.find("--gpu-architecture=sm_90"), std::string::npos) << m;
    EXPECT_NE(m.find("expected an expression"), std::string::npos) << m;  // the NVRTC log
    std::smatch sm;
    ASSERT_TRUE(
        std::regex_search(m, sm, std::regex(R"(source: (\S+kiln-failed-broken_kernel-\S+\.cu))")))
        << m;
    std::string path = sm[1];
    ASSERT_TRUE(fs::exists(path)) << path;
    EXPECT_EQ(fs::path(path).parent_path(), d.dir);
    std::ifstream f(path);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, bad);
  }
}

TEST(Nvrtc, ToolkitHeadersAreNotOnTheIncludePath) {
  ScopedDumpDir d("noinc");
  EXPECT_THROW(nvrtc_compile("#include <cuda_runtime.h>\n" + std::string(kAxpb), "inc", "sm_90"),
               Error);
}

TEST(Nvrtc, DumpCudaAndPtxWriteFiles) {
  ScopedDumpDir d("dump", /*cuda=*/true, /*ptx=*/true);
  NvrtcResult r = nvrtc_compile(kAxpb, "axpb_dump", "sm_90");
  EXPECT_TRUE(is_elf(r.cubin));
  int cu = 0, ptx = 0;
  for (const auto& e : fs::directory_iterator(d.dir)) {
    std::string n = e.path().filename().string();
    if (n.rfind("kiln-axpb_dump-", 0) != 0) continue;
    if (e.path().extension() == ".cu") ++cu;
    if (e.path().extension() == ".ptx") {
      ++ptx;
      std::ifstream f(e.path());
      std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      EXPECT_NE(text.find(".entry axpb"), std::string::npos);
      EXPECT_NE(text.find(".target sm_90"), std::string::npos);
    }
  }
  EXPECT_EQ(cu, 1);
  EXPECT_EQ(ptx, 1);
}
