// The GPU runtime: driver facts, a hand-written two-kernel spec through the executor (arena
// intermediate, uploaded constant, symbolic N re-bound without recompiling), located run errors,
// caller workspace, kernel timing, and the Engine facade end to end against the CPU reference.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "codegen/kernel_cache.hpp"
#include "engine/base/env.hpp"
#include "kiln/engine.hpp"
#include "kiln/error.hpp"
#include "kiln/reference.hpp"
#include "runtime/executor.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/user_error.hpp"

using namespace kiln;
using namespace kiln::gputest;
namespace fs = std::filesystem;

namespace {

const char* kTimes2 = R"(
extern "C" __global__ void times2(float* t, const float* x, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) t[i] = x[i] * 2.0f;
}
)";
const char* kPlusC = R"(
extern "C" __global__ void plus_c(float* y, const float* t, const float* c, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = t[i] + c[0];
}
)";

using test::user_error;

// y = x * 2 + 1 over a symbolic N, as two hand-written kernels: t = x*2 (t lives in the arena),
// y = t + one[0] (one is an uploaded constant).
struct Axpb {
  std::shared_ptr<Graph> g = std::make_shared<Graph>("axpb");
  Tensor x, two, one, t, y;
  std::vector<KernelSpec> specs;

  Axpb() {
    x = g->input("x", DType::F32, {"N"});
    two = g->constant("two", TensorDesc{DType::F32, {1}, Layout::NCHW, {}},
                      HostTensor::from_f64(DType::F32, {1}, {2.0}));
    one = g->constant("one", TensorDesc{DType::F32, {1}, Layout::NCHW, {}},
                      HostTensor::from_f64(DType::F32, {1}, {1.0}));
    t = g->mul(x, two);
    y = g->add_node1("add", {t, one}, {}, "y");  // node and tensor named y
    g->output(y);
    Dim blocks = (Dim("N") + Dim(255)) / Dim(256);
    KernelSpec k1;
    k1.name = k1.entry = "times2";
    k1.source = kTimes2;
    k1.args = {{KernelArg::Kind::Tensor, t.id, Dim(1)},
               {KernelArg::Kind::Tensor, x.id, Dim(1)},
               {KernelArg::Kind::Int, -1, Dim("N")}};
    k1.grid = {blocks, Dim(1), Dim(1)};
    k1.block = {256, 1, 1};
    k1.bytes_moved = Dim("N") * Dim(8);
    k1.flops = Dim("N");
    k1.group = 0;
    KernelSpec k2 = k1;
    k2.name = k2.entry = "plus_c";
    k2.source = kPlusC;
    k2.args = {{KernelArg::Kind::Tensor, y.id, Dim(1)},
               {KernelArg::Kind::Tensor, t.id, Dim(1)},
               {KernelArg::Kind::Tensor, one.id, Dim(1)},
               {KernelArg::Kind::Int, -1, Dim("N")}};
    k2.group = 1;
    specs = {k1, k2};
  }
};

class RuntimeGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kiln-test-rtgpu-" + std::to_string(getpid()));
    EnvConfig c;
    c.cache_dir = dir_.string();
    set_env_override(&c);
  }
  void TearDown() override {
    set_env_override(nullptr);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

}  // namespace

TEST_F(RuntimeGpu, DeviceInfoFromDriver) {
  KILN_REQUIRE_DEVICE();
  DeviceInfo d = cuda::query_device_info(0);
  EXPECT_TRUE(d.from_device);
  EXPECT_FALSE(d.name.empty());
  EXPECT_GE(d.sm, 70);
  EXPECT_GT(d.sm_count, 0);
  EXPECT_GE(d.smem_per_block_optin, 48 * 1024);
  EXPECT_GT(d.l2_bytes, 0);
  EXPECT_GT(d.mem_bandwidth, 1e11);
  EXPECT_GE(cuda::device_count(), 1);
  EXPECT_GE(cuda::driver_version(), 12000);
  std::cout << "device: " << d.name << " " << d.arch << ", " << d.sm_count << " SMs, "
            << d.mem_bandwidth / 1e12 << " TB/s, driver " << cuda::driver_version() << "\n";
}

