// The Engine facade: plan -> codegen -> NVRTC (through the kernel cache) -> executor; the
// graph-level cache (graph key -> compiled core) and hot-shape specialization.
#include "kiln/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "codegen/kernel_cache.hpp"
#include "codegen/kernel_spec.hpp"
#include "engine/api/autotune.hpp"
#include "engine/api/lower.hpp"
#include "engine/base/check.hpp"
#include "engine/base/env.hpp"
#include "engine/ir/graph_key.hpp"
#include "engine/planner/plan.hpp"
#include "heuristics/device_info.hpp"
#include "heuristics/schedule.hpp"
#include "runtime/cuda_driver.hpp"
#include "runtime/executor.hpp"

namespace kiln {

namespace {
constexpr size_t kMaxGraphCache = 256;    // compiled graphs an Engine keeps for compile()
constexpr size_t kMaxSpecialized = 16;    // shape-specialized variants per compiled graph
constexpr size_t kMaxHotBindings = 4096;  // run counters kept per compiled graph
}  // namespace

// What an Engine shares with its compiled graphs (a specialization may finish after the Engine
// is gone).
struct EngineState {
  EngineOptions opts;
  bool device = false;
  std::string no_device;
  DeviceInfo info;
  int ordinal = 0;             // the device the engine runs on
  cuda::Context ctx;           // its context (set when kernels are loaded)
  ScheduleOverrides schedule;  // EngineOptions::schedule, else KILN_SCHEDULE
  bool autotune = false;       // measure missing shape classes (options, device, not disabled)
  std::shared_ptr<TuningTable> tuning;  // null when KILN_DISABLE=autotune
  std::mutex tune_mu;                   // one autotuning at a time (they share the device)
  std::atomic<int64_t> autotune_measured{0};
  std::atomic<int64_t> autotune_reused{0};
  std::shared_ptr<KernelCache> cache;
  std::shared_ptr<ModuleCache> modules;
  std::atomic<int64_t> plans{0};
  std::atomic<int64_t> graph_cache_hits{0};
  std::atomic<int64_t> specializations{0};
  std::atomic<int64_t> specialized_runs{0};
  // EngineStats' build breakdown, in microseconds (atomic adds from concurrent builds).
  std::atomic<int64_t> passes_us{0}, codegen_us{0}, cache_us{0}, load_us{0};
};

// Adds the microseconds since `t0` to `acc` and restarts `t0`.
void lap(std::chrono::steady_clock::time_point* t0, std::atomic<int64_t>* acc) {
  auto now = std::chrono::steady_clock::now();
  acc->fetch_add(std::chrono::duration_cast<std::chrono::microseconds>(now - *t0).count());
  *t0 = now;
}

// One planned, generated and compiled graph. Immutable after build_core() except for the
// specialization table; shared by every CompiledGraph compile() returned for the same key.
struct GraphCore {
  std::shared_ptr<EngineState> st;
  std::shared_ptr<const Graph> graph;
  uint64_t names_hash = 0;
  bool fusion = true;
  Plan plan;
  std::shared_ptr<const Executor> exec;
  std::vector<KernelInfo> infos;  // as this core was compiled

  // Hot-shape specialization (specialize_after > 0 and kernels loaded). Keyed by every input's
  // shape (inputs in name order), which determines the bindings.
  int specialize_after = 0;
  struct Hot {
    int64_t runs = 0;
    bool started = false;
    Bindings bindings;
    std::shared_ptr<const Executor> exec;  // set once the variant is ready
  };
  mutable std::mutex spec_mu;
  mutable std::map<std::vector<int64_t>, Hot> hot;
  mutable size_t specialized = 0;
  mutable std::vector<std::thread> threads;

  GraphCore() = default;
  GraphCore(const GraphCore&) = delete;
  GraphCore& operator=(const GraphCore&) = delete;
  ~GraphCore() {
    std::vector<std::thread> ts;
    {
      std::lock_guard<std::mutex> lock(spec_mu);
      ts.swap(threads);
    }
    for (std::thread& t : ts) t.join();
  }

