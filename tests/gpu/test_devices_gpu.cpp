// Devices and contexts on one GPU (issue 23): device 0 chosen by ordinal; an ordinal that does
// not exist is a user error listing the devices (Engine, C ABI and CLI); a context the test
// creates stays current across every C ABI call; two engines on one device from two threads; a
// thread's own current context (or none) survives kiln; with use_current_context the engine's
// memory lives in the caller's context.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "kiln/device.hpp"
#include "kiln/engine.hpp"
#include "kiln/error.hpp"
#include "kiln/io.hpp"
#include "kiln/kiln.h"
#include "kiln/reference.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/gpu/raw_driver.hpp"
#include "tests/test_paths.hpp"

using namespace kiln;
using namespace kiln::gputest;

namespace {

// Constants (weights, bias, scale) and, without fusion, intermediates in the workspace: a kernel
// that runs in another context than the memory's faults, so a right answer proves the context.
Graph devices_graph() {
  Graph g("devices");
  Tensor x = g.input("x", DType::F32, {"N", 64});
  Tensor w = g.constant_random("w", TensorDesc{DType::F32, {64, 32}, Layout::NCHW, {}}, "normal",
                               0.0, 0.2, 5);
  Tensor b = g.constant_random("b", TensorDesc{DType::F32, {32}, Layout::NCHW, {}}, "uniform", -0.5,
                               0.5, 6);
  Tensor h = g.relu(g.matmul(x, w, b));
  g.output(g.add_node("exp", {g.layernorm(h)}, {}, "y_exp", {"y"})[0]);
  return g;
}

constexpr const char* kGraphJson = R"({"kiln": 1, "name": "cabi_devices",
  "inputs": {"x": {"dtype": "f32", "shape": ["N", 64]}},
  "nodes": [{"op": "relu", "inputs": ["x"], "outputs": ["h"]},
            {"op": "layernorm", "inputs": ["h"], "outputs": ["n"]},
            {"op": "exp", "inputs": ["n"], "outputs": ["y"]}],
  "outputs": ["y"]})";

HostTensor reference_y(const Graph& g, const HostTensor& x) {
  return run_reference(g, {{"x", x}}).at("y");
}

// Runs `cg` on `x` with caller buffers in the current kiln scope's context (device 0 outside
// any) and returns y.
HostTensor run_once(const CompiledGraph& cg, const HostTensor& x, void* stream = nullptr,
                    bool own_workspace = false) {
  DeviceData dx = upload(x);
  Bindings b = cg.graph().bind({{"x", x.shape}});
  DeviceData dy = alloc_poisoned(DType::F32, cg.output_shapes(b).at("y"));
  cuda::DeviceBuffer ws;
  if (own_workspace) ws = cuda::DeviceBuffer(std::max<int64_t>(cg.workspace_size(b), 256));
  cg.run({{"x", dx.t}}, {{"y", dy.t}}, stream, ws.ptr());
  cuda::stream_synchronize(stream);
  return download(dy);
}

TEST(DevicesGpu, DeviceZeroByOrdinal) {
  KILN_REQUIRE_DEVICE();
  EngineOptions o;
  o.device = 0;
  Engine e(o);
  EXPECT_TRUE(e.has_device());
  EXPECT_EQ(e.device(), 0);
  Graph g = devices_graph();
  CompiledGraph cg = e.compile(g);
  HostTensor x = random_tensor(DType::F32, {7, 64}, 11);
  EXPECT_TRUE(all_close(run_once(cg, x), reference_y(g, x), 1e-4));
  EXPECT_GE(device_count(), 1);
  std::vector<DeviceListing> ds = list_devices();
  ASSERT_EQ(static_cast<int>(ds.size()), device_count());
  EXPECT_EQ(ds[0].facts.name, query_device(0).name);
  EXPECT_GT(ds[0].total_memory, uint64_t{1} << 30);
  EXPECT_FALSE(ds[0].pci_bus_id.empty());
  EXPECT_TRUE(ds[0].mig == "instance" || ds[0].mig == "enabled" || ds[0].mig == "disabled" ||
              ds[0].mig == "unknown")
      << ds[0].mig;
}