TEST_F(RuntimeGpu, HandWrittenSpecsTwoSizesNoRecompile) {
  KILN_REQUIRE_DEVICE();
  Axpb a;
  DeviceInfo dev = cuda::query_device_info(0);
  KernelCache cache({dir_.string(), false});
  auto modules = std::make_shared<ModuleCache>(cuda::primary_context(0));
  std::vector<ExecutorKernel> ks;
  for (const KernelSpec& s : a.specs) ks.push_back({s, cache.get(s.source, s.name, dev.arch)});
  Executor ex(a.g, ks, modules, "");
  EXPECT_EQ(cache.stats().nvrtc_compiles, 2);
  EXPECT_EQ(modules->loaded_modules(), 2);
  EXPECT_GT(ex.constant_bytes(), 0);

  void* stream = cuda::stream_create();
  int64_t seed = 1;
  for (int64_t n : {1000, 77777, 1}) {
    HostTensor x = random_tensor(DType::F32, {n}, seed++);
    DeviceData dx = upload(x);
    DeviceData dy = alloc_poisoned(DType::F32, {n});
    Bindings b = ex.run({{"x", dx.t}}, {{"y", dy.t}}, stream, 0);
    EXPECT_EQ(b.at("N"), n);
    cuda::stream_synchronize(stream);
    HostTensor want = run_reference(*a.g, {{"x", x}}).at("y");
    EXPECT_TRUE(all_close(download(dy), want, 1e-6)) << "N=" << n;
    EXPECT_EQ(ex.arena(b)->peak, (n * 4 + 255) / 256 * 256);  // only t lives in the arena
  }
  cuda::stream_destroy(stream);
  EXPECT_EQ(cache.stats().nvrtc_compiles, 2);  // new N: no recompile, no reload
  EXPECT_EQ(modules->loaded_modules(), 2);
}