  static std::vector<int64_t> shapes_key(const std::map<std::string, DeviceTensor>& inputs) {
    std::vector<int64_t> k;
    k.reserve(inputs.size() * 5);
    for (const auto& [name, t] : inputs) {
      k.push_back(static_cast<int64_t>(t.shape.size()));
      k.insert(k.end(), t.shape.begin(), t.shape.end());
    }
    return k;
  }

  // The specialized executor for these inputs when one is ready (and its bindings).
  std::shared_ptr<const Executor> specialized_for(const std::vector<int64_t>& key,
                                                  Bindings* b) const {
    std::lock_guard<std::mutex> lock(spec_mu);
    auto it = hot.find(key);
    if (it == hot.end() || !it->second.exec) return nullptr;
    *b = it->second.bindings;
    return it->second.exec;
  }

  // Counts a run of the generic kernels; starts the background compile at the K-th.
  void note_run(const std::vector<int64_t>& key, const Bindings& b) const;
  void specialize(const std::vector<int64_t>& key, Bindings b) const;
};

class EngineImpl {
 public:
  explicit EngineImpl(EngineOptions o) : st(std::make_shared<EngineState>()) {
    EngineState& s = *st;
    s.opts = std::move(o);
    const EngineOptions& opts = s.opts;
    const EnvConfig& e = env();  // a bad KILN_* variable is a user error here
    KILN_CHECK(opts.specialize_after >= 0,
               "EngineOptions.specialize_after: expected 0 (off) or a run count, found {}",
               opts.specialize_after);
    s.device = cuda::driver_available(&s.no_device);
    choose_device(&s);
    if (opts.arch.empty()) {
      s.info = s.device ? cuda::query_device_info(s.ordinal) : default_device_info("sm_90");
    } else {
      parse_arch(opts.arch, nullptr, "EngineOptions.arch");
      if (s.device) {
        s.info = cuda::query_device_info(s.ordinal);
        KILN_CHECK(!opts.load_kernels || cubin_runs_on(opts.arch, s.info.sm),
                   "EngineOptions.arch: kernels for {} cannot run on the device {} (sm_{}); leave "
                   "arch empty for the device's own, or set load_kernels=false to only compile",
                   opts.arch, s.info.name, s.info.sm);
        s.info.arch = opts.arch;
      } else {
        s.info = default_device_info(opts.arch);
      }
    }
    s.schedule =
        opts.schedule.empty() ? env_schedule_overrides() : parse_schedule_overrides(opts.schedule);
    // Compiling without loading (`kiln cache warm`) is for the disk cache: it must be writable.
    const bool disk = opts.disk_cache && !e.disable_disk_cache;
    s.cache = std::make_shared<KernelCache>(
        KernelCacheOptions{opts.cache_dir, disk, /*require_disk=*/disk && !opts.load_kernels});
    if (!e.disable_autotune) {
      std::string note;
      std::string path = opts.tuning_file.empty()
                             ? (std::filesystem::path(s.cache->dir()) / "tuning.json").string()
                             : opts.tuning_file;
      s.tuning = std::make_shared<TuningTable>(path, &note);
      if (!note.empty()) fmt::print(stderr, "kiln: {}\n", note);
      s.autotune = opts.autotune && s.device && opts.load_kernels;
    }
    if (s.device && opts.load_kernels) s.modules = std::make_shared<ModuleCache>(s.ctx);
  }

  // The device (EngineOptions::device or the caller's current context) and, when kernels are
  // loaded, its context.
  static void choose_device(EngineState* s) {
    const EngineOptions& o = s->opts;
    KILN_CHECK(o.device >= 0,
               "EngineOptions.device: expected a device ordinal (0, 1, ...), found {}", o.device);
    s->ordinal = o.device;
    if (o.use_current_context) {
      KILN_CHECK(s->device, "EngineOptions.use_current_context: no CUDA device: {}", s->no_device);
      s->ctx = cuda::current_context("EngineOptions.use_current_context");
      KILN_CHECK(o.device == 0 || o.device == s->ctx.device,
                 "EngineOptions.device is {}, but the context current on this thread "
                 "(use_current_context) is on device {}: leave device at 0 or make them agree",
                 o.device, s->ctx.device);
      s->ordinal = s->ctx.device;
    } else if (s->device) {
      // Compiling only needs the device's facts, not a context on it.
      s->ctx = o.load_kernels ? cuda::primary_context(o.device, "EngineOptions.device")
                              : cuda::Context{nullptr, o.device};
      if (!o.load_kernels) cuda::check_device_ordinal(o.device, "EngineOptions.device");
    }
  }

