// The two-GPU run (issue 23): one graph compiled by an engine per device, the same seeded inputs
// on each, run concurrently from one thread per device (each on its device's legacy default
// stream, its own workspace). Prints (and --json writes) the throughput of the first device alone,
// of all of them together, their ratio, and whether every device's outputs are byte-identical to
// the first's.
//
// usage: bench_multi_gpu GRAPH [--shape SYM=V ...] [--devices 0,1] [--seconds S] [--warmup W]
//                        [--batch-symbol N] [--cuda-graph] [--json FILE]
// tools/multi_gpu_run.sh runs it on ResNet-50 at batch 128.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/device.hpp"
#include "kiln/engine.hpp"
#include "kiln/error.hpp"
#include "kiln/io.hpp"
#include "kiln/random.hpp"

using namespace kiln;

namespace {

struct Options {
  std::string graph, json, batch_symbol = "N";
  Bindings shapes;
  std::vector<int> devices = {0, 1};
  double seconds = 10;
  int warmup = 10;
  bool cuda_graphs = false;
};

// One engine, its compiled graph and its buffers on one device.
struct Replica {
  int device = 0;
  std::unique_ptr<Engine> engine;
  CompiledGraph cg;
  std::vector<DeviceBuffer> buffers;
  std::map<std::string, DeviceTensor> inputs, outputs;
  std::map<std::string, size_t> output_bytes;
  uint64_t workspace = 0;
};

Replica make_replica(const Graph& g, const Bindings& b, int device, bool cuda_graphs) {
  Replica r;
  r.device = device;
  EngineOptions o;
  o.device = device;
  o.cuda_graphs = cuda_graphs;
  r.engine = std::make_unique<Engine>(o);
  r.cg = r.engine->compile(g);
  DeviceScope on(device);
  uint64_t seed = 1;
  for (int id : g.inputs()) {
    const TensorInfo& t = g.tensor(id);
    std::vector<int64_t> shape = eval_shape(t.desc.shape, b);
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    HostTensor h = HostTensor::from_f64(t.desc.dtype, shape, random_values(true, 0, 1, seed++, n));
    if (t.desc.layout == Layout::NHWC) h = h.relayout(Layout::NHWC);
    r.buffers.emplace_back(h.data.size());
    copy_to_device(r.buffers.back().ptr(), h.data.data(), h.data.size());
    r.inputs[t.name] = DeviceTensor{r.buffers.back().ptr(), shape};
  }
  for (const auto& [name, shape] : r.cg.output_shapes(b)) {
    const TensorInfo& t = g.tensor(g.find(name));
    size_t bytes = HostTensor::zeros(t.desc.dtype, shape).data.size();
    r.buffers.emplace_back(bytes);
    r.outputs[name] = DeviceTensor{r.buffers.back().ptr(), shape};
    r.output_bytes[name] = bytes;
  }
  r.buffers.emplace_back(static_cast<size_t>(std::max<int64_t>(r.cg.workspace_size(b), 256)));
  r.workspace = r.buffers.back().ptr();
  synchronize_device();
  return r;
}

// Runs `r` for `seconds` after `warmup` runs, once `go` is set; returns runs per second.
double run_for(Replica& r, int warmup, double seconds, const std::atomic<bool>& go) {
  DeviceScope on(r.device);
  for (int i = 0; i < warmup; ++i) r.cg.run(r.inputs, r.outputs, nullptr, r.workspace);
  synchronize_stream(nullptr);
  while (!go.load()) std::this_thread::yield();
  auto t0 = std::chrono::steady_clock::now();
  int64_t runs = 0;
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int i = 0; i < 8; ++i) r.cg.run(r.inputs, r.outputs, nullptr, r.workspace);
    runs += 8;
    synchronize_stream(nullptr);
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return static_cast<double>(runs) / elapsed;
}