TEST(DevicesGpu, NonexistentOrdinalIsAUserErrorListingTheDevices) {
  KILN_REQUIRE_DEVICE();
  const int n = device_count();
  const std::string first = query_device(0).name;
  EngineOptions o;
  o.device = n;
  try {
    Engine e(o);
    ADD_FAILURE() << "device " << n << " accepted";
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::User) << err.what();
    const std::string m = err.what();
    EXPECT_NE(m.find("EngineOptions.device"), std::string::npos) << m;
    EXPECT_NE(m.find("does not exist"), std::string::npos) << m;
    EXPECT_NE(m.find("0: " + first), std::string::npos) << m;
  }
  EXPECT_THROW(DeviceScope s(n), Error);
  uint64_t p = 0;
  EXPECT_EQ(kiln_device_alloc_on(n, 256, &p), KILN_ERROR_USER);
  EXPECT_NE(std::string(kiln_last_error()).find("0: " + first), std::string::npos)
      << kiln_last_error();
  // The CLI: exit 2, one line naming the devices.
  const std::string cmd =
      kiln::testing::cli_path() + " run " + kiln::testing::source_dir() +
      "/examples/graphs/add_layernorm_gelu.json --shape rows=2 --device gpu:" + std::to_string(n) +
      " >/dev/null 2>" + ::testing::TempDir() + "/devices_err.txt";
  int st = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 2) << cmd;
  std::string err;
  if (FILE* f = std::fopen((::testing::TempDir() + "/devices_err.txt").c_str(), "r")) {
    char buf[4096];
    size_t got = std::fread(buf, 1, sizeof(buf), f);
    err.assign(buf, got);
    std::fclose(f);
  }
  EXPECT_NE(err.find("there is no CUDA device " + std::to_string(n)), std::string::npos) << err;
  EXPECT_NE(err.find("gpu:0 (" + first), std::string::npos) << err;
}

