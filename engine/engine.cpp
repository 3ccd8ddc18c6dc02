// The Engine facade: plan -> codegen -> NVRTC (through the kernel cache) -> executor.
#include "kiln/engine.hpp"

#include <fmt/format.h>

#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "codegen/kernel_cache.hpp"
#include "codegen/kernel_spec.hpp"
#include "engine/check.hpp"
#include "engine/env.hpp"
#include "engine/plan.hpp"
#include "heuristics/device_info.hpp"
#include "runtime/cuda_driver.hpp"
#include "runtime/executor.hpp"

namespace kiln {

class EngineImpl {
 public:
  explicit EngineImpl(EngineOptions o) : opts(std::move(o)) {
    const EnvConfig& e = env();  // a bad KILN_* variable is a user error here
    device = cuda::driver_available(&no_device);
    if (opts.arch.empty()) {
      info = device ? cuda::query_device_info(0) : default_device_info("sm_90");
    } else {
      parse_arch(opts.arch, nullptr, "EngineOptions.arch");
      if (device) {
        info = cuda::query_device_info(0);
        KILN_CHECK(!opts.load_kernels || cubin_runs_on(opts.arch, info.sm),
                   "EngineOptions.arch: kernels for {} cannot run on the device {} (sm_{}); leave "
                   "arch empty for the device's own, or set load_kernels=false to only compile",
                   opts.arch, info.name, info.sm);
        info.arch = opts.arch;
      } else {
        info = default_device_info(opts.arch);
      }
    }
    sm = parse_arch(info.arch);
    cache = std::make_unique<KernelCache>(
        KernelCacheOptions{opts.cache_dir, opts.disk_cache && !e.disable_disk_cache});
    if (device && opts.load_kernels) modules = std::make_shared<ModuleCache>();
  }

  EngineOptions opts;
  bool device = false;
  std::string no_device;
  DeviceInfo info;
  int sm = 90;
  std::unique_ptr<KernelCache> cache;
  std::shared_ptr<ModuleCache> modules;
  std::atomic<int64_t> plans{0};
};

class CompiledGraphImpl {
 public:
  std::shared_ptr<const Graph> graph;
  Plan plan;
  std::unique_ptr<Executor> exec;
  std::vector<KernelInfo> infos;
  std::mutex mu;
  std::optional<Bindings> costs_for;

