// The JIT-pipeline subcommands: plan, emit, bench, cache.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "codegen/kernel_cache.hpp"
#include "codegen/kernel_spec.hpp"
#include "codegen/nvrtc.hpp"
#include "engine/base/check.hpp"
#include "engine/base/env.hpp"
#include "engine/ir/graph_key.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/plan.hpp"
#include "heuristics/device_info.hpp"
#include "heuristics/schedule.hpp"
#include "kiln/io.hpp"
#include "runtime/event_timer.hpp"
#include "tools/cli_common.hpp"
#include "tools/cli_gpu.hpp"

namespace kiln::cli {
namespace {

PlanOptions plan_options(const Args& a) {
  PlanOptions po;
  po.fusion = !a.has("--no-fusion") && !env().disable_fusion;
  po.fused_attention = env_schedule_overrides().attention_fused != 2;
  po.sm = parse_arch(a.get("--arch", "sm_90"), nullptr, "--arch");
  return po;
}

// The graph file after the passes Engine::compile runs (batchnorm folding), saying so.
std::shared_ptr<const Graph> load_for_codegen(const Args& a) {
  std::string note;
  auto g = apply_engine_passes(std::make_shared<const Graph>(load_graph_file(a.positional[0])),
                               plan_options(a).fusion, &note);
  if (!note.empty()) fmt::print("# {}\n", note);
  return g;
}

int run_plan(const std::vector<std::string>& argv) {
  Args a = parse_args("plan", argv, {{"--no-fusion", false, false}, {"--arch", true, false}}, 1, 1);
  std::shared_ptr<const Graph> gp = load_for_codegen(a);
  const Graph& g = *gp;
  Plan p = plan_fusion(g, plan_options(a));
  fmt::print("{}", plan_to_string(g, p));
  const std::string arch = a.get("--arch", "sm_90");
  parse_arch(arch, nullptr, "--arch");  // a bad --arch is named as such
  std::vector<KernelSpec> ks =
      generate_kernels(g, p, codegen_options(default_device_info(arch), env_schedule_overrides()));
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
                       {"--compile", false, false},
                       {"--candidates", false, false}},
                      1, 1);
  KILN_CHECK(a.has("--out"), "emit: --out DIR is required");
  std::string arch = a.get("--arch", "sm_90");
  parse_arch(arch, nullptr, "--arch");  // a bad --arch is named as such
  const CodegenOptions co = codegen_options(default_device_info(arch), env_schedule_overrides());
  std::shared_ptr<const Graph> gp = load_for_codegen(a);
  const Graph& g = *gp;
  const Plan plan = plan_fusion(g, plan_options(a));
  std::vector<KernelSpec> ks = generate_kernels(g, plan, co);
  // --candidates: every autotune candidate of each conv/matmul too, named by group and config.
  if (a.has("--candidates"))
    for (TuningSite& site : contraction_tuning_sites(g, plan, co))
      for (size_t i = 0; i < site.kernels.size(); ++i) {
        KernelSpec k = std::move(site.kernels[i]);
        k.name = fmt::format("candidate_g{}_{}_{}", site.group, i, k.name);
        ks.push_back(std::move(k));
      }
  std::filesystem::path dir = a.get("--out");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  KILN_CHECK(!ec, "emit: --out {}: cannot create the directory: {}", dir.string(), ec.message());
  if (a.has("--compile"))
    fmt::print("nvrtc {}: one-time start in this process {:.0f} ms\n", nvrtc_version(),
               nvrtc_start_ms());
  for (const KernelSpec& k : ks) {
    std::filesystem::path f = dir / (k.name + ".cu");
    std::ofstream os(f);
    os << k.source;
    KILN_CHECK(os.good(), "emit: cannot write {}", f.string());
    std::string compiled;
    if (a.has("--compile")) {
      const std::string& target = k.arch.empty() ? arch : k.arch;
      NvrtcResult r = nvrtc_compile(k.source, k.name, target);
      compiled =
          fmt::format("  (nvrtc {}: {:.0f} ms, {} byte cubin)", target, r.ms, r.cubin.size());
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

// Whole-graph time: every kernel in order on one stream, timed as the anchors are (L2 flushed
// before each run, launch latency hidden); median. `iters` < 0: do_bench's budget (50 ms of
// warm-up, 300 ms of timed runs) instead of counts.
double graph_time_ms(DeviceSession& s, int warmup, int iters) {
  auto run = [&] { s.compiled().run(s.inputs(), s.outputs()); };
  if (iters < 0) return cuda::median_ms(cuda::time_flushed_budget(run, 50, 300));
  return cuda::median_ms(cuda::time_flushed(run, warmup, iters));
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
                       {"--no-fusion", false, false},
                       {"--cuda-graph", false, false},
                       {"--specialize", false, false},
                       {"--autotune", false, false}},
                      1, 1);
  int warmup = static_cast<int>(parse_int("bench", "--warmup", a.get("--warmup", "10"), 0));
  int iters = static_cast<int>(parse_int("bench", "--iters", a.get("--iters", "50"), 1));
  // The whole graph by do_bench's time budget unless counts are given (kernels alone: counts).
  const int graph_iters = a.has("--warmup") || a.has("--iters") ? iters : -1;
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
  eo.cuda_graphs = a.has("--cuda-graph");
  eo.autotune = a.has("--autotune");
  DeviceSession s(g, in.tensors, in.bindings, eo);
  s.run();
  double ceiling = copy_bandwidth();

  double total_ms = graph_time_ms(s, warmup, graph_iters);
  // Host overhead: the wall time of the run() call itself (work queued, not waited for).
  std::vector<double> host;
  for (int i = 0; i < std::max(iters, 200); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    s.compiled().run(s.inputs(), s.outputs());
    auto t1 = std::chrono::steady_clock::now();
    host.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    if (i % 16 == 15) cuda::stream_synchronize(nullptr);
  }
  cuda::stream_synchronize(nullptr);
  double host_us = median(host);
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
                {"nvrtc_ms", st.nvrtc_ms},
                {"autotune_measured", st.autotune_measured},
                {"autotune_reused", st.autotune_reused},
                {"passes_ms", st.passes_ms},
                {"codegen_ms", st.codegen_ms},
                {"cache_ms", st.cache_ms},
                {"load_ms", st.load_ms}};
  fmt::print("graph {}  ({} kernels, {} compile {:.0f} ms: {} nvrtc / {} disk / {} memory)\n",
             a.positional[0], ks.size(), s.engine().arch(), s.compile_ms(), st.nvrtc_compiles,
             st.disk_cache_hits, st.memory_cache_hits);
  fmt::print("copy bandwidth (the ceiling, measured now): {:.1f} GB/s\n", ceiling / 1e9);
  int64_t arena = s.compiled().workspace_size(s.bindings());
  int64_t all = s.compiled().intermediates_total(s.bindings());
  fmt::print("intermediates: arena peak {} bytes vs {} bytes for all of them ({:.0f}%)\n", arena,
             all, all > 0 ? 100.0 * static_cast<double>(arena) / static_cast<double>(all) : 100.0);
  j["arena_peak_bytes"] = arena;
  j["intermediates_total_bytes"] = all;
  fmt::print("host overhead per run ({}): {:.2f} us (median run() call)\n",
             eo.cuda_graphs ? "CUDA graph replay" : "plain launches", host_us);
  j["host_us_per_run"] = host_us;
  j["cuda_graph"] = eo.cuda_graphs;
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
  j["sum_kernel_ms"] = sum_ms;
  if (a.has("--specialize")) {
    // The same graph with every symbol replaced by its bound value (what EngineOptions::
    // specialize_after swaps in for a hot shape), timed the same way, interleaved with the generic
    // one so that clock drift hits both.
    Graph sg = specialize_graph(g, in.bindings);
    DeviceSession ss(sg, in.tensors, {}, eo);
    ss.run();
    std::vector<double> gen, spec;
    for (int r = 0; r < 5; ++r) {
      gen.push_back(graph_time_ms(s, warmup, graph_iters));
      spec.push_back(graph_time_ms(ss, warmup, graph_iters));
    }
    double gm = median(gen), sm = median(spec);
    fmt::print("{:<56} {:>10.4f}   (generic {:.4f} ms: specialized/generic time {:.3f})\n",
               "whole graph, shape-specialized", sm, gm, sm / gm);
    j["specialized_ms"] = sm;
    j["generic_ms"] = gm;
  }
  j["total_bytes"] = total_bytes;
  j["total_flops"] = total_flops;
  if (a.has("--json")) {
    std::ofstream os(a.get("--json"));
    os << j.dump(1) << "\n";
    KILN_CHECK(os.good(), "bench: cannot write --json {}", a.get("--json"));
  }
  return 0;
}