  std::shared_ptr<EngineState> st;
  // The graph-level cache: key -> the core being built or built (FIFO-bounded).
  std::mutex graphs_mu;
  std::map<std::string, std::shared_future<std::shared_ptr<const GraphCore>>> graphs;
  std::vector<std::string> graph_order;
};

namespace {

// Autotunes the tuning sites of a planned graph (LowerOptions::planned); returns the note of each
// group it has a result for (KernelInfo::tuning).
std::map<int, std::string> tune_sites(EngineState& e, const Graph& graph, const Plan& plan,
                                      const std::vector<TuningSite>& sites) {
  std::map<int, std::string> notes;
  std::lock_guard<std::mutex> lock(e.tune_mu);
  cuda::ContextScope scope(e.ctx);  // candidates are timed on the engine's device
  for (const AutotuneResult& r :
       autotune_contractions(graph, plan, sites, *e.cache, e.info.arch, e.info.name, *e.tuning)) {
    (r.reused ? e.autotune_reused : e.autotune_measured).fetch_add(1);
    if (r.winner.empty()) continue;
    notes[r.group] = fmt::format(
        "{}: {} {:.4f} ms (rules {} {:.4f} ms, {} candidates{})",
        r.reused ? "tuning file" : "autotuned", r.winner, r.winner_ms, r.rule, r.rule_ms,
        r.candidates, r.skipped.empty() ? "" : fmt::format(", {} skipped", r.skipped.size()));
  }
  return notes;
}

// Lowers (passes, plan, codegen: engine/api/lower.hpp), compiles (through the kernel cache) and
// loads every kernel of `graph`.
std::shared_ptr<GraphCore> build_core(const std::shared_ptr<EngineState>& stp,
                                      std::shared_ptr<const Graph> gp, bool fusion, bool dump_plan,
                                      bool parallel, bool may_tune = true) {
  EngineState& e = *stp;
  auto core = std::make_shared<GraphCore>();
  core->st = stp;
  LowerOptions lo;
  lo.fusion = fusion;
  lo.schedule = e.schedule;
  lo.dump_plan = dump_plan;
  std::map<int, std::string> tuning_notes;  // group -> KernelInfo::tuning
  if (e.tuning) {
    std::shared_ptr<TuningTable> table = e.tuning;
    // Results are the device's own; compiling without a device takes any device's.
    std::string device = e.device ? e.info.name : "";
    lo.tuned = [table, device](const std::string& key) -> std::optional<ContractionConfig> {
      std::optional<TuningEntry> t = table->find_for(key, device);
      if (!t) return std::nullopt;
      return t->config;
    };
    // Shape-specialized variants (background threads, concurrent with runs) only read the table.
    if (e.autotune && may_tune) {
      lo.tuning_sites = true;
      lo.planned = [&](const Lowered& l) {
        tuning_notes = tune_sites(e, *l.graph, l.plan, l.tuning_sites);
      };
    }
  }
  Lowered low = lower(std::move(gp), e.info, lo);
  e.plans.fetch_add(1);
  e.passes_us.fetch_add(low.passes_us);
  e.codegen_us.fetch_add(low.codegen_us);
  core->graph = low.graph;
  core->plan = std::move(low.plan);
  const Graph& graph = *core->graph;
  std::vector<KernelSpec>& specs = low.kernels;

  auto t0 = std::chrono::steady_clock::now();
  // NVRTC compiles in parallel (the cache compiles each distinct source once).
  std::vector<std::exception_ptr> errors;
  std::vector<CachedKernel> cubins =
      compile_kernels(*e.cache, specs, e.info.arch,
                      parallel ? std::max(1u, std::thread::hardware_concurrency()) : 1, &errors);
  lap(&t0, &e.cache_us);
  for (const std::exception_ptr& err : errors)
    if (err) std::rethrow_exception(err);
  std::vector<ExecutorKernel> kernels(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) kernels[i].cached = std::move(cubins[i]);

  for (size_t i = 0; i < specs.size(); ++i) {
    KernelInfo info;
    info.name = specs[i].name;
    info.group = specs[i].group;
    for (const FusionGroup& grp : core->plan.groups)
      if (grp.id == specs[i].group)
        for (int n : grp.nodes) info.nodes.push_back(graph.nodes()[n].name);
    info.cache = cache_source_name(kernels[i].cached.source);
    info.compile_ms = kernels[i].cached.compile_ms;
    if (auto it = tuning_notes.find(specs[i].group); it != tuning_notes.end())
      info.tuning = it->second;
    core->infos.push_back(std::move(info));
    kernels[i].spec = std::move(specs[i]);
  }

  std::string reason;
  if (!e.opts.load_kernels)
    reason = "EngineOptions.load_kernels is false";
  else if (!e.device)
    reason = "no CUDA device: " + e.no_device;
  t0 = std::chrono::steady_clock::now();
  core->exec = std::make_shared<const Executor>(core->graph, std::move(kernels),
                                                reason.empty() ? e.modules : nullptr, reason,
                                                e.opts.deferred_errors);
  lap(&t0, &e.load_us);
  return core;
}

std::string bindings_text(const Bindings& b) {
  std::string s;
  for (const auto& [k, v] : b) s += fmt::format("{}{}={}", s.empty() ? "" : ",", k, v);
  return s;
}

}  // namespace

void GraphCore::note_run(const std::vector<int64_t>& key, const Bindings& b) const {
  std::lock_guard<std::mutex> lock(spec_mu);
  auto it = hot.find(key);
  if (it == hot.end()) {
    if (hot.size() >= kMaxHotBindings) {  // many distinct shapes: forget the cold counters
      for (auto h = hot.begin(); h != hot.end();)
        h = h->second.started ? std::next(h) : hot.erase(h);
      if (hot.size() >= kMaxHotBindings) return;
    }
    it = hot.emplace(key, Hot{}).first;
  }
  Hot& h = it->second;
  if (h.started || ++h.runs < specialize_after || specialized >= kMaxSpecialized) return;
  h.started = true;
  h.bindings = b;
  ++specialized;
  threads.emplace_back([this, key, b] { specialize(key, b); });
}

void GraphCore::specialize(const std::vector<int64_t>& key, Bindings b) const {
  try {
    auto sg = std::make_shared<const Graph>(specialize_graph(*graph, b));
    std::shared_ptr<GraphCore> v = build_core(st, sg, fusion, false, false, false);
    std::lock_guard<std::mutex> lock(spec_mu);
    hot[key].exec = v->exec;  // swapped in: the next run with these shapes uses it
    st->specializations.fetch_add(1);
  } catch (const std::exception& ex) {
    fmt::print(stderr,
               "kiln: specializing graph '{}' for {} failed (the generic kernels stay): {}\n",
               graph->name(), bindings_text(b), ex.what());
  }
}

// ---------------------------------------------------------------- CompiledGraph

// One handle: the shared core plus what is per handle (the graph as given, with its names; the
// kernel list with its cache sources and last-run costs).
class CompiledGraphImpl {
 public:
  std::shared_ptr<const GraphCore> core;
  std::shared_ptr<const Graph> graph;
  std::vector<KernelInfo> infos;
  std::mutex mu;
  std::optional<Bindings> costs_for;