// Every C ABI call, each checked to leave the test's own context current.
TEST(DevicesGpu, CallersContextIsCurrentBeforeAndAfterEveryCApiCall) {
  KILN_REQUIRE_DEVICE();
  const RawDriver& d = RawDriver::get();
  OwnContext mine;
  ASSERT_EQ(d.current(), mine.get());
  int calls = 0;
  auto after = [&](kiln_status s, const char* what) {
    ++calls;
    EXPECT_EQ(s, KILN_OK) << what << ": " << kiln_last_error();
    EXPECT_EQ(d.current(), mine.get()) << what << " changed the current context";
  };
  int32_t n = 0;
  after(kiln_device_count(&n), "kiln_device_count");
  EXPECT_GE(n, 1);
  kiln_graph g = nullptr;
  after(kiln_graph_load_string(kGraphJson, nullptr, &g), "kiln_graph_load_string");
  kiln_engine_options o;
  kiln_engine_options_default(&o);
  o.device = 0;
  kiln_engine e = nullptr;
  after(kiln_engine_create(&o, &e), "kiln_engine_create");
  int32_t dev = -1;
  after(kiln_engine_device(e, &dev), "kiln_engine_device");
  EXPECT_EQ(dev, 0);
  kiln_compiled c = nullptr;
  after(kiln_compile(e, g, &c), "kiln_compile");

  HostTensor x = random_tensor(DType::F32, {5, 64}, 21, -2, 2);
  const uint64_t bytes = x.data.size();
  uint64_t dx = 0, dy = 0, dx1 = 0, ws = 0;
  after(kiln_device_alloc(bytes, &dx), "kiln_device_alloc");
  after(kiln_device_alloc_on(0, bytes, &dy), "kiln_device_alloc_on");
  after(kiln_memcpy_htod(dx, x.data.data(), bytes), "kiln_memcpy_htod");
  kiln_tensor in{"x", dx, 2, {5, 64}};
  kiln_tensor out{"y", dy, 2, {5, 64}};
  uint64_t ws_bytes = 0;
  after(kiln_workspace_size(c, &in, 1, nullptr, nullptr, 0, &ws_bytes), "kiln_workspace_size");
  after(kiln_device_alloc_on(0, ws_bytes + 256, &ws), "kiln_device_alloc_on (workspace)");
  std::vector<float> poison(5 * 64, std::nanf(""));
  after(kiln_memcpy_htod_on(0, dy, poison.data(), bytes), "kiln_memcpy_htod_on");
  after(kiln_run(c, &in, 1, &out, 1, nullptr, ws), "kiln_run");
  after(kiln_stream_synchronize(nullptr), "kiln_stream_synchronize");
  after(kiln_stream_synchronize_on(0, nullptr), "kiln_stream_synchronize_on");
  after(kiln_device_synchronize(0), "kiln_device_synchronize");
  HostTensor y = HostTensor::zeros(DType::F32, {5, 64});
  after(kiln_memcpy_dtoh(y.data.data(), dy, bytes), "kiln_memcpy_dtoh");
  Graph ref = load_graph_string(kGraphJson, "<test>", ".");
  EXPECT_TRUE(all_close(y, reference_y(ref, x), 1e-4));
  // The same run in the test's own context (KILN_DEVICE_CURRENT_CONTEXT buffers are its own),
  // launched by an engine in device 0's primary context: only the helpers use `mine`.
  after(kiln_device_alloc_on(KILN_DEVICE_CURRENT_CONTEXT, bytes, &dx1), "alloc current");
  EXPECT_EQ(d.owner(dx1), mine.get());
  after(kiln_memcpy_htod_on(KILN_DEVICE_CURRENT_CONTEXT, dx1, x.data.data(), bytes),
        "htod current");
  HostTensor back = HostTensor::zeros(DType::F32, {5, 64});
  after(kiln_memcpy_dtoh_on(KILN_DEVICE_CURRENT_CONTEXT, back.data.data(), dx1, bytes),
        "dtoh current");
  EXPECT_EQ(back.data, x.data);
  kiln_stats st;
  after(kiln_engine_stats(e, &st), "kiln_engine_stats");
  for (uint64_t p : {dx, dy, ws, dx1}) {
    kiln_device_free(p);
    EXPECT_EQ(d.current(), mine.get()) << "kiln_device_free";
  }
  kiln_compiled_destroy(c);
  EXPECT_EQ(d.current(), mine.get()) << "kiln_compiled_destroy";
  kiln_engine_destroy(e);
  EXPECT_EQ(d.current(), mine.get()) << "kiln_engine_destroy";
  kiln_graph_destroy(g);
  EXPECT_GE(calls, 20);
}

TEST(DevicesGpu, TwoEnginesOnOneDeviceFromTwoThreads) {
  KILN_REQUIRE_DEVICE();
  Graph g = devices_graph();
  EngineOptions o;
  o.device = 0;
  Engine a(o), b(o);
  CompiledGraph ca = a.compile(g), cb = b.compile(g);
  HostTensor x = random_tensor(DType::F32, {33, 64}, 31, -2, 2);
  HostTensor want = reference_y(g, x);
  HostTensor ya, yb;
  auto body = [&](const CompiledGraph* cg, HostTensor* y) {
    void* s = cuda::stream_create();
    for (int i = 0; i < 50; ++i) *y = run_once(*cg, x, s, /*own_workspace=*/true);
    cuda::stream_destroy(s);
  };
  std::thread ta(body, &ca, &ya), tb(body, &cb, &yb);
  ta.join();
  tb.join();
  EXPECT_TRUE(all_close(ya, want, 1e-4));
  EXPECT_EQ(ya.data, yb.data);  // the same kernels on the same device: identical bytes
}

