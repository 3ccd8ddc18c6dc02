// Embedding kiln through its C++ API: a graph made with the builder, an Engine, a CompiledGraph
// run on device buffers when a GPU is there (and checked against the CPU reference), else the CPU
// reference alone.
//
//   embed_cpp [N]        (default N = 4)
//
// Prints "OUTPUT y shape [N,256] sum S abs A first v0 v1 v2 v3" like embed_c.
#include <kiln/kiln.h>  // device memory helpers (kiln_device_alloc...), so no CUDA headers needed
#include <kiln/engine.hpp>
#include <kiln/error.hpp>
#include <kiln/graph.hpp>
#include <kiln/reference.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// The example graph: y = gelu(layernorm(x) * w) + x over rows of 256, with seeded constants.
kiln::Graph make_graph() {
  using namespace kiln;
  Graph g("embed_cpp");
  Tensor x = g.input("x", DType::F32, {"N", 256});
  Tensor w = g.constant_random("w", TensorDesc{DType::F32, {256}, Layout::NCHW, {}}, "uniform", 0.5,
                               1.5, 7);
  Tensor h = g.mul(g.layernorm(x), w);
  g.output(g.add_node("add", {g.gelu(h, GeluApprox::None), x}, {}, "residual", {"y"})[0]);
  return g;
}

float input_value(size_t i) {
  return static_cast<float>(static_cast<int>((i * 7) % 17) - 8) / 8.0f;
}

void print_output(const std::string& name, const std::vector<double>& v,
                  const std::vector<int64_t>& shape) {
  double sum = 0, abs_sum = 0;
  for (double x : v) {
    sum += x;
    abs_sum += std::fabs(x);
  }
  std::printf("OUTPUT %s shape [", name.c_str());
  for (size_t k = 0; k < shape.size(); ++k)
    std::printf("%s%lld", k ? "," : "", static_cast<long long>(shape[k]));
  std::printf("] sum %.6f abs %.6f first", sum, abs_sum);
  for (size_t i = 0; i < v.size() && i < 4; ++i) std::printf(" %.5f", v[i]);
  std::printf("\n");
}

void check(kiln_status s, const char* what) {
  if (s != KILN_OK) throw std::runtime_error(std::string(what) + ": " + kiln_last_error());
}

}  // namespace

int main(int argc, char** argv) try {
  int64_t n = argc > 1 ? std::atoll(argv[1]) : 4;
  kiln::Graph g = make_graph();
  const std::string out_name = g.tensor(g.outputs()[0]).name;

  // Host input and the CPU reference (the oracle, and the answer without a GPU).
  std::vector<int64_t> shape{n, 256};
  std::vector<double> xv(static_cast<size_t>(n * 256));
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = input_value(i);
  kiln::HostTensor xh = kiln::HostTensor::from_f64(kiln::DType::F32, shape, xv);
  std::vector<double> ref = kiln::run_reference(g, {{"x", xh}}).at(out_name).to_f64();

  kiln::Engine probe;
  kiln::EngineOptions opts;
  opts.load_kernels = probe.has_device();
  kiln::Engine engine(opts);
  kiln::CompiledGraph cg = engine.compile(g);
  kiln::Bindings b = g.bind({{"x", shape}});
  std::printf("compiled %zu kernel(s) for %s; workspace %lld bytes\n", cg.kernels().size(),
              engine.arch().c_str(), static_cast<long long>(cg.workspace_size(b)));
  for (const kiln::KernelInfo& k : cg.kernels())
    std::printf("  kernel %s (%s)\n", k.name.c_str(), k.cache.c_str());
  std::vector<int64_t> out_shape = cg.output_shapes(b).at(out_name);

  if (!engine.has_device()) {
    std::printf("path: cpu reference (no GPU: compiled with load_kernels=0)\n");
    print_output(out_name, ref, out_shape);
    return 0;
  }
  std::printf("path: gpu\n");
  size_t bytes = xv.size() * sizeof(float);
  std::vector<float> xf(xv.begin(), xv.end()), yf(xv.size());
  uint64_t dx = 0, dy = 0, ws = 0;
  check(kiln_device_alloc(bytes, &dx), "kiln_device_alloc");
  check(kiln_device_alloc(bytes, &dy), "kiln_device_alloc");
  int64_t ws_bytes = cg.workspace_size(b);
  if (ws_bytes > 0) check(kiln_device_alloc(static_cast<uint64_t>(ws_bytes), &ws), "workspace");
  check(kiln_memcpy_htod(dx, xf.data(), bytes), "kiln_memcpy_htod");
  cg.run({{"x", {dx, shape}}}, {{out_name, {dy, out_shape}}}, nullptr, ws);
  check(kiln_memcpy_dtoh(yf.data(), dy, bytes), "kiln_memcpy_dtoh");
  std::vector<double> got(yf.begin(), yf.end());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::isfinite(got[i])
                ? std::max(worst, std::fabs(got[i] - ref[i]) / (1e-5 + std::fabs(ref[i])))
                : INFINITY;
  print_output(out_name, got, out_shape);
  std::printf("check: max rel err %.3g vs the CPU reference\n", worst);
  kiln_device_free(dx);
  kiln_device_free(dy);
  kiln_device_free(ws);
  return worst <= 1e-4 ? 0 : 1;
} catch (const kiln::Error& e) {
  std::fprintf(stderr, "embed_cpp: %s\n", e.what());
  return e.kind() == kiln::ErrorKind::User ? 2 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "embed_cpp: %s\n", e.what());
  return 1;
}
