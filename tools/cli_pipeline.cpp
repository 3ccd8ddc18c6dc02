// The JIT-pipeline subcommands: plan, emit, bench, cache.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "codegen/kernel_cache.hpp"
#include "codegen/kernel_spec.hpp"
#include "codegen/nvrtc.hpp"
#include "engine/check.hpp"
#include "engine/env.hpp"
#include "engine/plan.hpp"
#include "heuristics/device_info.hpp"
#include "kiln/io.hpp"
#include "tools/cli_common.hpp"
#include "tools/cli_gpu.hpp"

namespace kiln::cli {
namespace {

PlanOptions plan_options(const Args& a) {
  PlanOptions po;
  po.fusion = !a.has("--no-fusion") && !env().disable_fusion;
  return po;
}

int run_plan(const std::vector<std::string>& argv) {
  Args a = parse_args("plan", argv, {{"--no-fusion", false, false}, {"--arch", true, false}}, 1, 1);
  Graph g = load_graph_file(a.positional[0]);
  Plan p = plan_fusion(g, plan_options(a));
  fmt::print("{}", plan_to_string(g, p));
  CodegenOptions co;
  co.sm = parse_arch(a.get("--arch", "sm_90"), nullptr, "--arch");
  std::vector<KernelSpec> ks = generate_kernels(g, p, co);
  fmt::print("\n{} kernel{} for {} node{}:\n", ks.size(), ks.size() == 1 ? "" : "s",
             g.nodes().size(), g.nodes().size() == 1 ? "" : "s");
  for (const KernelSpec& k : ks)
    fmt::print("  group {:>3}  {}  grid=[{}, {}, {}] block=[{}, {}, {}] smem={} bytes={}\n",
               k.group, k.name, k.grid[0].str(), k.grid[1].str(), k.grid[2].str(), k.block[0],
               k.block[1], k.block[2], k.smem_bytes, k.bytes_moved.str());
  return 0;
}

int run_emit(const std::vector<std::string>& argv) {
  Args a = parse_args("emit", argv,
                      {{"--out", true, false},
                       {"--arch", true, false},
                       {"--no-fusion", false, false},
                       {"--compile", false, false}},
                      1, 1);
  KILN_CHECK(a.has("--out"), "emit: --out DIR is required");
  std::string arch = a.get("--arch", "sm_90");
  CodegenOptions co;
  co.sm = parse_arch(arch, nullptr, "--arch");
  Graph g = load_graph_file(a.positional[0]);
  std::vector<KernelSpec> ks = generate_kernels(g, plan_fusion(g, plan_options(a)), co);
  std::filesystem::path dir = a.get("--out");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  KILN_CHECK(!ec, "emit: --out {}: cannot create the directory: {}", dir.string(), ec.message());
  for (const KernelSpec& k : ks) {
    std::filesystem::path f = dir / (k.name + ".cu");
    std::ofstream os(f);
    os << k.source;
    KILN_CHECK(os.good(), "emit: cannot write {}", f.string());
    std::string compiled;
    if (a.has("--compile")) {
      NvrtcResult r = nvrtc_compile(k.source, k.name, arch);
      compiled = fmt::format("  (nvrtc {}: {:.0f} ms, {} byte cubin)", arch, r.ms, r.cubin.size());
    }
    fmt::print("{}{}\n", f.string(), compiled);
  }
  return 0;
}

// Median of `v` (sorted in place).
double median(std::vector<double> v) {
  KILN_ASSERT(!v.empty(), "median of nothing");
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Device-to-device copy bandwidth (bytes read + written per second), the ceiling of a
// memory-bound kernel, measured in this process.
double copy_bandwidth() {
  const size_t bytes = size_t{1} << 30;
  cuda::DeviceBuffer a(bytes), b(bytes);
  cuda::memset_d8(a.ptr(), 1, bytes);
  void* e0 = cuda::event_create();
  void* e1 = cuda::event_create();
  std::vector<double> t;
  for (int i = 0; i < 25; ++i) {
    cuda::event_record(e0, nullptr);
    cuda::memcpy_dtod_async(b.ptr(), a.ptr(), bytes, nullptr);
    cuda::event_record(e1, nullptr);
    cuda::event_synchronize(e1);
    if (i >= 5) t.push_back(cuda::event_elapsed_ms(e0, e1));
  }
  cuda::event_destroy(e0);
  cuda::event_destroy(e1);
  return 2.0 * static_cast<double>(bytes) / (median(t) * 1e-3);
}

int run_bench(const std::vector<std::string>& argv) {
  Args a = parse_args("bench", argv,
                      {{"--shape", true, true},
                       {"--inputs", true, false},
                       {"--input", true, true},
                       {"--seed", true, false},
                       {"--warmup", true, false},
                       {"--iters", true, false},
                       {"--json", true, false},
                       {"--no-fusion", false, false}},
                      1, 1);
  int warmup = static_cast<int>(parse_int("bench", "--warmup", a.get("--warmup", "10"), 0));
  int iters = static_cast<int>(parse_int("bench", "--iters", a.get("--iters", "50"), 1));
  std::string why;
  KILN_CHECK(gpu_available(&why), "bench: {}", why);
  Graph g = load_graph_file(a.positional[0]);
  InputOptions io;
  io.shapes = parse_shape_flags("bench", a.all("--shape"), g);
  io.inputs_file = a.get("--inputs");
  io.input_flags = a.all("--input");
  io.seed = static_cast<uint64_t>(parse_int("bench", "--seed", a.get("--seed", "1"), 0));
  PreparedInputs in = prepare_inputs("bench", g, io);
  EngineOptions eo;
  eo.fusion = !a.has("--no-fusion");
  DeviceSession s(g, in.tensors, in.bindings, eo);
  s.run();
  double ceiling = copy_bandwidth();

  // Whole-graph time: every kernel in order on one stream, CUDA events around each run.
  void* e0 = cuda::event_create();
  void* e1 = cuda::event_create();
  for (int i = 0; i < warmup; ++i) s.compiled().run(s.inputs(), s.outputs());
  std::vector<double> runs;
  for (int i = 0; i < iters; ++i) {
    cuda::event_record(e0, nullptr);
    s.compiled().run(s.inputs(), s.outputs());
    cuda::event_record(e1, nullptr);
    cuda::event_synchronize(e1);
    runs.push_back(cuda::event_elapsed_ms(e0, e1));
  }
  cuda::event_destroy(e0);
  cuda::event_destroy(e1);
  double total_ms = median(runs);
  std::vector<double> per = s.compiled().time_kernels(s.inputs(), s.outputs(), warmup, iters);
  const std::vector<KernelInfo>& ks = s.compiled().kernels();

  nlohmann::json j;
  j["graph"] = a.positional[0];
  for (const auto& [k, v] : in.bindings) j["bindings"][k] = v;
  j["arch"] = s.engine().arch();
  j["copy_GBps"] = ceiling / 1e9;
  j["total_ms"] = total_ms;
  j["compile_ms"] = s.compile_ms();
  EngineStats st = s.engine().stats();
  j["stats"] = {{"nvrtc_compiles", st.nvrtc_compiles},
                {"memory_cache_hits", st.memory_cache_hits},
                {"disk_cache_hits", st.disk_cache_hits},
                {"nvrtc_ms", st.nvrtc_ms}};
  fmt::print("graph {}  ({} kernels, {} compile {:.0f} ms: {} nvrtc / {} disk / {} memory)\n",
             a.positional[0], ks.size(), s.engine().arch(), s.compile_ms(), st.nvrtc_compiles,
             st.disk_cache_hits, st.memory_cache_hits);
  fmt::print("copy bandwidth (the ceiling, measured now): {:.1f} GB/s\n", ceiling / 1e9);
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
    j["kernels"].push_back({{"name", ks[i].name},
                            {"median_ms", ms},
                            {"bytes", ks[i].bytes_moved},
                            {"flops", ks[i].flops},
                            {"GBps", gbs},
                            {"cache", ks[i].cache},
                            {"compile_ms", ks[i].compile_ms}});
    total_bytes += ks[i].bytes_moved;
    total_flops += ks[i].flops;
    sum_ms += ms;
  }
  double gbs = static_cast<double>(total_bytes) / (total_ms * 1e-3) / 1e9;
  fmt::print("{:<56} {:>10.4f} {:>14} {:>10.1f} {:>7.1f}% {:>10.2f}\n", "whole graph (median run)",
             total_ms, total_bytes, gbs, 100.0 * gbs * 1e9 / ceiling,
             static_cast<double>(total_flops) / (total_ms * 1e-3) / 1e12);
  j["sum_kernel_ms"] = sum_ms;
  j["total_bytes"] = total_bytes;
  j["total_flops"] = total_flops;
  if (a.has("--json")) {
    std::ofstream os(a.get("--json"));
    os << j.dump(1) << "\n";
    KILN_CHECK(os.good(), "bench: cannot write --json {}", a.get("--json"));
  }
  return 0;
}

int run_cache(const std::vector<std::string>& argv) {
  Args a = parse_args("cache", argv, {{"--dir", true, false}}, 1, 1);
  const std::string& what = a.positional[0];
  KILN_CHECK(what == "stats" || what == "clear", "cache: expected 'stats' or 'clear', found '{}'",
             what);
  KernelCache cache(KernelCacheOptions{a.get("--dir"), true});
  if (what == "clear") {
    int64_t n = cache.clear();
    fmt::print("removed {} entr{} from {}\n", n, n == 1 ? "y" : "ies", cache.dir());
    return 0;
  }
  KernelCacheStats s = cache.stats();
  fmt::print("kernel cache {}\n  entries: {}\n  bytes:   {}\n  nvrtc:   {}\n", s.dir,
             s.disk_entries, s.disk_bytes, nvrtc_version());
  return 0;
}

}  // namespace

KILN_CLI_COMMAND(
    plan, "plan", "show the fusion plan: groups, nodes, kernels, and why",
    "usage: kiln plan GRAPH [--no-fusion] [--arch sm_XX]\n\n"
    "Prints every fusion group with its nodes, inputs, outputs and the reason for each\n"
    "boundary, then the kernel generated for each group (name, launch geometry as\n"
    "expressions over the graph's symbols, bytes moved).\n",
    run_plan);
KILN_CLI_COMMAND(
    emit, "emit", "write each generated kernel's CUDA source",
    "usage: kiln emit GRAPH --out DIR [--arch sm_XX] [--no-fusion] [--compile]\n\n"
    "Writes DIR/<kernel name>.cu for every kernel of the plan; --compile also compiles\n"
    "each with NVRTC for --arch (default sm_90) and prints the time.\n",
    run_emit);
KILN_CLI_COMMAND(
    bench, "bench", "time each kernel on the GPU against the copy-bandwidth ceiling",
    "usage: kiln bench GRAPH [--shape SYM=V ...] [--inputs F] [--input NAME=F ...]\n"
    "                  [--seed S] [--warmup W] [--iters I] [--json FILE] [--no-fusion]\n\n"
    "Compiles the graph, uploads seeded random (or given) inputs, and prints per kernel\n"
    "the median of CUDA-event-timed launches, bytes moved, achieved GB/s and the share\n"
    "of the device-to-device copy bandwidth measured in the same process; then the\n"
    "whole graph's median run time.\n",
    run_bench);
KILN_CLI_COMMAND(
    cache, "cache", "show or clear the on-disk kernel cache",
    "usage: kiln cache stats|clear [--dir DIR]\n\n"
    "The cache lives in $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.\n",
    run_cache);

}  // namespace kiln::cli
