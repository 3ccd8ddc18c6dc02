// `kiln run GRAPH`: runs a graph on given or seeded-random inputs and prints every output.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <thread>

#include "kiln/io.hpp"
#include "kiln/lowering.hpp"
#include "kiln/reference.hpp"
#include "tools/cli_common.hpp"
#include "tools/cli_gpu.hpp"

namespace kiln::cli {
namespace {

// "NHWC", or "row-major" for the default layout of a tensor that is not 4-D.
std::string layout_str(const TensorDesc& d) {
  if (d.layout == Layout::NCHW && d.rank() != 4) return "row-major";
  return layout_name(d.layout);
}

// GPU output vs CPU reference: |gpu - ref| <= tol * max(|ref|, max|ref|) per element (so the
// tolerance is relative to the tensor's scale), tolerance by dtype; NaN never passes.
struct CheckResult {
  bool ok = true;
  double max_abs = 0, max_rel = 0, ref_max = 0, tolerance = 0;
  std::string why;
};

CheckResult compare_outputs(const HostTensor& got, const HostTensor& ref) {
  CheckResult c;
  c.tolerance = got.dtype == DType::F32 ? 1e-5 : is_float(got.dtype) ? 1e-2 : 0;
  if (!is_float(got.dtype)) {  // integers and bools: exact, compared as integers
    std::vector<int64_t> gi = got.to_i64(), ri = ref.to_i64();
    int64_t bad = 0;
    for (size_t i = 0; i < gi.size() && i < ri.size(); ++i) {
      bad += gi[i] != ri[i];
      c.ref_max = std::max(c.ref_max, std::fabs(static_cast<double>(ri[i])));
      c.max_abs = std::max(c.max_abs, std::fabs(static_cast<double>(gi[i]) - ri[i]));
    }
    c.ok = bad == 0 && gi.size() == ri.size();
    if (!c.ok) c.why = fmt::format("{} elements differ", bad);
    return c;
  }
  std::vector<double> g = got.to_f64(), r = ref.to_f64();
  if (g.size() != r.size()) {
    c.ok = false;
    c.why = "element counts differ";
    return c;
  }
  for (double v : r) c.ref_max = std::max(c.ref_max, std::fabs(v));
  int64_t nan = 0, bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) != std::isnan(r[i])) {
      ++nan;
      continue;
    }
    if (std::isnan(r[i])) continue;
    double d = std::fabs(g[i] - r[i]);
    c.max_abs = std::max(c.max_abs, d);
    double scale = std::max(std::fabs(r[i]), c.ref_max);
    if (d > c.tolerance * scale) ++bad;
  }
  c.max_rel = c.ref_max > 0 ? c.max_abs / c.ref_max : c.max_abs;
  if (nan) c.why = fmt::format("{} NaN where the reference has none", nan);
  if (bad) c.why += fmt::format("{}{} elements out of tolerance", c.why.empty() ? "" : ", ", bad);
  c.ok = nan == 0 && bad == 0;
  return c;
}

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  return fmt::format("{:.6g}", v);
}

