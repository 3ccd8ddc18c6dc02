// `kiln bench GRAPH`: every kernel and the whole graph timed on the GPU (kiln/timing.hpp)
// against the copy-bandwidth ceiling measured in the same process.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include <nlohmann/json.hpp>

#include "kiln/device.hpp"
#include "kiln/io.hpp"
#include "kiln/timing.hpp"
#include "tools/cli_common.hpp"
#include "tools/cli_gpu.hpp"

namespace kiln::cli {
namespace {

// Whole-graph time: every kernel in order on one stream, timed as the anchors are (L2 flushed
// before each run, launch latency hidden); median. `iters` < 0: do_bench's budget (50 ms of
// warm-up, 300 ms of timed runs) instead of counts.
double graph_time_ms(DeviceSession& s, int warmup, int iters) {
  auto run = [&] { s.compiled().run(s.inputs(), s.outputs()); };
  if (iters < 0) return median_ms(time_flushed_budget(run, 50, 300));
  return median_ms(time_flushed(run, warmup, iters));
}

// Host overhead: the median wall time of the run() call itself (work queued, not waited for).
double host_overhead_us(DeviceSession& s, int iters) {
  std::vector<double> host;
  for (int i = 0; i < std::max(iters, 200); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    s.compiled().run(s.inputs(), s.outputs());
    auto t1 = std::chrono::steady_clock::now();
    host.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    if (i % 16 == 15) synchronize_stream(nullptr);
  }
  synchronize_stream(nullptr);
  return median_ms(host);
}

// The lines above the kernel table: the compile, the ceiling, the arena, the host overhead.
void print_header(const std::string& graph, DeviceSession& s, double ceiling, double total_ms,
                  double host_us, bool cuda_graphs, nlohmann::json* j) {
  (*j)["graph"] = graph;
  for (const auto& [k, v] : s.bindings()) (*j)["bindings"][k] = v;
  (*j)["arch"] = s.engine().arch();
  (*j)["device"] = s.engine().device();
  (*j)["copy_GBps"] = ceiling / 1e9;
  (*j)["total_ms"] = total_ms;
  (*j)["compile_ms"] = s.compile_ms();
  EngineStats st = s.engine().stats();
  (*j)["stats"] = {{"nvrtc_compiles", st.nvrtc_compiles},
                   {"memory_cache_hits", st.memory_cache_hits},
                   {"disk_cache_hits", st.disk_cache_hits},
                   {"nvrtc_ms", st.nvrtc_ms},
                   {"autotune_measured", st.autotune_measured},
                   {"autotune_reused", st.autotune_reused},
                   {"passes_ms", st.passes_ms},
                   {"codegen_ms", st.codegen_ms},
                   {"cache_ms", st.cache_ms},
                   {"load_ms", st.load_ms}};
  fmt::print(
      "graph {}  ({} kernels, gpu:{} {} compile {:.0f} ms: {} nvrtc / {} disk / {} memory)\n",
      graph, s.compiled().kernels().size(), s.engine().device(), s.engine().arch(), s.compile_ms(),
      st.nvrtc_compiles, st.disk_cache_hits, st.memory_cache_hits);
  fmt::print("copy bandwidth (the ceiling, measured now): {:.1f} GB/s\n", ceiling / 1e9);
  int64_t arena = s.compiled().workspace_size(s.bindings());
  int64_t all = s.compiled().intermediates_total(s.bindings());
  fmt::print("intermediates: arena peak {} bytes vs {} bytes for all of them ({:.0f}%)\n", arena,
             all, all > 0 ? 100.0 * static_cast<double>(arena) / static_cast<double>(all) : 100.0);
  (*j)["arena_peak_bytes"] = arena;
  (*j)["intermediates_total_bytes"] = all;
  fmt::print("host overhead per run ({}): {:.2f} us (median run() call)\n",
             cuda_graphs ? "CUDA graph replay" : "plain launches", host_us);
  (*j)["host_us_per_run"] = host_us;
  (*j)["cuda_graph"] = cuda_graphs;
}

// The table: every kernel's median time (`per`) against the ceiling, then the whole graph's.
void print_kernels(const std::vector<KernelInfo>& ks, const std::vector<double>& per,
                   double total_ms, double ceiling, nlohmann::json* j) {
  fmt::print("{:<56} {:>10} {:>14} {:>10} {:>8} {:>10}\n", "kernel", "median ms", "bytes", "GB/s",
             "% copy", "TFLOP/s");
  int64_t total_bytes = 0, total_flops = 0;
  double sum_ms = 0;
  for (size_t i = 0; i < ks.size(); ++i) {
    double ms = per.at(i);
    double gbs = static_cast<double>(ks[i].bytes_moved) / (ms * 1e-3) / 1e9;
    double tflops = static_cast<double>(ks[i].flops) / (ms * 1e-3) / 1e12;
    fmt::print("{:<56} {:>10.4f} {:>14} {:>10.1f} {:>7.1f}% {:>10.2f}\n", ks[i].name, ms,
               ks[i].bytes_moved, gbs, 100.0 * gbs * 1e9 / ceiling, tflops);
    (*j)["kernels"].push_back({{"name", ks[i].name},
                               {"median_ms", ms},
                               {"bytes", ks[i].bytes_moved},
                               {"flops", ks[i].flops},
                               {"GBps", gbs},
                               {"cache", ks[i].cache},
                               {"compile_ms", ks[i].compile_ms},
                               {"tuning", ks[i].tuning}});
    if (!ks[i].tuning.empty()) fmt::print("  {}\n", ks[i].tuning);
    total_bytes += ks[i].bytes_moved;
    total_flops += ks[i].flops;
    sum_ms += ms;
  }
  double gbs = static_cast<double>(total_bytes) / (total_ms * 1e-3) / 1e9;
  fmt::print("{:<56} {:>10.4f} {:>14} {:>10.1f} {:>7.1f}% {:>10.2f}\n", "whole graph (median run)",
             total_ms, total_bytes, gbs, 100.0 * gbs * 1e9 / ceiling,
             static_cast<double>(total_flops) / (total_ms * 1e-3) / 1e12);
  (*j)["sum_kernel_ms"] = sum_ms;
  (*j)["total_bytes"] = total_bytes;
  (*j)["total_flops"] = total_flops;
}

// --specialize: the same graph with every symbol replaced by its bound value (what
// EngineOptions::specialize_after swaps in for a hot shape), timed the same way, interleaved with
// the generic one so that clock drift hits both.
void bench_specialized(const Graph& g, const PreparedInputs& in, const EngineOptions& eo,
                       DeviceSession& generic, int warmup, int graph_iters, nlohmann::json* j) {
  Graph sg = specialize_graph(g, in.bindings);
  DeviceSession ss(sg, in.tensors, {}, eo);
  ss.run();
  std::vector<double> gen, spec;
  for (int r = 0; r < 5; ++r) {
    gen.push_back(graph_time_ms(generic, warmup, graph_iters));
    spec.push_back(graph_time_ms(ss, warmup, graph_iters));
  }
  double gm = median_ms(gen), sm = median_ms(spec);
  fmt::print("{:<56} {:>10.4f}   (generic {:.4f} ms: specialized/generic time {:.3f})\n",
             "whole graph, shape-specialized", sm, gm, sm / gm);
  (*j)["specialized_ms"] = sm;
  (*j)["generic_ms"] = gm;
}

int run_bench(const std::vector<std::string>& argv) {
  Args a = parse_args("bench", argv,
                      {{"--shape", true, true},
                       {"--inputs", true, false},
                       {"--input", true, true},
                       {"--seed", true, false},
                       {"--int-range", true, false},
                       {"--warmup", true, false},
                       {"--iters", true, false},
                       {"--json", true, false},
                       {"--no-fusion", false, false},
                       {"--cuda-graph", false, false},
                       {"--specialize", false, false},
                       {"--autotune", false, false},
                       {"--device", true, false}},
                      1, 1);
  int warmup = static_cast<int>(parse_int("bench", "--warmup", a.get("--warmup", "10"), 0));
  int iters = static_cast<int>(parse_int("bench", "--iters", a.get("--iters", "50"), 1));
  // The whole graph by do_bench's time budget unless counts are given (kernels alone: counts).
  const int graph_iters = a.has("--warmup") || a.has("--iters") ? iters : -1;
  const int device = parse_device_flag("bench", a.get("--device", "gpu"), false).ordinal;
  require_gpu("bench", device);
  Graph g = load_graph_file(a.positional[0]);
  InputOptions io;
  io.shapes = parse_shape_flags("bench", a.all("--shape"), g);
  io.inputs_file = a.get("--inputs");
  io.input_flags = a.all("--input");
  io.seed = static_cast<uint64_t>(parse_int("bench", "--seed", a.get("--seed", "1"), 0));
  if (a.has("--int-range")) parse_int_range("bench", a.get("--int-range"), &io);
  PreparedInputs in = prepare_inputs("bench", g, io);
  EngineOptions eo;
  eo.fusion = !a.has("--no-fusion");
  eo.cuda_graphs = a.has("--cuda-graph");
  eo.autotune = a.has("--autotune");
  eo.device = device;
  DeviceScope on(device);  // the copy-bandwidth and timing helpers run on the same device
  DeviceSession s(g, in.tensors, in.bindings, eo);
  s.run();
  double ceiling = copy_bandwidth();
  double total_ms = graph_time_ms(s, warmup, graph_iters);
  double host_us = host_overhead_us(s, iters);
  std::vector<double> per = s.compiled().time_kernels(s.inputs(), s.outputs(), warmup, iters);

  nlohmann::json j;
  print_header(a.positional[0], s, ceiling, total_ms, host_us, eo.cuda_graphs, &j);
  print_kernels(s.compiled().kernels(), per, total_ms, ceiling, &j);
  if (a.has("--specialize")) bench_specialized(g, in, eo, s, warmup, graph_iters, &j);
  if (a.has("--json")) {
    std::ofstream os(a.get("--json"));
    os << j.dump(1) << "\n";
    KILN_CHECK(os.good(), "bench: cannot write --json {}", a.get("--json"));
  }
  return 0;
}

}  // namespace

KILN_CLI_COMMAND(
    bench, "bench", "time each kernel on the GPU against the copy-bandwidth ceiling",
    "usage: kiln bench GRAPH [--shape SYM=V ...] [--inputs F] [--input NAME=F ...]\n"
    "                  [--seed S] [--int-range LO:HI] [--warmup W] [--iters I] [--json FILE]\n"
    "                  [--no-fusion] [--cuda-graph] [--specialize] [--autotune]\n"
    "                  [--device gpu:N]\n\n"
    "Compiles the graph, uploads seeded random (or given) inputs, and prints per kernel\n"
    "the median of CUDA-event-timed launches, bytes moved, achieved GB/s and the share\n"
    "of the device-to-device copy bandwidth measured in the same process; then the\n"
    "whole graph's median run time, and the host overhead per run (the median wall time\n"
    "of the run() call). Every timed call follows an L2 flush; the whole graph gets\n"
    "do_bench's budget (50 ms of warm-up, 300 ms of timed runs) unless --warmup or\n"
    "--iters is given (kernels alone: 10 and 50 by default). --cuda-graph replays a\n"
    "captured CUDA graph per run instead. --device gpu:N runs on GPU N (default: 0).\n"
    "--specialize also times the graph with every symbol fixed to its bound value (what\n"
    "EngineOptions::specialize_after swaps in for a hot shape) against the generic one.\n"
    "--autotune times every candidate config of each conv/matmul not yet in the tuning\n"
    "file ($KILN_CACHE_DIR/tuning.json) and uses the fastest; later runs and processes\n"
    "reuse the file (symbolic dims are tuned at the rules' estimates: batch 32 for conv,\n"
    "2048 rows for matmul; bench a static graph to tune one exact shape).\n",
    run_bench);

}  // namespace kiln::cli
