// Host overhead per run of the ResNet-50 bottleneck example at N=1: the wall time of the run()
// call itself (the GPU work is queued, not waited for), median over many calls, for plain runs and
// for CUDA-graph replays (EngineOptions::cuda_graphs). Target: replay <= 10 us.
//
//   bench_cuda_graph [GRAPH.json] [iters]     (default examples/graphs/resnet50_bottleneck.json)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "engine/base/random.hpp"
#include "kiln/engine.hpp"
#include "kiln/error.hpp"
#include "kiln/io.hpp"
#include "runtime/cuda_driver.hpp"

using namespace kiln;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Median host microseconds per run() call; synchronizes every 16 calls (untimed) so the launch
// queue never fills and blocks a call.
double host_us(const CompiledGraph& cg, const std::map<std::string, DeviceTensor>& in,
               const std::map<std::string, DeviceTensor>& out, void* stream, int iters) {
  for (int i = 0; i < 50; ++i) cg.run(in, out, stream);  // warm-up (and the capture)
  cuda::stream_synchronize(stream);
  std::vector<double> t;
  t.reserve(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    cg.run(in, out, stream);
    auto t1 = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    if (i % 16 == 15) cuda::stream_synchronize(stream);
  }
  cuda::stream_synchronize(stream);
  return median(t);
}

}  // namespace

int main(int argc, char** argv) try {
  std::string file = argc > 1 ? argv[1] : "examples/graphs/resnet50_bottleneck.json";
  int iters = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5000;
  std::string why;
  if (!cuda::driver_available(&why)) {
    fmt::print("bench_cuda_graph: no CUDA device ({}); nothing to measure\n", why);
    return 0;
  }
  Graph g = load_graph_file(file);
  Engine plain_engine;
  EngineOptions o;
  o.cuda_graphs = true;
  Engine graph_engine(o);
  CompiledGraph plain = plain_engine.compile(g);
  CompiledGraph graphed = graph_engine.compile(g);

  // Inputs with every symbol = 1 (N=1), random values in the declared dtype.
  std::map<std::string, std::vector<int64_t>> shapes;
  Bindings ones;
  for (const std::string& s : g.symbols()) ones[s] = 1;
  std::vector<cuda::DeviceBuffer> bufs;
  std::map<std::string, DeviceTensor> in, out;
  for (int id : g.inputs()) {
    const TensorInfo& t = g.tensor(id);
    std::vector<int64_t> shape = eval_shape(t.desc.shape, ones);
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    HostTensor h = HostTensor::from_f64(t.desc.dtype, shape, random_values(true, 0, 1, 1, n));
    bufs.emplace_back(std::max<size_t>(h.data.size(), 16));
    cuda::memcpy_htod(bufs.back().ptr(), h.data.data(), h.data.size());
    in[t.name] = {bufs.back().ptr(), shape};
    shapes[t.name] = shape;
  }
  Bindings b = g.bind(shapes);
  for (const auto& [name, shape] : plain.output_shapes(b)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    bufs.emplace_back(std::max<size_t>(static_cast<size_t>(n) * 4, 16));
    out[name] = {bufs.back().ptr(), shape};
  }
  void* stream = cuda::stream_create();
  double plain_us = host_us(plain, in, out, stream, iters);
  double graph_us = host_us(graphed, in, out, stream, iters);
  cuda::stream_destroy(stream);
  fmt::print("graph {} ({} kernels), {} runs each, host time per run() call (median):\n", file,
             plain.kernels().size(), iters);
  fmt::print("  plain launches      {:8.2f} us\n", plain_us);
  fmt::print("  CUDA graph replay   {:8.2f} us   ({:.1f}x less; target <= 10 us: {})\n", graph_us,
             plain_us / graph_us, graph_us <= 10.0 ? "met" : "NOT met");
  return 0;
} catch (const Error& e) {
  fmt::print(stderr, "bench_cuda_graph: {}\n", e.what());
  return e.kind() == ErrorKind::User ? 2 : 1;
}