// A thread with its own current context keeps it through compiles and runs, and a thread with
// none has none afterwards: kiln pushes its context and pops it.
TEST(DevicesGpu, ThreadsKeepTheirCurrentContext) {
  KILN_REQUIRE_DEVICE();
  const RawDriver& d = RawDriver::get();
  Graph g = devices_graph();
  Engine e;  // device 0's primary context
  CompiledGraph cg = e.compile(g);
  HostTensor x = random_tensor(DType::F32, {9, 64}, 41, -2, 2);
  HostTensor want = reference_y(g, x);
  std::string own_result, none_result;
  std::thread own([&] {
    OwnContext mine;
    HostTensor y = run_once(cg, x);
    CompiledGraph again = e.compile(g);  // a graph cache hit, then a fresh compile
    EngineOptions u;
    u.fusion = false;
    Engine other(u);
    CompiledGraph unfused = other.compile(g);
    HostTensor y2 = run_once(unfused, x);
    if (d.current() != mine.get()) own_result = "the thread's own context was replaced";
    if (!all_close(y, want, 1e-4) || !all_close(y2, want, 1e-4)) own_result += " wrong result";
  });
  own.join();
  std::thread none([&] {
    if (d.current() != nullptr) {
      none_result = "a fresh thread has a current context";
      return;
    }
    HostTensor y = run_once(cg, x);
    if (d.current() != nullptr) none_result = "kiln left a context current on the thread";
    if (!all_close(y, want, 1e-4)) none_result += " wrong result";
  });
  none.join();
  EXPECT_EQ(own_result, "");
  EXPECT_EQ(none_result, "");
}

// use_current_context: the engine's constants, workspace and modules are the caller's context's
// (the caller's buffers are too: a launch in another context would fault on them).
TEST(DevicesGpu, UseCurrentContextAllocatesInTheCallersContext) {
  KILN_REQUIRE_DEVICE();
  const RawDriver& d = RawDriver::get();
  OwnContext mine;
  unsigned flags = 0;
  int primary_before = 0, primary_after = 0;
  d.primary_state(0, &flags, &primary_before);
  Graph g = devices_graph();
  HostTensor x = random_tensor(DType::F32, {6, 64}, 51, -2, 2);
  {
    EngineOptions o;
    o.use_current_context = true;
    o.fusion = false;  // intermediates in the internal arena
    Engine e(o);
    EXPECT_EQ(e.device(), 0);
    CompiledGraph cg = e.compile(g);
    const std::vector<int64_t> y_shape{6, 32};  // y = layernorm(relu(x w + b)): [N, 32]
    HostTensor y = HostTensor::zeros(DType::F32, y_shape);
    uint64_t dx = 0, dy = 0;
    ASSERT_EQ(kiln_device_alloc_on(KILN_DEVICE_CURRENT_CONTEXT, x.data.size(), &dx), KILN_OK);
    ASSERT_EQ(kiln_device_alloc_on(KILN_DEVICE_CURRENT_CONTEXT, y.data.size(), &dy), KILN_OK);
    EXPECT_EQ(d.owner(dx), mine.get());
    ASSERT_EQ(kiln_memcpy_htod_on(KILN_DEVICE_CURRENT_CONTEXT, dx, x.data.data(), x.data.size()),
              KILN_OK);
    cg.run({{"x", {dx, x.shape}}}, {{"y", {dy, y_shape}}}, nullptr, 0);  // internal arena
    ASSERT_EQ(kiln_memcpy_dtoh_on(KILN_DEVICE_CURRENT_CONTEXT, y.data.data(), dy, y.data.size()),
              KILN_OK)
        << kiln_last_error();
    EXPECT_TRUE(all_close(y, reference_y(g, x), 1e-4));
    EXPECT_EQ(d.current(), mine.get());
    kiln_device_free(dx);
    kiln_device_free(dy);
  }
  d.primary_state(0, &flags, &primary_after);
  // When no earlier test made device 0's primary context, this one must not have either.
  if (!primary_before) EXPECT_EQ(primary_after, 0) << "the engine used the primary context";
  EXPECT_EQ(d.current(), mine.get());
}

TEST(DevicesGpu, UseCurrentContextWithoutOneIsAUserError) {
  KILN_REQUIRE_DEVICE();
  std::string msg;
  std::thread t([&] {
    EngineOptions o;
    o.use_current_context = true;
    try {
      Engine e(o);
      msg = "accepted";
    } catch (const Error& err) {
      msg = err.kind() == ErrorKind::User ? err.what() : "not a user error";
    }
  });
  t.join();
  EXPECT_NE(msg.find("no CUDA context is current"), std::string::npos) << msg;
}

}  // namespace