  // bytes/flops of every kernel evaluated for `b` (once per distinct bindings).
  void update_costs(const Bindings& b) {
    std::lock_guard<std::mutex> lock(mu);
    if (costs_for && *costs_for == b) return;
    for (size_t i = 0; i < infos.size(); ++i) {
      const KernelSpec& s = core->exec->kernels()[i].spec;
      infos[i].bytes_moved = s.bytes_moved.eval(b);
      infos[i].flops = s.flops.eval(b);
    }
    costs_for = b;
  }
};

CompiledGraph::CompiledGraph() = default;
CompiledGraph::~CompiledGraph() = default;
CompiledGraph::CompiledGraph(CompiledGraph&&) noexcept = default;
CompiledGraph& CompiledGraph::operator=(CompiledGraph&&) noexcept = default;

namespace {
const CompiledGraphImpl& checked(const std::unique_ptr<CompiledGraphImpl>& p) {
  KILN_CHECK(p != nullptr,
             "CompiledGraph: empty (default-constructed or moved from); get one from "
             "Engine::compile");
  return *p;
}
}  // namespace

const Graph& CompiledGraph::graph() const {
  return *checked(impl_).graph;
}

const std::vector<KernelInfo>& CompiledGraph::kernels() const& {
  return checked(impl_).infos;
}

std::vector<KernelInfo> CompiledGraph::kernels() && {
  return checked(impl_).infos;
}

std::map<std::string, std::vector<int64_t>> CompiledGraph::output_shapes(const Bindings& b) const {
  return checked(impl_).core->exec->output_shapes(b);
}

int64_t CompiledGraph::workspace_size(const Bindings& b) const {
  return checked(impl_).core->exec->arena(b)->peak;
}

int64_t CompiledGraph::intermediates_total(const Bindings& b) const {
  return checked(impl_).core->exec->arena(b)->total;
}

void CompiledGraph::run(const std::map<std::string, DeviceTensor>& inputs,
                        const std::map<std::string, DeviceTensor>& outputs, void* stream,
                        uint64_t workspace) const {
  const GraphCore& c = *checked(impl_).core;
  if (c.specialize_after <= 0) {
    Bindings b = c.st->opts.cuda_graphs ? c.exec->run_graph(inputs, outputs, stream, workspace)
                                        : c.exec->run(inputs, outputs, stream, workspace);
    impl_->update_costs(b);
    return;
  }
  std::vector<int64_t> key = GraphCore::shapes_key(inputs);
  Bindings b;
  if (std::shared_ptr<const Executor> sp = c.specialized_for(key, &b)) {
    // A specialized variant needs its own workspace size: the caller's was sized for the
    // generic plan, so the variant uses it only when it fits.
    uint64_t ws = workspace != 0 && sp->arena({})->peak <= c.exec->arena(b)->peak ? workspace : 0;
    if (c.st->opts.cuda_graphs)
      sp->run_graph(inputs, outputs, stream, ws);
    else
      sp->run(inputs, outputs, stream, ws);
    c.st->specialized_runs.fetch_add(1);
    impl_->update_costs(b);
    return;
  }
  b = c.st->opts.cuda_graphs ? c.exec->run_graph(inputs, outputs, stream, workspace)
                             : c.exec->run(inputs, outputs, stream, workspace);
  impl_->update_costs(b);
  c.note_run(key, b);
}

void CompiledGraph::check_errors() const {
  checked(impl_).core->exec->check_deferred_errors();
}

std::vector<double> CompiledGraph::time_kernels(const std::map<std::string, DeviceTensor>& inputs,
                                                const std::map<std::string, DeviceTensor>& outputs,
                                                int warmup, int iters) const {
  checked(impl_);
  Bindings b;
  std::vector<double> t = impl_->core->exec->time_kernels(inputs, outputs, warmup, iters, &b);
  impl_->update_costs(b);
  return t;
}

// ---------------------------------------------------------------- Engine

Engine::Engine(EngineOptions opts) : impl_(std::make_unique<EngineImpl>(std::move(opts))) {}
Engine::~Engine() = default;

bool Engine::has_device() const {
  return impl_->st->device;
}

int Engine::device() const {
  return impl_->st->ordinal;
}

std::string Engine::arch() const {
  return impl_->st->info.arch;
}

EngineStats Engine::stats() const {
  const EngineState& e = *impl_->st;
  KernelCacheStats c = e.cache->stats();
  EngineStats s;
  s.plans = e.plans.load();
  s.nvrtc_compiles = c.nvrtc_compiles;
  s.memory_cache_hits = c.memory_hits;
  s.disk_cache_hits = c.disk_hits;
  s.nvrtc_ms = c.nvrtc_ms;
  s.graph_cache_hits = e.graph_cache_hits.load();
  s.specializations = e.specializations.load();
  s.specialized_runs = e.specialized_runs.load();
  s.autotune_measured = e.autotune_measured.load();
  s.autotune_reused = e.autotune_reused.load();
  s.passes_ms = e.passes_us.load() / 1e3;
  s.codegen_ms = e.codegen_us.load() / 1e3;
  s.cache_ms = e.cache_us.load() / 1e3;
  s.load_ms = e.load_us.load() / 1e3;
  return s;
}

CompiledGraph Engine::compile(const Graph& g) {
  EngineImpl& ei = *impl_;
  const EngineState& e = *ei.st;
  const EnvConfig& cfg = env();
  bool fusion = e.opts.fusion && !cfg.disable_fusion;
  std::string key = graph_key(g) + (fusion ? "f" : "u");

  std::shared_future<std::shared_ptr<const GraphCore>> fut;
  std::promise<std::shared_ptr<const GraphCore>> promise;
  bool hit = false;
  {
    std::lock_guard<std::mutex> lock(ei.graphs_mu);
    auto it = ei.graphs.find(key);
    if (it != ei.graphs.end()) {
      fut = it->second;
      hit = true;
    } else {
      fut = promise.get_future().share();
      ei.graphs.emplace(key, fut);
      ei.graph_order.push_back(key);
      if (ei.graph_order.size() > kMaxGraphCache) {  // compiled graphs in use stay alive
        ei.graphs.erase(ei.graph_order.front());
        ei.graph_order.erase(ei.graph_order.begin());
      }
    }
  }
  std::shared_ptr<const GraphCore> core;
  if (hit) {
    core = fut.get();  // waits for a concurrent first compile; rethrows its error
    ei.st->graph_cache_hits.fetch_add(1);
    if (cfg.dump_plan) fmt::print(stderr, "{}", plan_to_string(*core->graph, core->plan));
  } else {
    try {
      auto gp = std::make_shared<const Graph>(g);
      std::shared_ptr<GraphCore> built = build_core(ei.st, gp, fusion, cfg.dump_plan, true);
      built->names_hash = graph_names_hash(g);
      built->fusion = fusion;
      built->specialize_after =
          built->exec->loaded() && !g.symbols().empty() ? e.opts.specialize_after : 0;
      core = std::move(built);
      promise.set_value(core);
    } catch (...) {
      promise.set_exception(std::current_exception());
      std::lock_guard<std::mutex> lock(ei.graphs_mu);
      auto it = ei.graphs.find(key);
      if (it != ei.graphs.end() && it->second.valid() &&
          it->second.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
        ei.graphs.erase(it);
        auto o = std::find(ei.graph_order.begin(), ei.graph_order.end(), key);
        if (o != ei.graph_order.end()) ei.graph_order.erase(o);
      }
      throw;
    }
  }

  auto impl = std::make_unique<CompiledGraphImpl>();
  impl->core = core;
  impl->infos = core->infos;
  if (hit && graph_names_hash(g) != core->names_hash) {
    // Same computation under other intermediate/node names: this handle reports its own names.
    impl->graph = std::make_shared<const Graph>(g);
    for (size_t i = 0; i < impl->infos.size(); ++i) {
      impl->infos[i].nodes.clear();
      for (const FusionGroup& grp : core->plan.groups)
        if (grp.id == impl->infos[i].group)
          for (int n : grp.nodes) impl->infos[i].nodes.push_back(g.nodes()[n].name);
    }
  } else {
    impl->graph = core->graph;
  }
  if (hit) {
    for (KernelInfo& k : impl->infos) {  // every kernel was already in this Engine's memory
      k.cache = cache_source_name(CacheSource::Memory);
      k.compile_ms = 0;
    }
  }
  // Static graphs get their costs now; symbolic ones at the first run.
  if (g.symbols().empty()) impl->update_costs({});

  CompiledGraph cg;
  cg.impl_ = std::move(impl);
  return cg;
}

}  // namespace kiln