TEST_F(RuntimeGpu, CallerWorkspaceAndTiming) {
  KILN_REQUIRE_DEVICE();
  Axpb a;
  DeviceInfo dev = cuda::query_device_info(0);
  KernelCache cache({dir_.string(), false});
  std::vector<ExecutorKernel> ks;
  for (const KernelSpec& s : a.specs) ks.push_back({s, cache.get(s.source, s.name, dev.arch)});
  Executor ex(a.g, ks, std::make_shared<ModuleCache>(cuda::primary_context(0)), "");
  const int64_t n = 1 << 20;
  HostTensor x = random_tensor(DType::F32, {n}, 42);
  DeviceData dx = upload(x);
  DeviceData dy = alloc_poisoned(DType::F32, {n});
  cuda::DeviceBuffer ws(static_cast<size_t>(ex.arena({{"N", n}})->peak));
  cuda::memset_d8(ws.ptr(), 0xFF, ws.bytes());
  ex.run({{"x", dx.t}}, {{"y", dy.t}}, nullptr, ws.ptr());
  HostTensor want = run_reference(*a.g, {{"x", x}}).at("y");
  EXPECT_TRUE(all_close(download(dy), want, 1e-6));
  // The intermediate really went to the caller's workspace: t = 2x sits there.
  std::vector<float> t(16);
  cuda::memcpy_dtoh(t.data(), ws.ptr(), 64);
  std::vector<double> xv = x.to_f64();
  for (int i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(t[i], static_cast<float>(2 * xv[i]));

  // KILN_DUMP=launch prints every launch with its geometry and bindings.
  EnvConfig c;
  c.cache_dir = dir_.string();
  c.dump_launch = true;
  set_env_override(&c);
  ::testing::internal::CaptureStderr();
  ex.run({{"x", dx.t}}, {{"y", dy.t}}, nullptr, ws.ptr());
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("kiln: launch times2 grid [4096,1,1] block [256,1,1] smem 0 (N=1048576)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("kiln: launch plus_c"), std::string::npos) << log;
  c.dump_launch = false;
  set_env_override(&c);

  std::vector<double> ms = ex.time_kernels({{"x", dx.t}}, {{"y", dy.t}}, 2, 5, nullptr);
  ASSERT_EQ(ms.size(), 2u);
  for (double m : ms) {
    EXPECT_GT(m, 0.0);
    EXPECT_LT(m, 100.0);
  }
}

TEST_F(RuntimeGpu, RunErrorsAreLocatedUserErrors) {
  KILN_REQUIRE_DEVICE();
  Axpb a;
  DeviceInfo dev = cuda::query_device_info(0);
  KernelCache cache({dir_.string(), false});
  std::vector<ExecutorKernel> ks;
  for (const KernelSpec& s : a.specs) ks.push_back({s, cache.get(s.source, s.name, dev.arch)});
  Executor ex(a.g, ks, std::make_shared<ModuleCache>(cuda::primary_context(0)), "");
  DeviceData dx = upload(random_tensor(DType::F32, {100}, 3));
  DeviceData dy = alloc_poisoned(DType::F32, {100});
  DeviceData bad = alloc_poisoned(DType::F32, {99});
  std::string m = user_error([&] { ex.run({}, {{"y", dy.t}}, nullptr, 0); });
  EXPECT_NE(m.find("input 'x'"), std::string::npos) << m;
  EXPECT_NE(m.find("missing"), std::string::npos) << m;
  m = user_error([&] { ex.run({{"x", dx.t}, {"z", dx.t}}, {{"y", dy.t}}, nullptr, 0); });
  EXPECT_NE(m.find("'z' is not an input"), std::string::npos) << m;
  m = user_error([&] { ex.run({{"x", dx.t}}, {{"y", bad.t}}, nullptr, 0); });
  EXPECT_NE(m.find("output 'y': expected shape [100]"), std::string::npos) << m;
  EXPECT_NE(m.find("found [99]"), std::string::npos) << m;
  m = user_error([&] { ex.run({{"x", {0, {100}}}}, {{"y", dy.t}}, nullptr, 0); });
  EXPECT_NE(m.find("null"), std::string::npos) << m;
  m = user_error([&] { ex.run({{"x", {dx.t.ptr + 4, {99}}}}, {{"y", bad.t}}, nullptr, 0); });
  EXPECT_NE(m.find("aligned"), std::string::npos) << m;
  m = user_error([&] { ex.run({{"x", {dx.t.ptr, {10, 10}}}}, {{"y", dy.t}}, nullptr, 0); });
  EXPECT_NE(m.find("input 'x'"), std::string::npos) << m;
}

TEST_F(RuntimeGpu, EngineEndToEndTwoBatchSizes) {
  KILN_REQUIRE_DEVICE();
  Graph g("mlp_tail");
  Tensor x = g.input("x", DType::F32, {"N", 128});
  Tensor w = g.constant_random("w", TensorDesc{DType::F32, {128}, Layout::NCHW, {}}, "uniform", 0.5,
                               1.5, 7);
  Tensor b = g.constant_random("b", TensorDesc{DType::F32, {128}, Layout::NCHW, {}}, "normal", 0.0,
                               0.1, 8);
  Tensor h = g.add(g.mul(x, w), b);
  Tensor s = g.softmax(g.relu(h), -1);
  g.output(g.add(s, x));

  Engine e;
  ASSERT_TRUE(e.has_device());
  CompiledGraph cg = e.compile(g);
  EngineStats s0 = e.stats();
  EXPECT_EQ(s0.plans, 1);
  EXPECT_EQ(s0.nvrtc_compiles + s0.disk_cache_hits + s0.memory_cache_hits,
            static_cast<int64_t>(cg.kernels().size()));
  std::string out_name = g.tensor(g.outputs()[0]).name;
  for (int64_t n : {3, 517}) {
    HostTensor hx = random_tensor(DType::F32, {n, 128}, 100 + n);
    DeviceData dx = upload(hx);
    Bindings bind = cg.graph().bind({{"x", {n, 128}}});
    DeviceData dy = alloc_poisoned(DType::F32, cg.output_shapes(bind).at(out_name));
    cg.run({{"x", dx.t}}, {{out_name, dy.t}});
    HostTensor want = run_reference(g, {{"x", hx}}).at(out_name);
    EXPECT_TRUE(all_close(download(dy), want, 1e-5)) << "N=" << n;
    for (const KernelInfo& k : cg.kernels()) EXPECT_GT(k.bytes_moved, 0) << k.name;
  }
  EngineStats s1 = e.stats();
  EXPECT_EQ(s1.nvrtc_compiles, s0.nvrtc_compiles);  // a new N never recompiles
  EXPECT_EQ(s1.plans, 1);

  // A second compile of the same graph is served from the memory cache.
  CompiledGraph again = e.compile(g);
  EXPECT_EQ(e.stats().nvrtc_compiles, s0.nvrtc_compiles);
  for (const KernelInfo& k : again.kernels()) EXPECT_EQ(k.cache, "memory") << k.name;
}

// Hostile input row 5 on the device: bindings whose intermediate is larger than the device's free
// memory are refused before any allocation, with the graph, the bindings and the sizes.
TEST_F(RuntimeGpu, WorkspaceOverFreeDeviceMemoryIsALocatedError) {
  KILN_REQUIRE_DEVICE();
  Graph g("outer");
  Tensor a = g.input("a", DType::F32, {"N", 1});
  Tensor b = g.input("b", DType::F32, {1, "N"});
  Tensor h = g.relu(g.matmul(a, b));  // [N, N]: the intermediate in the workspace
  g.output(g.reduce("reduce_sum", h, {1}, true));
  Engine e;
  ASSERT_TRUE(e.has_device());
  CompiledGraph cg = e.compile(g);
  const int64_t n = 200000;  // the [N, N] f32 intermediate is 149 GiB, more than an H200 holds
  DeviceData da = upload(random_tensor(DType::F32, {n, 1}, 5));
  DeviceData db = upload(random_tensor(DType::F32, {1, n}, 6));
  std::string out_name = g.tensor(g.outputs()[0]).name;
  DeviceData dy = alloc_poisoned(DType::F32, {n, 1});
  std::string m = user_error([&] { cg.run({{"a", da.t}, {"b", db.t}}, {{out_name, dy.t}}); });
  EXPECT_NE(m.find("graph 'outer': the workspace"), std::string::npos) << m;
  EXPECT_NE(m.find("N=200000"), std::string::npos) << m;
  EXPECT_NE(m.find("of device memory, but the device has"), std::string::npos) << m;
  // The engine stays usable at a size that fits.
  DeviceData sa = upload(random_tensor(DType::F32, {64, 1}, 7));
  DeviceData sb = upload(random_tensor(DType::F32, {1, 64}, 8));
  DeviceData sy = alloc_poisoned(DType::F32, {64, 1});
  cg.run({{"a", sa.t}, {"b", sb.t}}, {{out_name, sy.t}});
  HostTensor want = run_reference(g, {{"a", download(sa)}, {"b", download(sb)}}).at(out_name);
  EXPECT_TRUE(all_close(download(sy), want, 1e-4));
}

// A run reuses the launch plan of its input shapes (runtime/launch_plan.cpp): arguments are
// evaluated once, a later run only adds its buffers' addresses, and TMA descriptors over other
// addresses than the planned ones are encoded again. Other buffers, other shapes and back, and a
// caller workspace (maps over arena tensors move) must all match the reference.
TEST_F(RuntimeGpu, LaunchPlansServeOtherBuffersShapesAndWorkspaces) {
  KILN_REQUIRE_DEVICE();
  Graph g("plan_reuse");
  Tensor x = g.input("x", DType::F16, {"N", 64, 16, 16}, Layout::NHWC);
  Tensor w1 = g.constant_random("w1", TensorDesc{DType::F16, {128, 64, 1, 1}, Layout::NHWC, {}},
                                "normal", 0.0, 0.1, 7);
  Tensor b1 = g.constant_random("b1", TensorDesc{DType::F16, {128}, Layout::NCHW, {}}, "normal",
                                0.0, 0.1, 8);
  Tensor w2 = g.constant_random("w2", TensorDesc{DType::F16, {64, 128, 3, 3}, Layout::NHWC, {}},
                                "normal", 0.0, 0.05, 9);
  Conv2dOptions pad1;
  pad1.padding = {1, 1};
  Tensor y = g.add(g.conv2d(g.relu(g.conv2d(x, w1, b1)), w2, {}, pad1), x);
  g.output(y);
  const std::string yn = g.tensor(y.id).name;
  Engine e;
  CompiledGraph cg = e.compile(g);
  bool tma = false;
  for (const KernelInfo& k : cg.kernels()) tma |= k.name.find("tma") != std::string::npos;
  EXPECT_TRUE(tma) << "no TMA kernel: the re-encoding path is not exercised";
  struct Case {
    int64_t n;
    bool workspace;
  };
  uint64_t seed = 40;
  for (Case c : {Case{2, false}, Case{2, false}, Case{3, false}, Case{2, true}, Case{2, false}}) {
    HostTensor hx = random_tensor(DType::F16, {c.n, 64, 16, 16}, ++seed);
    DeviceData dx = upload(hx, Layout::NHWC);  // fresh buffers at every run
    DeviceData dy = alloc_poisoned(DType::F16, {c.n, 64, 16, 16}, Layout::NHWC);
    Bindings b = g.bind({{"x", dx.t.shape}});
    cuda::DeviceBuffer ws(static_cast<size_t>(std::max<int64_t>(cg.workspace_size(b), 256)));
    cg.run({{"x", dx.t}}, {{yn, dy.t}}, nullptr, c.workspace ? ws.ptr() : 0);
    HostTensor want = run_reference(g, {{"x", hx}}).at(yn);
    EXPECT_TRUE(all_close(download(dy), want, 1e-2))
        << "N=" << c.n << (c.workspace ? " in a caller workspace" : "");
  }
}