int run_run(const std::vector<std::string>& argv) {
  Args a = parse_args("run", argv,
                      {{"--shape", true, true},
                       {"--inputs", true, false},
                       {"--input", true, true},
                       {"--seed", true, false},
                       {"--int-range", true, false},
                       {"--output", true, false},
                       {"--device", true, false},
                       {"--threads", true, false},
                       {"--check", false, false},
                       {"--passes", false, false},
                       {"--stats", false, false}},
                      1, 1);
  const std::string device = a.get("--device", "auto");
  const DeviceFlag dev = parse_device_flag("run", device, /*allow_cpu=*/true);
  int64_t threads64 = a.has("--threads") ? parse_int("run", "--threads", a.get("--threads"), 0) : 0;
  if (threads64 > 1024)
    usage_error("run", fmt::format("--threads: expected at most 1024, found {}", threads64));
  int threads = static_cast<int>(threads64);
  InputOptions io;
  io.seed =
      a.has("--seed") ? static_cast<uint64_t>(parse_int("run", "--seed", a.get("--seed"), 0)) : 1;
  io.inputs_file = a.get("--inputs");
  io.input_flags = a.all("--input");
  if (a.has("--int-range")) parse_int_range("run", a.get("--int-range"), &io);

  // Decide the backend before any heavy work, so that a refused --device fails fast.
  std::string why;
  bool use_gpu = false;
  bool check = a.has("--check");
  const bool passes = a.has("--passes");
  if (passes && (check || dev.kind == DeviceFlag::Kind::Gpu))
    usage_error("run", "--passes runs on the CPU reference: not with --check or a GPU --device");
  if (check)
    KILN_CHECK(gpu_available(&why),
               "run --check: needs a GPU to check against the CPU reference: {}", why);
  if (dev.kind == DeviceFlag::Kind::Gpu || check) {
    require_gpu("run", dev.ordinal);
    use_gpu = true;
  } else if (dev.kind == DeviceFlag::Kind::Auto && !passes) {
    use_gpu = gpu_available(&why);
  }

  std::string out_path = a.get("--output");
  if (a.has("--output")) {
    KILN_CHECK(!out_path.empty(), "run: --output: expected a file name, found an empty string");
    std::filesystem::path dir = std::filesystem::path(out_path).parent_path();
    std::error_code ec;
    KILN_CHECK(dir.empty() || std::filesystem::is_directory(dir, ec),
               "run: --output {}: directory '{}' does not exist", out_path, dir.string());
  }

  const std::string& path = a.positional[0];
  auto tl = std::chrono::steady_clock::now();
  Graph g = load_graph_file(path);
  const double parse_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - tl).count();
  io.shapes = parse_shape_flags("run", a.all("--shape"), g);
  tl = std::chrono::steady_clock::now();
  PreparedInputs in = prepare_inputs("run", g, io);
  const double inputs_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - tl).count();

  std::string binding_str;
  for (const auto& [s, v] : in.bindings) binding_str += fmt::format(" {}={}", s, v);
  fmt::print("graph '{}' ({}){}\n", g.name(), path,
             binding_str.empty() ? std::string() : "," + binding_str);
  for (int id : g.inputs()) {
    const TensorInfo& t = g.tensor(id);
    const HostTensor& h = in.tensors.at(t.name);
    fmt::print("  input  {}: {} {} {}  from {}\n", t.name, dtype_name(h.dtype), dims_str(h.shape),
               layout_str(t.desc), in.origin.at(t.name));
  }

  std::map<std::string, HostTensor> outputs;
  std::string backend;
  double ms = 0;
  std::optional<EngineStats> stats;
  if (use_gpu) {
    DeviceRunResult r = run_on_gpu(g, in.tensors, in.bindings, dev.ordinal);
    outputs = std::move(r.outputs);
    ms = r.ms;
    backend = r.backend;
    stats = r.stats;
  } else {
    ReferenceOptions ro;
    ro.bindings = in.bindings;
    ro.threads = threads;
    // --passes: the graph the kernels compute (after the Engine's passes), checked below against
    // the graph as built.
    std::shared_ptr<const Graph> lowered;
    if (passes) {
      lowered = lower_graph(g).graph;
      check = true;
    }
    auto t0 = std::chrono::steady_clock::now();
    outputs = run_reference(passes ? *lowered : g, in.tensors, ro);
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    int used = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
    backend =
        fmt::format("cpu reference{}, {} thread{}{}",
                    passes ? " of the graph after the passes" : "", used, used == 1 ? "" : "s",
                    device == "auto" && !passes ? fmt::format("; --device auto: {}", why) : "");
  }

  bool check_failed = false;
  std::map<std::string, HostTensor> reference;
  if (check) {
    ReferenceOptions ro;
    ro.bindings = in.bindings;
    ro.threads = threads;
    reference = run_reference(g, in.tensors, ro);
  }
  for (int id : g.outputs()) {
    const TensorInfo& t = g.tensor(id);
    auto it = outputs.find(t.name);
    KILN_ASSERT(it != outputs.end(), "the run returned no output '{}'", t.name);
    const HostTensor& h = it->second;
    TensorStats s = tensor_stats(h);
    std::string bad;
    if (s.nan) bad += fmt::format("  nan={}", s.nan);
    if (s.inf) bad += fmt::format("  inf={}", s.inf);
    fmt::print("  output {}: {} {} {}  min={} max={} mean={}{}  fnv1a64={:016x}\n", t.name,
               dtype_name(h.dtype), dims_str(h.shape), layout_str(t.desc), num(s.min), num(s.max),
               num(s.mean), bad, fnv1a64(h));
    if (check) {
      CheckResult c = compare_outputs(h, reference.at(t.name));
      check_failed |= !c.ok;
      fmt::print(
          "  check  {}: max abs err {:.3g}, max rel err {:.3g} (of max |ref| {:.3g}), "
          "tolerance {:.0e}: {}\n",
          t.name, c.max_abs, c.max_rel, c.ref_max, c.tolerance,
          c.ok ? "ok" : fmt::format("FAIL ({})", c.why));
    }
  }
  fmt::print("time: {:.3f} ms ({})\n", ms, backend);
  if (a.has("--stats")) {
    fmt::print("load: graph file {:.1f} ms, inputs {:.1f} ms\n", parse_ms, inputs_ms);
    if (stats)
      fmt::print(
          "stats: plans {}, nvrtc compiles {}, memory cache hits {}, disk cache hits {}, graph "
          "cache hits {}, nvrtc {:.1f} ms, specializations {}, autotuned {} (tuning file {})\n",
          stats->plans, stats->nvrtc_compiles, stats->memory_cache_hits, stats->disk_cache_hits,
          stats->graph_cache_hits, stats->nvrtc_ms, stats->specializations,
          stats->autotune_measured, stats->autotune_reused);
    if (stats)
      fmt::print(
          "build: passes {:.1f} ms, plan + codegen {:.1f} ms, kernel cache {:.1f} ms, executor "
          "(module loads + constants) {:.1f} ms\n",
          stats->passes_ms, stats->codegen_ms, stats->cache_ms, stats->load_ms);
    else
      fmt::print("stats: none (the CPU reference compiles no kernels)\n");
  }

  if (check_failed) {
    fmt::print(stderr, "kiln: run --check: the GPU result differs from the CPU reference\n");
    return 1;
  }
  if (a.has("--output")) {
    write_safetensors(out_path, outputs);
    fmt::print("wrote {} output{} to {}\n", outputs.size(), outputs.size() == 1 ? "" : "s",
               out_path);
  }
  return 0;
}

}  // namespace