// --shape values of `cache warm`: "N=1,8,32" lists values of N; "N=8,seq=16,128" two symbols.
// Every combination of the listed values is one binding.
std::vector<Bindings> warm_bindings(const std::vector<std::string>& values, const Graph& g) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> lists;
  for (const std::string& v : values) {
    size_t start = 0;
    while (start <= v.size()) {
      size_t comma = v.find(',', start);
      std::string item =
          v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      size_t eq = item.find('=');
      if (eq != std::string::npos) {
        // Validates the symbol and the value (one of the graph's symbols, a positive integer).
        Bindings one = parse_shape_flags("cache", {item}, g);
        lists.emplace_back(one.begin()->first, std::vector<int64_t>{one.begin()->second});
      } else {
        if (lists.empty())
          usage_error("cache",
                      fmt::format("--shape {}: expected SYM=V[,V...], found '{}'", v, item));
        lists.back().second.push_back(parse_int("cache", "--shape", item, 1));
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  std::vector<Bindings> out(1);
  for (const auto& [sym, vals] : lists) {
    std::vector<Bindings> next;
    for (const Bindings& b : out)
      for (int64_t v : vals) {
        Bindings c = b;
        c[sym] = v;
        next.push_back(std::move(c));
      }
    out = std::move(next);
  }
  return out;
}

std::string bindings_text(const Bindings& b) {
  std::string s;
  for (const auto& [k, v] : b) s += fmt::format("{}{}={}", s.empty() ? "" : ",", k, v);
  return s.empty() ? "static shapes" : s;
}

// `kiln cache warm GRAPH --shape N=1,8,32`: every kernel the graph needs, compiled to the disk
// cache (no GPU needed).
int run_cache_warm(const Args& a) {
  KILN_CHECK(a.positional.size() == 2, "cache warm: expected a graph file: kiln cache warm GRAPH");
  Graph g = load_graph_file(a.positional[1]);
  std::vector<Bindings> binds = warm_bindings(a.all("--shape"), g);
  EngineOptions eo;
  eo.arch = a.get("--arch");
  eo.load_kernels = false;
  eo.cache_dir = a.get("--dir");
  eo.fusion = !a.has("--no-fusion");
  Engine e(eo);
  KILN_CHECK(!env().disable_disk_cache,
             "cache warm: KILN_DISABLE=disk_cache is set: nothing would be written");
  fmt::print("warming {} for {} ({} binding{})\n", a.positional[1], e.arch(), binds.size(),
             binds.size() == 1 ? "" : "s");
  EngineStats before{};
  for (const Bindings& b : binds) {
    for (const std::string& sym : g.symbols())
      KILN_CHECK(b.count(sym), "cache warm: symbol {} of graph '{}' is not bound; add --shape {}=V",
                 sym, g.name(), sym);
    CompiledGraph cg = e.compile(g);
    int64_t ws = cg.workspace_size(b);  // every launch expression evaluates for this binding
    EngineStats st = e.stats();
    fmt::print("  {}: {} kernel{}, workspace {} bytes: {} nvrtc, {} disk, {} memory{}\n",
               bindings_text(b), cg.kernels().size(), cg.kernels().size() == 1 ? "" : "s", ws,
               st.nvrtc_compiles - before.nvrtc_compiles,
               st.disk_cache_hits - before.disk_cache_hits,
               st.memory_cache_hits - before.memory_cache_hits,
               st.graph_cache_hits > before.graph_cache_hits ? " (graph cache hit)" : "");
    before = st;
    if (a.has("--specialize") && !g.symbols().empty()) {
      CompiledGraph sp = e.compile(specialize_graph(g, b));
      st = e.stats();
      fmt::print("  {} specialized: {} kernel{}: {} nvrtc, {} disk, {} memory\n", bindings_text(b),
                 sp.kernels().size(), sp.kernels().size() == 1 ? "" : "s",
                 st.nvrtc_compiles - before.nvrtc_compiles,
                 st.disk_cache_hits - before.disk_cache_hits,
                 st.memory_cache_hits - before.memory_cache_hits);
      before = st;
    }
  }
  EngineStats st = e.stats();
  KernelCache cache(KernelCacheOptions{a.get("--dir"), true});
  fmt::print(
      "total: {} plans, {} nvrtc compiles ({:.0f} ms), {} disk cache hits, {} memory cache hits, "
      "{} graph cache hits\ncache {}: {} entries\n",
      st.plans, st.nvrtc_compiles, st.nvrtc_ms, st.disk_cache_hits, st.memory_cache_hits,
      st.graph_cache_hits, cache.dir(), cache.stats().disk_entries);
  return 0;
}

int run_cache(const std::vector<std::string>& argv) {
  Args a = parse_args("cache", argv,
                      {{"--dir", true, false},
                       {"--shape", true, true},
                       {"--arch", true, false},
                       {"--specialize", false, false},
                       {"--no-fusion", false, false}},
                      1, 2);
  const std::string& what = a.positional[0];
  KILN_CHECK(what == "stats" || what == "clear" || what == "warm",
             "cache: expected 'stats', 'clear' or 'warm', found '{}'", what);
  if (what == "warm") return run_cache_warm(a);
  KILN_CHECK(a.positional.size() == 1 && !a.has("--shape") && !a.has("--arch") &&
                 !a.has("--specialize") && !a.has("--no-fusion"),
             "cache {}: takes only --dir (GRAPH, --shape, --arch, --specialize and --no-fusion "
             "are for 'cache warm')",
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
    "usage: kiln emit GRAPH --out DIR [--arch sm_XX] [--no-fusion] [--compile] [--candidates]\n\n"
    "Writes DIR/<kernel name>.cu for every kernel of the plan (the kernels the Engine\n"
    "builds for --arch, default sm_90: sm_90a wgmma contractions there); --compile also\n"
    "compiles each with NVRTC, one after the other, and prints the time. --candidates\n"
    "also writes every autotune candidate of each conv/matmul group\n"
    "(candidate_g<group>_<index>_<kernel name>.cu).\n",
    run_emit);
KILN_CLI_COMMAND(
    bench, "bench", "time each kernel on the GPU against the copy-bandwidth ceiling",
    "usage: kiln bench GRAPH [--shape SYM=V ...] [--inputs F] [--input NAME=F ...]\n"
    "                  [--seed S] [--warmup W] [--iters I] [--json FILE] [--no-fusion]\n"
    "                  [--cuda-graph] [--specialize] [--autotune]\n\n"
    "Compiles the graph, uploads seeded random (or given) inputs, and prints per kernel\n"
    "the median of CUDA-event-timed launches, bytes moved, achieved GB/s and the share\n"
    "of the device-to-device copy bandwidth measured in the same process; then the\n"
    "whole graph's median run time, and the host overhead per run (the median wall time\n"
    "of the run() call). Every timed call follows an L2 flush; the whole graph gets\n"
    "do_bench's budget (50 ms of warm-up, 300 ms of timed runs) unless --warmup or\n"
    "--iters is given (kernels alone: 10 and 50 by default). --cuda-graph replays a\n"
    "captured CUDA graph per run instead.\n"
    "--specialize also times the graph with every symbol fixed to its bound value (what\n"
    "EngineOptions::specialize_after swaps in for a hot shape) against the generic one.\n"
    "--autotune times every candidate config of each conv/matmul not yet in the tuning\n"
    "file ($KILN_CACHE_DIR/tuning.json) and uses the fastest; later runs and processes\n"
    "reuse the file (symbolic dims are tuned at the rules' estimates: batch 32 for conv,\n"
    "2048 rows for matmul; bench a static graph to tune one exact shape).\n",
    run_bench);
KILN_CLI_COMMAND(
    cache, "cache", "show, clear or warm (precompile a graph into) the on-disk kernel cache",
    "usage: kiln cache stats|clear [--dir DIR]\n"
    "       kiln cache warm GRAPH [--shape SYM=V[,V...] ...] [--arch sm_XX] [--dir DIR]\n"
    "                             [--specialize] [--no-fusion]\n\n"
    "The cache lives in $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.\n\n"
    "warm compiles every kernel GRAPH needs into the disk cache ahead of time (no GPU\n"
    "needed), for every combination of the listed values (--shape N=1,8,32), and prints\n"
    "what each binding compiled. Kernels depend on the graph's structure, dtypes, layouts\n"
    "and static dims, never on the values of symbolic dims, so the first binding compiles\n"
    "and the others are graph cache hits. --specialize also compiles the variant with each\n"
    "binding's dims baked in (what EngineOptions.specialize_after builds for a hot shape).\n"
    "--arch defaults to the device's own, or sm_90 without a device.\n",
    run_cache);

}  // namespace kiln::cli
