// Host overhead of CompiledGraph::run at dynamic sizes: the ResNet-50 bottleneck (N) and the
// transformer MLP (seq) are compiled once, then run at N = 1..64, 128, 256. Only the host side of
// run() is timed (wall time of the call, no synchronization inside the timed region): the first
// run at each never-seen size (binding, arena planning, argument evaluation, launches) and the
// median of repeated runs at that size. Target: <= 50 us at a never-seen size.
//
//   bench_host_overhead [--repeat R] [GRAPH.json ...]
//
// Default graphs: examples/graphs/resnet50_bottleneck.json and transformer_mlp.json (run from the
// repository root). Each graph must have one input whose leading dim is its only symbol.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/engine.hpp"
#include "kiln/error.hpp"
#include "kiln/io.hpp"
#include "runtime/cuda_driver.hpp"

using namespace kiln;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Row {
  int64_t n = 0;
  double first_us = 0, repeat_us = 0, gpu_ms = 0;
};

int bench_graph(const std::string& file, int repeat) {
  Graph g = load_graph_file(file);
  if (g.inputs().size() != 1 || g.symbols().size() != 1) {
    std::fprintf(stderr, "%s: expected one input and one symbol\n", file.c_str());
    return 2;
  }
  const TensorInfo& in = g.tensor(g.inputs()[0]);
  std::string sym = g.symbols()[0];
  const int64_t kMax = 256;
  Bindings bmax{{sym, kMax + 1}};  // +1: the warm-up size, never timed

  Engine e;
  auto t0 = std::chrono::steady_clock::now();
  CompiledGraph cg = e.compile(g);
  double compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  // Buffers for the largest size; a run at n uses their prefix. Inputs are zeros: host time
  // does not depend on the values.
  auto bytes_of = [&](const TensorInfo& t, const Bindings& b) {
    int64_t n = 1;
    for (int64_t d : eval_shape(t.desc.shape, b)) n *= d;
    return static_cast<size_t>(n) * dtype_size(t.desc.dtype);
  };
  cuda::DeviceBuffer x(bytes_of(in, bmax));
  cuda::memset_d8(x.ptr(), 0, x.bytes());
  std::vector<cuda::DeviceBuffer> outs;
  for (int id : g.outputs()) outs.emplace_back(bytes_of(g.tensor(id), bmax));

  auto io = [&](int64_t n) {
    Bindings b{{sym, n}};
    std::map<std::string, DeviceTensor> i{{in.name, {x.ptr(), eval_shape(in.desc.shape, b)}}};
    std::map<std::string, DeviceTensor> o;
    for (size_t k = 0; k < g.outputs().size(); ++k) {
      const TensorInfo& t = g.tensor(g.outputs()[k]);
      o[t.name] = {outs[k].ptr(), eval_shape(t.desc.shape, b)};
    }
    return std::make_pair(i, o);
  };
  auto timed_run = [&](const std::map<std::string, DeviceTensor>& i,
                       const std::map<std::string, DeviceTensor>& o) {
    auto a = std::chrono::steady_clock::now();
    cg.run(i, o);
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count();
    cuda::ctx_synchronize();
    return us;
  };

  // Warm-up at the largest arena (module loads, first-touch costs): later sizes never grow it.
  {
    auto [i, o] = io(kMax + 1);
    for (int r = 0; r < 3; ++r) timed_run(i, o);
  }

  std::vector<int64_t> sizes;
  for (int64_t n = 1; n <= 64; ++n) sizes.push_back(n);
  sizes.push_back(128);
  sizes.push_back(256);
  std::vector<Row> rows;
  for (int64_t n : sizes) {
    auto [i, o] = io(n);
    Row r;
    r.n = n;
    r.first_us = timed_run(i, o);
    std::vector<double> rep;
    for (int k = 0; k < repeat; ++k) rep.push_back(timed_run(i, o));
    r.repeat_us = median(rep);
    auto a = std::chrono::steady_clock::now();
    cg.run(i, o);
    cuda::ctx_synchronize();
    r.gpu_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
    rows.push_back(r);
  }

  EngineStats st = e.stats();
  fmt::print("{} ({} kernels, {} {}; compile {:.0f} ms: {} nvrtc, {} disk, {} memory)\n", file,
             cg.kernels().size(), e.arch(), sym, compile_ms, st.nvrtc_compiles, st.disk_cache_hits,
             st.memory_cache_hits);
  fmt::print("{:>6} {:>16} {:>16} {:>14}\n", sym, "first run us", "repeat us (med)", "run+sync ms");
  std::vector<double> first, rep;
  for (const Row& r : rows) {
    fmt::print("{:>6} {:>16.1f} {:>16.1f} {:>14.3f}\n", r.n, r.first_us, r.repeat_us, r.gpu_ms);
    first.push_back(r.first_us);
    rep.push_back(r.repeat_us);
  }
  double mf = median(first), mr = median(rep);
  fmt::print(
      "{}: host time of run(): median {:.1f} us at a never-seen {} (max {:.1f}), {:.1f} us "
      "repeated; target <= 50 us never-seen: {}; nvrtc compiles after compile(): {}\n\n",
      g.name(), mf, sym, *std::max_element(first.begin(), first.end()), mr,
      mf <= 50 ? "met" : "NOT met", e.stats().nvrtc_compiles - st.nvrtc_compiles);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 20;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr, "usage: bench_host_overhead [--repeat R] [GRAPH.json ...]\n");
      return 2;
    } else {
      files.push_back(a);
    }
  }
  if (files.empty())
    files = {"examples/graphs/resnet50_bottleneck.json", "examples/graphs/transformer_mlp.json"};
  try {
    std::string why;
    if (!cuda::driver_available(&why)) {
      std::fprintf(stderr, "bench_host_overhead: no CUDA device: %s\n", why.c_str());
      return 1;
    }
    for (const std::string& f : files)
      if (int rc = bench_graph(f, repeat)) return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_host_overhead: %s\n", e.what());
    return 1;
  }
  return 0;
}