  // bytes/flops of every kernel evaluated for `b` (once per distinct bindings).
  void update_costs(const Bindings& b) {
    std::lock_guard<std::mutex> lock(mu);
    if (costs_for && *costs_for == b) return;
    for (size_t i = 0; i < infos.size(); ++i) {
      const KernelSpec& s = exec->kernels()[i].spec;
      infos[i].bytes_moved = s.bytes_moved.eval(b);
      infos[i].flops = s.flops.eval(b);
    }
    costs_for = b;
  }
};

// ---------------------------------------------------------------- CompiledGraph

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

const std::vector<KernelInfo>& CompiledGraph::kernels() const {
  return checked(impl_).infos;
}

std::map<std::string, std::vector<int64_t>> CompiledGraph::output_shapes(const Bindings& b) const {
  return checked(impl_).exec->output_shapes(b);
}

int64_t CompiledGraph::workspace_size(const Bindings& b) const {
  return checked(impl_).exec->arena(b)->peak;
}

int64_t CompiledGraph::intermediates_total(const Bindings& b) const {
  return checked(impl_).exec->arena(b)->total;
}

void CompiledGraph::run(const std::map<std::string, DeviceTensor>& inputs,
                        const std::map<std::string, DeviceTensor>& outputs, void* stream,
                        uint64_t workspace) const {
  checked(impl_);
  Bindings b = impl_->exec->run(inputs, outputs, stream, workspace);
  impl_->update_costs(b);
}

std::vector<double> CompiledGraph::time_kernels(const std::map<std::string, DeviceTensor>& inputs,
                                                const std::map<std::string, DeviceTensor>& outputs,
                                                int warmup, int iters) const {
  checked(impl_);
  Bindings b;
  std::vector<double> t = impl_->exec->time_kernels(inputs, outputs, warmup, iters, &b);
  impl_->update_costs(b);
  return t;
}

// ---------------------------------------------------------------- Engine

Engine::Engine(EngineOptions opts) : impl_(std::make_unique<EngineImpl>(std::move(opts))) {}
Engine::~Engine() = default;

bool Engine::has_device() const {
  return impl_->device;
}

std::string Engine::arch() const {
  return impl_->info.arch;
}

EngineStats Engine::stats() const {
  KernelCacheStats c = impl_->cache->stats();
  EngineStats s;
  s.plans = impl_->plans.load();
  s.nvrtc_compiles = c.nvrtc_compiles;
  s.memory_cache_hits = c.memory_hits;
  s.disk_cache_hits = c.disk_hits;
  s.nvrtc_ms = c.nvrtc_ms;
  return s;
}

CompiledGraph Engine::compile(const Graph& g) {
  EngineImpl& e = *impl_;
  const EnvConfig& cfg = env();
  auto impl = std::make_unique<CompiledGraphImpl>();
  impl->graph = std::make_shared<const Graph>(g);
  const Graph& graph = *impl->graph;
  KILN_CHECK(!graph.outputs().empty(), "graph '{}': no outputs to compute", graph.name());

  PlanOptions po;
  po.fusion = e.opts.fusion && !cfg.disable_fusion;
  impl->plan = plan_fusion(graph, po);
  e.plans.fetch_add(1);
  if (cfg.dump_plan) fmt::print(stderr, "{}", plan_to_string(graph, impl->plan));

  CodegenOptions co;
  co.sm = e.sm;
  std::vector<KernelSpec> specs = generate_kernels(graph, impl->plan, co);
  for (const KernelSpec& s : specs)
    KILN_ASSERT(!s.name.empty() && !s.entry.empty() && !s.source.empty(),
                "codegen returned an incomplete kernel for group {} (name '{}', entry '{}')",
                s.group, s.name, s.entry);

  // NVRTC compiles in parallel (the cache compiles each distinct source once).
  std::vector<ExecutorKernel> kernels(specs.size());
  std::atomic<size_t> next{0};
  std::mutex err_mu;
  std::exception_ptr first_error;
  auto worker = [&] {
    for (size_t i = next.fetch_add(1); i < specs.size(); i = next.fetch_add(1)) {
      try {
        kernels[i].cached = e.cache->get(specs[i].source, specs[i].name, e.info.arch);
      } catch (...) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (!first_error) first_error = std::current_exception();
      }
    }
  };
  size_t nthreads =
      std::min<size_t>(specs.size(), std::max(1u, std::thread::hardware_concurrency()));
  if (nthreads <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (size_t t = 0; t < nthreads; ++t) pool.emplace_back(worker);
    for (std::thread& t : pool) t.join();
  }
  if (first_error) std::rethrow_exception(first_error);

  for (size_t i = 0; i < specs.size(); ++i) {
    KernelInfo info;
    info.name = specs[i].name;
    info.group = specs[i].group;
    for (const FusionGroup& grp : impl->plan.groups)
      if (grp.id == specs[i].group)
        for (int n : grp.nodes) info.nodes.push_back(graph.nodes()[n].name);
    info.cache = cache_source_name(kernels[i].cached.source);
    info.compile_ms = kernels[i].cached.compile_ms;
    impl->infos.push_back(std::move(info));
    kernels[i].spec = std::move(specs[i]);
  }

  std::string reason;
  if (!e.opts.load_kernels)
    reason = "EngineOptions.load_kernels is false";
  else if (!e.device)
    reason = "no CUDA device: " + e.no_device;
  impl->exec = std::make_unique<Executor>(impl->graph, std::move(kernels),
                                          reason.empty() ? e.modules : nullptr, reason);
  // Static graphs get their costs now; symbolic ones at the first run.
  if (graph.symbols().empty()) impl->update_costs({});

  CompiledGraph cg;
  cg.impl_ = std::move(impl);
  return cg;
}

}  // namespace kiln
