// The Engine facade and executor without a GPU: compile-only engines (plan -> codegen -> NVRTC ->
// cache), fusion switches, workspace sizes, constant layouts, and the errors a run gives when the
// kernels were not loaded.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "engine/base/env.hpp"
#include "heuristics/device_info.hpp"
#include "kiln/engine.hpp"
#include "kiln/error.hpp"
#include "runtime/cuda_driver.hpp"
#include "runtime/executor.hpp"
#include "tests/engine_test_fixture.hpp"
#include "tests/user_error.hpp"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

using test::user_error;

Graph small_graph() {
  Graph g("small");
  Tensor x = g.input("x", DType::F32, {"N", 64});
  Tensor w = g.constant_random("w", TensorDesc{DType::F32, {64}, Layout::NCHW, {}}, "uniform", 0.5,
                               1.5, 1);
  Tensor h = g.relu(g.mul(x, w));
  Tensor s = g.sigmoid(h);
  g.output(g.exp(g.add(s, x)));
  return g;
}

class EngineCpu : public kiln::testing::CompileOnlyEngineTest {};

}  // namespace

TEST_F(EngineCpu, CompileOnlyThenDiskCacheInFreshEngine) {
  Graph g = small_graph();
  size_t nk = 0;
  {
    Engine e(opts());
    EXPECT_EQ(e.arch(), "sm_90");
    CompiledGraph cg = e.compile(g);
    nk = cg.kernels().size();
    ASSERT_GE(nk, 1u);
    EngineStats s = e.stats();
    EXPECT_EQ(s.plans, 1);
    EXPECT_EQ(s.nvrtc_compiles + s.memory_cache_hits, static_cast<int64_t>(nk));
    EXPECT_GT(s.nvrtc_ms, 0);
    // The build breakdown: every phase ran; NVRTC happened inside the kernel-cache phase.
    EXPECT_GT(s.passes_ms + s.codegen_ms, 0);
    EXPECT_GE(s.cache_ms, s.nvrtc_ms * 0.5);  // parallel compiles may overlap
    EXPECT_GE(s.load_ms, 0);
    for (const KernelInfo& k : cg.kernels()) {
      EXPECT_FALSE(k.name.empty());
      EXPECT_FALSE(k.nodes.empty()) << k.name;
      EXPECT_GE(k.group, 0);
    }
    // Symbolic graph: costs are known only once shapes are bound.
    EXPECT_EQ(cg.output_shapes({{"N", 5}}).begin()->second, (std::vector<int64_t>{5, 64}));
  }
  Engine e(opts());
  CompiledGraph cg = e.compile(g);
  EngineStats s = e.stats();
  EXPECT_EQ(s.nvrtc_compiles, 0);
  EXPECT_EQ(s.disk_cache_hits + s.memory_cache_hits, static_cast<int64_t>(nk));
  EXPECT_GE(s.disk_cache_hits, 1);
  for (const KernelInfo& k : cg.kernels()) {
    EXPECT_NE(k.cache, "nvrtc") << k.name;
    EXPECT_EQ(k.compile_ms, 0) << k.name;
  }
}

TEST_F(EngineCpu, RunWithoutLoadedKernelsIsAUserError) {
  Engine e(opts());
  CompiledGraph cg = e.compile(small_graph());
  std::string m = user_error([&] { cg.run({{"x", {256, {2, 64}}}}, {}); });
  EXPECT_NE(m.find("load_kernels is false"), std::string::npos) << m;
  EngineOptions o = opts();
  o.load_kernels = true;
  o.arch = "";
  Engine d(o);
  if (!d.has_device()) {
    EXPECT_EQ(d.arch(), "sm_90");  // the default with no device
    CompiledGraph c2 = d.compile(small_graph());
    m = user_error([&] { c2.run({}, {}); });
    EXPECT_NE(m.find("no CUDA device"), std::string::npos) << m;
  }
  m = user_error([] { CompiledGraph().graph(); });
  EXPECT_NE(m.find("Engine::compile"), std::string::npos) << m;
}

TEST_F(EngineCpu, FusionOffGivesMoreKernelsAlsoFromEnv) {
  Graph g = small_graph();
  Engine fused(opts());
  size_t n_fused = fused.compile(g).kernels().size();
  EngineOptions o = opts();
  o.fusion = false;
  Engine unfused(o);
  size_t n_unfused = unfused.compile(g).kernels().size();
  EXPECT_EQ(n_unfused, g.nodes().size());
  EXPECT_LT(n_fused, n_unfused);

  EnvConfig c;
  c.cache_dir = dir_.string();
  c.disable_fusion = true;  // KILN_DISABLE=fusion
  set_env_override(&c);
  Engine env_unfused(opts());
  EXPECT_EQ(env_unfused.compile(g).kernels().size(), n_unfused);
}