// Runs per second of each replica, all running at once.
std::vector<double> concurrent(std::vector<Replica>& rs, const Options& o) {
  std::vector<double> rate(rs.size());
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  std::vector<std::string> errors(rs.size());
  for (size_t i = 0; i < rs.size(); ++i)
    ts.emplace_back([&, i] {
      try {
        rate[i] = run_for(rs[i], o.warmup, o.seconds, go);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // every thread warmed up
  go = true;
  for (std::thread& t : ts) t.join();
  for (size_t i = 0; i < rs.size(); ++i)
    if (!errors[i].empty())
      throw Error(ErrorKind::Driver, "gpu:" + std::to_string(i) + ": " + errors[i]);
  return rate;
}

std::vector<std::byte> download(const Replica& r, const std::string& name) {
  DeviceScope on(r.device);
  synchronize_device();
  std::vector<std::byte> out(r.output_bytes.at(name));
  copy_to_host(out.data(), r.outputs.at(name).ptr, out.size());
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  auto usage = [] {
    std::fprintf(stderr,
                 "usage: bench_multi_gpu GRAPH [--shape SYM=V ...] [--devices 0,1] [--seconds S] "
                 "[--warmup W] [--batch-symbol N] [--cuda-graph] [--json FILE]\n");
    std::exit(2);
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) usage();
      return std::string(argv[++i]);
    };
    if (a == "--shape") {
      std::string v = value();
      size_t eq = v.find('=');
      if (eq == std::string::npos) usage();
      o.shapes[v.substr(0, eq)] = std::stoll(v.substr(eq + 1));
    } else if (a == "--devices") {
      o.devices.clear();
      std::string v = value();
      for (size_t p = 0; p <= v.size();) {
        size_t c = v.find(',', p);
        o.devices.push_back(std::stoi(v.substr(p, c - p)));
        p = c == std::string::npos ? v.size() + 1 : c + 1;
      }
    } else if (a == "--seconds") {
      o.seconds = std::stod(value());
    } else if (a == "--warmup") {
      o.warmup = std::stoi(value());
    } else if (a == "--batch-symbol") {
      o.batch_symbol = value();
    } else if (a == "--cuda-graph") {
      o.cuda_graphs = true;
    } else if (a == "--json") {
      o.json = value();
    } else if (o.graph.empty() && a.rfind("--", 0) != 0) {
      o.graph = a;
    } else {
      usage();
    }
  }
  if (o.graph.empty() || o.devices.empty()) usage();
  return o;
}

}  // namespace

int main(int argc, char** argv) try {
  Options o = parse(argc, argv);
  std::string why;
  if (!cuda_available(&why)) {
    std::fprintf(stderr, "bench_multi_gpu: no CUDA device: %s\n", why.c_str());
    return 1;
  }
  Graph g = load_graph_file(o.graph);
  Bindings b = g.bind({}, o.shapes);
  const int64_t batch = b.count(o.batch_symbol) ? b.at(o.batch_symbol) : 1;
  nlohmann::json j;
  j["graph"] = o.graph;
  for (const auto& [k, v] : b) j["bindings"][k] = v;
  j["cuda_graphs"] = o.cuda_graphs;
  std::vector<Replica> rs;
  for (int d : o.devices) {
    auto t0 = std::chrono::steady_clock::now();
    rs.push_back(make_replica(g, b, d, o.cuda_graphs));
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    DeviceFacts f = query_device(d);
    EngineStats st = rs.back().engine->stats();
    fmt::print("gpu:{} {} ({}): compiled in {:.0f} ms ({} nvrtc, {} disk, {} memory)\n", d, f.name,
               f.arch, ms, st.nvrtc_compiles, st.disk_cache_hits, st.memory_cache_hits);
    j["devices"].push_back({{"ordinal", d},
                            {"name", f.name},
                            {"compile_ms", ms},
                            {"nvrtc_compiles", st.nvrtc_compiles},
                            {"disk_cache_hits", st.disk_cache_hits}});
  }
  std::vector<Replica> first;
  first.push_back(std::move(rs[0]));
  const double one = concurrent(first, o)[0] * static_cast<double>(batch);
  rs[0] = std::move(first[0]);
  std::vector<double> each = concurrent(rs, o);
  double all = 0;
  for (double r : each) all += r * static_cast<double>(batch);
  bool identical = true;
  for (const auto& [name, t] : rs[0].outputs) {
    std::vector<std::byte> ref = download(rs[0], name);
    for (size_t i = 1; i < rs.size(); ++i) {
      const bool same = download(rs[i], name) == ref;
      identical = identical && same;
      fmt::print("output {}: gpu:{} {} gpu:{}\n", name, rs[i].device,
                 same ? "identical to" : "DIFFERS from", rs[0].device);
    }
  }
  fmt::print("gpu:{} alone: {:.1f} {}/s\n", rs[0].device, one,
             b.count(o.batch_symbol) ? "images" : "runs");
  for (size_t i = 0; i < rs.size(); ++i)
    fmt::print("  gpu:{} concurrently: {:.1f}/s\n", rs[i].device, each[i] * batch);
  fmt::print("all {} devices together: {:.1f}/s = {:.3f}x one device; outputs {}\n", rs.size(), all,
             all / one, identical ? "identical" : "NOT identical");
  j["per_s_one_device"] = one;
  j["per_s_all_devices"] = all;
  j["ratio"] = all / one;
  j["identical"] = identical;
  for (size_t i = 0; i < rs.size(); ++i) j["devices"][i]["per_s_concurrent"] = each[i] * batch;
  if (!o.json.empty()) std::ofstream(o.json) << j.dump(1) << "\n";
  return identical ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_multi_gpu: %s\n", e.what());
  return 2;
}
