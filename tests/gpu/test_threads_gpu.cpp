// Thread safety: one CompiledGraph run from 8 threads x 1000 runs on 8 streams with per-thread
// workspaces, inputs and outputs (every thread's final outputs and a sample of its runs checked
// against the CPU reference, computed once per input set); and compiles from several threads at
// once that share one Engine compile each kernel once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

#include "kiln/engine.hpp"
#include "kiln/error.hpp"
#include "kiln/io.hpp"
#include "kiln/reference.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/test_paths.hpp"

using namespace kiln;
using namespace kiln::gputest;
namespace fs = std::filesystem;

namespace {

// Several kernels (a norm, pointwise, a reduction-style softmax) over a symbolic N.
Graph threads_graph() {
  Graph g("threads");
  Tensor x = g.input("x", DType::F32, {"N", 512});
  Tensor w = g.constant_random("w", TensorDesc{DType::F32, {512}, Layout::NCHW, {}}, "uniform", 0.5,
                               1.5, 3);
  Tensor h = g.gelu(g.mul(g.layernorm(x), w), GeluApprox::None);
  Tensor s = g.softmax(g.add(h, x));
  g.output(g.add_node("mul", {s, g.sigmoid(x)}, {}, "y_mul", {"y"})[0]);
  return g;
}

fs::path temp_cache(const std::string& tag) {
  fs::path d = fs::temp_directory_path() / ("kiln_" + tag + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(ThreadsGpu, OneCompiledGraphFromEightThreadsOnEightStreams) {
  KILN_REQUIRE_DEVICE();
  constexpr int kThreads = 8, kRuns = 1000, kSampleEvery = 97;
  const int64_t n = 64;
  Graph g = threads_graph();
  Engine engine;
  CompiledGraph cg = engine.compile(g);
  Bindings b = g.bind({{"x", {n, 512}}});
  int64_t ws_bytes = cg.workspace_size(b);
  std::vector<int64_t> out_shape = cg.output_shapes(b).at("y");

  struct PerThread {
    HostTensor x, want;
    DeviceData dx, dy;
    cuda::DeviceBuffer ws;
    void* stream = nullptr;
    std::string error;
    int sampled = 0;
  };
  std::vector<PerThread> th(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    th[t].x = random_tensor(DType::F32, {n, 512}, 100 + t, -2, 2);
    th[t].want = run_reference(g, {{"x", th[t].x}}).at("y");  // once per input set
    th[t].dx = upload(th[t].x);
    th[t].dy = alloc_poisoned(DType::F32, out_shape);
    th[t].ws = cuda::DeviceBuffer(static_cast<size_t>(std::max<int64_t>(ws_bytes, 16)));
    th[t].stream = cuda::stream_create();
  }
  std::atomic<int> go{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      PerThread& p = th[t];
      while (go.load() == 0) std::this_thread::yield();
      try {
        std::map<std::string, DeviceTensor> in{{"x", p.dx.t}}, out{{"y", p.dy.t}};
        for (int r = 0; r < kRuns; ++r) {
          bool sample = r % kSampleEvery == 0;
          if (sample) cuda::memset_d8_async(p.dy.t.ptr, 0xFF, p.dy.buf.bytes(), p.stream);
          cg.run(in, out, p.stream, ws_bytes > 0 ? p.ws.ptr() : 0);
          if (sample) {
            cuda::stream_synchronize(p.stream);
            HostTensor got = HostTensor::zeros(DType::F32, out_shape);
            cuda::memcpy_dtoh(got.data.data(), p.dy.t.ptr, got.data.size());
            ::testing::AssertionResult ok = all_close(got, p.want, 1e-5);
            if (!ok && p.error.empty()) p.error = "run " + std::to_string(r) + ": " + ok.message();
            ++p.sampled;
          }
        }
        cuda::stream_synchronize(p.stream);
      } catch (const std::exception& e) {
        p.error = e.what();
      }
    });
  }
  go.store(1);
  for (std::thread& t : pool) t.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(th[t].error, "") << "thread " << t;
    EXPECT_GE(th[t].sampled, kRuns / kSampleEvery);
    // The final outputs of every thread: its own inputs' answer (no cross-talk between threads).
    EXPECT_TRUE(all_close(download(th[t].dy), th[t].want, 1e-5)) << "thread " << t;
    cuda::stream_destroy(th[t].stream);
  }
}

TEST(ThreadsGpu, ConcurrentCompilesShareTheCacheAndCompileEachKernelOnce) {
  // Kernels load only with a device; the compile-once property holds either way.
  fs::path dir = temp_cache("threads_compile");
  EngineOptions o;
  o.cache_dir = dir.string();
  o.disk_cache = false;
  o.load_kernels = cuda::driver_available();
  Engine engine(o);
  std::vector<Graph> graphs = {threads_graph(),
                               load_graph_file(std::string(kiln::testing::source_dir()) +
                                               "/examples/graphs/add_layernorm_gelu.json"),
                               load_graph_file(std::string(kiln::testing::source_dir()) +
                                               "/examples/graphs/transformer_mlp.json")};
  constexpr int kThreads = 6;
  std::vector<std::vector<KernelInfo>> infos(kThreads);
  std::vector<std::string> errors(kThreads);
  std::atomic<int> go{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      while (go.load() == 0) std::this_thread::yield();
      try {
        // Every thread compiles every graph, starting at a different one.
        for (size_t k = 0; k < graphs.size(); ++k) {
          CompiledGraph cg = engine.compile(graphs[(t + k) % graphs.size()]);
          for (const KernelInfo& i : cg.kernels()) infos[t].push_back(i);
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  go.store(1);
  for (std::thread& t : pool) t.join();
  std::set<std::string> distinct;
  int64_t nvrtc_reported = 0;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[t], "") << "thread " << t;
    for (const KernelInfo& i : infos[t]) {
      distinct.insert(i.name);
      nvrtc_reported += i.cache == "nvrtc";
    }
  }
  EngineStats st = engine.stats();
  EXPECT_EQ(st.nvrtc_compiles, static_cast<int64_t>(distinct.size()))
      << "each distinct kernel compiles once across " << kThreads << " threads";
  EXPECT_EQ(nvrtc_reported, static_cast<int64_t>(distinct.size()));
  EXPECT_EQ(st.disk_cache_hits, 0);
  fs::remove_all(dir);
}

}  // namespace