TEST_F(EngineCpu, WorkspaceScalesWithBindingsAndSavesAgainstTotal) {
  EngineOptions o = opts();
  o.fusion = false;  // every node its own kernel: intermediates in the arena
  Engine e(o);
  CompiledGraph cg = e.compile(small_graph());
  int64_t ws8 = cg.workspace_size({{"N", 8}});
  int64_t ws800 = cg.workspace_size({{"N", 800}});
  EXPECT_GT(ws8, 0);
  EXPECT_GT(ws800, ws8);
  EXPECT_LT(ws800, cg.intermediates_total({{"N", 800}}));  // liveness reuse
  EXPECT_EQ(ws800 % 256, 0);
  EXPECT_THROW(cg.workspace_size({}), Error);  // N unbound
}

TEST_F(EngineCpu, BadArchIsAUserError) {
  EngineOptions o = opts();
  o.arch = "sm90";
  std::string m = user_error([&] { Engine e(o); });
  EXPECT_NE(m.find("EngineOptions.arch"), std::string::npos) << m;
  EXPECT_TRUE(cubin_runs_on("sm_80", 86));
  EXPECT_FALSE(cubin_runs_on("sm_86", 80));
  EXPECT_FALSE(cubin_runs_on("sm_80", 90));
  EXPECT_TRUE(cubin_runs_on("sm_90a", 90));
  EXPECT_FALSE(cubin_runs_on("sm_90a", 100));
}

TEST(ConstantLayout, NchwNhwcAndStridedBytes) {
  Graph g;
  std::vector<double> v(2 * 3 * 2 * 2);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  Tensor a = g.constant("a", TensorDesc{DType::F32, {2, 3, 2, 2}, Layout::NCHW, {}},
                        HostTensor::from_f64(DType::F32, {2, 3, 2, 2}, v));
  Tensor b = g.constant("b", TensorDesc{DType::F32, {2, 3, 2, 2}, Layout::NHWC, {}},
                        HostTensor::from_f64(DType::F32, {2, 3, 2, 2}, v));
  Tensor c = g.constant("c", TensorDesc{DType::F32, {2, 3}, Layout::Strided, {4, 1}},
                        HostTensor::from_f64(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6}));
  auto floats = [](const std::vector<std::byte>& b) {
    std::vector<float> f(b.size() / 4);
    std::memcpy(f.data(), b.data(), b.size());
    return f;
  };
  std::vector<float> fa = floats(constant_device_bytes(g.tensor(a)));
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(fa[i], v[i]);
  std::vector<float> fb = floats(constant_device_bytes(g.tensor(b)));
  // NHWC: element (n, c, h, w) at ((n*H + h)*W + w)*C + c.
  for (int n = 0; n < 2; ++n)
    for (int ch = 0; ch < 3; ++ch)
      for (int h = 0; h < 2; ++h)
        for (int w = 0; w < 2; ++w)
          EXPECT_EQ(fb[((n * 2 + h) * 2 + w) * 3 + ch], v[((n * 3 + ch) * 2 + h) * 2 + w]);
  std::vector<float> fc = floats(constant_device_bytes(g.tensor(c)));
  EXPECT_EQ(fc, (std::vector<float>{1, 2, 3, 0, 4, 5, 6}));
}

TEST(CudaDriver, WithoutADeviceEveryCallIsADriverErrorWithTheReason) {
  std::string reason;
  if (cuda::driver_available(&reason)) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(reason.empty());
  EXPECT_EQ(reason, cuda::driver_unavailable_reason());
  try {
    cuda::mem_alloc(1024);
    FAIL() << "expected a Driver error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Driver);
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
  EXPECT_THROW(cuda::query_device_info(0), Error);
  cuda::mem_free(0);  // freeing never throws
  cuda::DeviceBuffer empty;
  EXPECT_EQ(empty.ptr(), 0u);
}

TEST(DeviceInfoDefaults, ArchFactsAndParsing) {
  DeviceInfo h = default_device_info("sm_90");
  EXPECT_EQ(h.sm, 90);
  EXPECT_EQ(h.sm_count, 132);
  EXPECT_FALSE(h.from_device);
  DeviceInfo a = default_device_info("sm_80");
  EXPECT_EQ(a.sm_count, 108);
  EXPECT_LT(a.mem_bandwidth, h.mem_bandwidth);
  bool spec = false;
  EXPECT_EQ(parse_arch("sm_90a", &spec), 90);
  EXPECT_TRUE(spec);
  EXPECT_EQ(parse_arch("sm_120", &spec), 120);
  EXPECT_FALSE(spec);
  for (const char* bad : {"", "sm_", "sm_9", "sm90", "compute_90", "sm_90b", "sm_90aa", "sm_60"})
    EXPECT_THROW(parse_arch(bad), Error) << bad;
}