KILN_CLI_COMMAND(
    run, "run", "run a graph on given or random inputs and print its outputs",
    "usage: kiln run GRAPH [--shape SYM=V ...] [--inputs FILE.safetensors]\n"
    "                      [--input NAME=FILE.safetensors ...] [--seed S] [--int-range LO:HI]\n"
    "                      [--output FILE.safetensors] [--device auto|cpu|gpu|gpu:N] [--threads T] "
    "[--check] [--passes] [--stats]\n"
    "\n"
    "Runs GRAPH and prints, per output: name, shape, dtype, layout, min/max/mean and a checksum\n"
    "(FNV-1a 64 of the tensor's bytes in row-major logical order, as a safetensors file holds\n"
    "them), then the time the run took.\n"
    "\n"
    "  --shape SYM=V      bind a symbolic dimension (repeatable; also SYM=V,SYM2=V2)\n"
    "  --inputs FILE      read inputs from a safetensors file, each tensor by its input name\n"
    "  --input NAME=FILE  read input NAME from a safetensors file: its tensor NAME, or its only\n"
    "                     tensor (repeatable; overrides --inputs)\n"
    "  --seed S           seed of the random inputs (default 1)\n"
    "  --int-range LO:HI  random i32/i64 inputs are uniform integers in [LO, HI) (default 0:16)\n"
    "  --output FILE      write every output to a safetensors file (logical shape, row-major)\n"
    "  --device D         auto (GPU 0 when there is one, else the CPU reference), cpu, gpu\n"
    "                     (GPU 0), gpu:N (GPU N; `kiln devices` lists them)\n"
    "  --check            run on the GPU and on the CPU reference; print the max abs/rel error\n"
    "                     per output (tolerance 1e-5 f32, 1e-2 f16/bf16, exact for\n"
    "                     i32/i64/bool); exit 1 on a mismatch\n"
    "  --passes           run the CPU reference on the graph after the Engine's passes (the\n"
    "                     rewrites `kiln plan` lists) and check it against the graph as built,\n"
    "                     as --check does (exit 1 on a mismatch)\n"
    "  --stats            after the run, print the Engine's counters: plans, NVRTC compiles,\n"
    "                     memory/disk/graph cache hits, NVRTC ms (KILN_DUMP=launch: each launch)\n"
    "  --threads T        CPU reference threads (default: all cores)\n"
    "\n"
    "Inputs not given are filled with seeded normal(0, 1) values (i32/i64: uniform integers in\n"
    "[0, 16) or --int-range; bool: 0/1); each symbol of such an input\n"
    "must be bound by --shape or by a given input. Files hold tensors in their logical shape,\n"
    "row-major, in the input's declared dtype.\n",
    run_run);

}  // namespace kiln::cli
