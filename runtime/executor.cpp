#include "runtime/executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

#include "engine/base/check.hpp"
#include "engine/base/env.hpp"
#include "engine/base/memory_budget.hpp"
#include "runtime/event_timer.hpp"
#include "runtime/run_text.hpp"

// NVTX3 (header-only, from the CUDA toolkit): without a profiler attached the calls are no-ops
// that never load anything; KILN_NVTX=1 turns the ranges on (engine/env.hpp).
#include <nvtx3/nvToolsExt.h>

namespace kiln {

// ---------------------------------------------------------------- ModuleCache

ModuleCache::~ModuleCache() {
  if (modules_.empty()) return;
  std::optional<cuda::ContextScope> scope;
  try {
    scope.emplace(ctx_);
  } catch (const Error&) {
    return;  // the driver is gone (process exit): the modules go with it
  }
  for (auto& [key, m] : modules_) {
    try {
      cuda::module_unload(m.module);
    } catch (const Error&) {
      // Unloading at exit can fail when the context is gone: nothing to do.
    }
  }
}

void* ModuleCache::function(const CachedKernel& k, const std::string& entry, int smem_bytes) {
  cuda::ContextScope scope(ctx_);
  std::lock_guard<std::mutex> lock(mu_);
  Loaded& m = modules_[k.key];
  if (!m.module) {
    KILN_ASSERT(k.cubin && !k.cubin->empty(), "no cubin for cache key {}", k.key);
    m.module = cuda::module_load(*k.cubin);
  }
  void*& fn = m.functions[entry];
  if (!fn) fn = cuda::module_function(m.module, entry);
  int& set = m.smem_set[fn];
  // Raise the dynamic limit for every kernel that uses dynamic shared memory, not only above
  // 48 KB: a kernel's static __shared__ variables count against the same 48 KB default, so
  // 48 KB dynamic + 4 bytes static already needs the attribute (seen on the H200: split-K).
  if (smem_bytes > 0 && smem_bytes > set) {
    cuda::func_set_max_dynamic_smem(fn, smem_bytes);
    set = smem_bytes;
  }
  return fn;
}

int64_t ModuleCache::loaded_modules() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(modules_.size());
}

// ---------------------------------------------------------------- constants

std::vector<std::byte> constant_device_bytes(const TensorInfo& t) {
  KILN_ASSERT(t.data.has_value(), "constant '{}' has no data", t.name);
  const HostTensor& h = *t.data;
  const TensorDesc& d = t.desc;
  KILN_ASSERT(h.dtype == d.dtype, "constant '{}' holds {} data for a {} tensor", t.name,
              dtype_name(h.dtype), dtype_name(d.dtype));
  if (d.layout == Layout::NCHW || d.layout == Layout::NHWC) {
    HostTensor r = h.relayout(d.layout);
    return r.data;
  }
  // Strided: place every element at its explicit stride (gaps stay zero).
  Bindings none;
  std::vector<std::byte> out(static_cast<size_t>(tensor_bytes(d, none)));
  std::vector<int64_t> st = layout_strides(h.shape, d.layout, d.strides);
  size_t es = dtype_size(d.dtype);
  HostTensor rm = h.relayout(Layout::NCHW);
  int64_t n = rm.numel();
  std::vector<int64_t> idx(h.shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t k = 0; k < idx.size(); ++k) off += idx[k] * st[k];
    std::memcpy(out.data() + off * static_cast<int64_t>(es), rm.data.data() + i * es, es);
    for (int k = static_cast<int>(idx.size()) - 1; k >= 0; --k) {
      if (++idx[k] < h.shape[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

// ---------------------------------------------------------------- Executor

Executor::Executor(std::shared_ptr<const Graph> g, std::vector<ExecutorKernel> kernels,
                   std::shared_ptr<ModuleCache> modules, std::string not_loaded_reason,
                   bool deferred_errors)
    : graph_(std::move(g)),
      kernels_(std::move(kernels)),
      modules_(std::move(modules)),
      not_loaded_reason_(std::move(not_loaded_reason)) {
  for (const ExecutorKernel& k : kernels_) {  // what the arena planner needs, without sources
    KernelSpec a;
    a.name = k.spec.name;
    a.args = k.spec.args;
    arg_specs_.push_back(std::move(a));
  }
  for (size_t t = 0; t < graph_->tensors().size(); ++t)
    if (const TensorInfo& ti = graph_->tensors()[t]; ti.view_of >= 0)
      views_.push_back(
          {int(t), ti.view_of, ti.view_offset, static_cast<int64_t>(dtype_size(ti.desc.dtype))});
  for (const ExecutorKernel& k : kernels_)
    for (const KernelArg& a : k.spec.args)
      if (a.kind == KernelArg::Kind::ErrorWord) {
        const int producer = a.tensor >= 0 ? graph_->tensor(a.tensor).producer : -1;
        error_sites_.push_back(producer >= 0 ? graph_->nodes()[producer].name : k.spec.name);
      }
  if (!modules_) return;
  if (deferred_errors && !error_sites_.empty())
    readback_ = std::make_unique<ErrorReadback>(4 * error_sites_.size());
  cuda::ContextScope scope(modules_->context());
  for (ExecutorKernel& k : kernels_)
    k.function = modules_->function(k.cached, k.spec.entry, k.spec.smem_bytes);
  // Upload the constants the kernels use, once, into one buffer.
  std::set<int> used;
  for (const ExecutorKernel& k : kernels_)
    for (const KernelArg& a : k.spec.args)
      if (a.kind == KernelArg::Kind::Tensor && a.tensor >= 0 &&
          graph_->tensor(a.tensor).role == TensorRole::Constant)
        used.insert(a.tensor);
  for (int id : graph_->outputs())
    if (graph_->tensor(id).role == TensorRole::Constant) used.insert(id);
  std::vector<std::pair<int, std::vector<std::byte>>> blobs;
  size_t total = 0;
  for (int id : used) {
    blobs.emplace_back(id, constant_device_bytes(graph_->tensor(id)));
    total += (blobs.back().second.size() + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
  }
  if (total == 0) return;
  const std::string what = fmt::format("graph '{}': its {} constants", graph_->name(), used.size());
  check_host_bytes(what, total);
  cuda::check_device_bytes(what, total);
  std::vector<std::byte> host(total);
  size_t off = 0;
  std::vector<std::pair<int, size_t>> offsets;
  for (auto& [id, bytes] : blobs) {
    std::memcpy(host.data() + off, bytes.data(), bytes.size());
    offsets.emplace_back(id, off);
    off += (bytes.size() + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
  }
  constants_ = cuda::DeviceBuffer(total);
  cuda::memcpy_htod(constants_.ptr(), host.data(), total);
  for (auto [id, o] : offsets) constant_ptr_[id] = constants_.ptr() + o;
}

Executor::~Executor() {
  if (!modules_) return;
  // Captured graphs and the internal arena belong to the engine's context.
  try {
    cuda::ContextScope scope(modules_->context());
    graphs_.clear();
    readback_.reset();
    arena_.reset();
    constants_.reset();
  } catch (const Error&) {
    // the driver is gone (process exit)
  }
}

std::shared_ptr<const ArenaPlan> Executor::arena(const Bindings& b) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = arenas_.find(b);
    if (it != arenas_.end()) return it->second;
  }
  ArenaPlan ap = plan_arena(*graph_, arg_specs_, b);
  // Kernel scratch and counters after the tensors, sized for the largest kernel (kernels run
  // one after another on the run's stream, so they can share them).
  int64_t scratch = 0, counters = 0;
  for (const ExecutorKernel& k : kernels_)
    for (const KernelArg& a : k.spec.args) {
      if (a.kind == KernelArg::Kind::Scratch) scratch = std::max(scratch, a.value.eval(b));
      if (a.kind == KernelArg::Kind::Counters) counters = std::max(counters, a.value.eval(b) * 4);
    }
  auto align = [](int64_t v) { return (v + kArenaAlign - 1) / kArenaAlign * kArenaAlign; };
  if (scratch > 0 || counters > 0) {
    ap.scratch_offset = align(ap.peak);
    ap.scratch_bytes = scratch;
    ap.counters_offset = align(ap.scratch_offset + scratch);
    ap.counters_bytes = counters;
    ap.peak = ap.counters_offset + counters;
  }
  if (!error_sites_.empty()) {
    ap.errors_offset = align(ap.peak);
    ap.errors_bytes = static_cast<int64_t>(4 * error_sites_.size());
    ap.peak = ap.errors_offset + ap.errors_bytes;
  }
  auto plan = std::make_shared<const ArenaPlan>(std::move(ap));
  std::lock_guard<std::mutex> lock(mu_);
  if (arenas_.size() >= 64) arenas_.clear();  // bounded: many distinct shapes just replan
  arenas_.emplace(b, plan);
  return plan;
}

std::map<std::string, std::vector<int64_t>> Executor::output_shapes(const Bindings& b) const {
  std::map<std::string, std::vector<int64_t>> out;
  for (int id : graph_->outputs()) {
    const TensorInfo& t = graph_->tensor(id);
    out[t.name] = eval_shape(t.desc.shape, b);
  }
  return out;
}

cuda::ContextScope Executor::enter(const char* what) const {
  KILN_CHECK(loaded(), "{}: graph '{}' was compiled without loading its kernels ({})", what,
             graph_->name(), not_loaded_reason_);
  return cuda::ContextScope(modules_->context());
}

void Executor::check_errors(uint64_t errors, size_t bytes, void* stream) const {
  if (bytes == 0) return;
  if (readback_) {
    report_errors(readback_->queue(errors, stream), true);
    return;
  }
  cuda::stream_synchronize(stream);
  std::vector<uint32_t> words(bytes / 4);
  cuda::memcpy_dtoh(words.data(), errors, bytes);
  report_errors(words, false);
}

void Executor::check_deferred_errors() const {
  if (!readback_) return;
  const cuda::ContextScope scope = enter("check_errors");
  report_errors(readback_->take(true), true);
}

void Executor::report_errors(const std::vector<uint32_t>& words, bool earlier) const {
  // One clause a code, naming the nodes whose kernels reported it.
  struct Code {
    unsigned bit;
    const char* what;
    std::string nodes;
  };
  Code codes[] = {
      {kErrorIndexOutOfRange,
       "index out of range (an index outside [-dim, dim) of the gathered axis)",
       {}},
      {kErrorBadOffsets,
       "bad sequence offsets (cu_seqlens must start at 0, never decrease and end at the token "
       "count)",
       {}},
  };
  for (size_t i = 0; i < words.size() && i < error_sites_.size(); ++i)
    for (Code& c : codes)
      if (words[i] & c.bit)
        c.nodes += fmt::format("{}'{}'", c.nodes.empty() ? "" : ", ", error_sites_[i]);
  std::string report;
  for (const Code& c : codes)
    if (!c.nodes.empty())
      report += fmt::format("{}node {}: {}", report.empty() ? "" : "; ", c.nodes, c.what);
  KILN_CHECK(report.empty(), "run: graph '{}': {}{} (the kernel clamped its reads, {})",
             graph_->name(), earlier ? "an earlier run (deferred_errors): " : "", report,
             earlier ? "the outputs of the runs since the last check are not valid"
                     : "the outputs are not valid");
}

namespace {
// An NVTX range named after a kernel (or a replayed graph) when KILN_NVTX=1.
struct NvtxRange {
  explicit NvtxRange(bool on, const std::string& name) : on_(on) {
    if (on_) nvtxRangePushA(name.c_str());
  }
  ~NvtxRange() {
    if (on_) nvtxRangePop();
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
  bool on_;
};
}  // namespace

// ---------------------------------------------------------------- CUDA graphs

struct Executor::GraphExec {
  std::mutex mu;  // a CUgraphExec must not be launched from two threads at once
  void* graph = nullptr;
  void* exec = nullptr;
  Bindings bindings;
  std::string range;    // NVTX range name
  uint64_t errors = 0;  // the captured launches' error words (zeroed inside the graph)
  size_t errors_bytes = 0;
  GraphExec() = default;
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  ~GraphExec() {
    // An exec still in flight is freed by the driver when it completes.
    cuda::graph_exec_destroy(exec);
    cuda::graph_destroy(graph);
  }
};

Executor::GraphKey Executor::graph_key(const std::map<std::string, DeviceTensor>& inputs,
                                       const std::map<std::string, DeviceTensor>& outputs,
                                       uint64_t workspace) const {
  GraphKey k;
  k.words.reserve(4 + 6 * (inputs.size() + outputs.size()));
  k.words.push_back(workspace);
  if (workspace == 0) {
    std::lock_guard<std::mutex> lock(mu_);
    k.words.push_back(arena_generation_);
  }
  k.names.reserve(inputs.size() + outputs.size());
  for (const auto* m : {&inputs, &outputs}) {
    k.words.push_back(m->size());
    for (const auto& [name, t] : *m) {
      k.names.push_back(name);
      k.words.push_back(t.ptr);
      k.words.push_back(t.shape.size());
      for (int64_t d : t.shape) k.words.push_back(static_cast<uint64_t>(d));
    }
  }
  return k;
}

Bindings Executor::run_graph(const std::map<std::string, DeviceTensor>& inputs,
                             const std::map<std::string, DeviceTensor>& outputs, void* stream,
                             uint64_t workspace) const {
  const EnvConfig& cfg = env();
  const cuda::ContextScope scope = enter("run");
  if (readback_) report_errors(readback_->take(false), true);
  GraphKey key = graph_key(inputs, outputs, workspace);
  std::shared_ptr<GraphExec> ge;
  {
    std::lock_guard<std::mutex> lock(graph_mu_);
    auto it = graphs_.find(key);
    if (it != graphs_.end()) ge = it->second;
  }
  if (!ge) {
    // Capture: plan (all checks) on this thread, record the launches on a private stream.
    Bases base;
    std::shared_ptr<const LaunchPlan> p = plan_for(inputs, outputs, workspace, &base);
    if (workspace == 0) key = graph_key(inputs, outputs, workspace);  // the arena may have grown
    auto fresh = std::make_shared<GraphExec>();
    fresh->bindings = p->bindings;
    fresh->errors = p->errors_bytes ? address(p->errors, base.data()) : 0;
    fresh->errors_bytes = p->errors_bytes;
    fresh->range = "kiln graph " + graph_->name();
    void* cs = cuda::stream_create_nonblocking();
    struct StreamGuard {
      void* s;
      ~StreamGuard() { cuda::stream_destroy(s); }
    } guard{cs};
    cuda::stream_begin_capture(cs);
    try {
      launch_all(*p, base.data(), cs, "capture");
    } catch (...) {
      try {
        cuda::graph_destroy(cuda::stream_end_capture(cs));
      } catch (const Error&) {
        // the capture is already invalidated: the first error is the one to report
      }
      throw;
    }
    fresh->graph = cuda::stream_end_capture(cs);
    fresh->exec = cuda::graph_instantiate(fresh->graph);
    std::lock_guard<std::mutex> lock(graph_mu_);
    ++graph_captures_;
    if (graphs_.size() >= 256) graphs_.clear();  // bounded: in-flight execs are freed on completion
    auto [it, inserted] = graphs_.emplace(std::move(key), fresh);
    ge = it->second;  // another thread may have captured the same key first: use one
  }
  {
    NvtxRange r(cfg.nvtx, ge->range);
    std::lock_guard<std::mutex> lock(ge->mu);
    cuda::graph_launch(ge->exec, stream);
  }
  check_errors(ge->errors, ge->errors_bytes, stream);
  return ge->bindings;
}

int64_t Executor::cuda_graph_count() const {
  std::lock_guard<std::mutex> lock(graph_mu_);
  return static_cast<int64_t>(graphs_.size());
}

int64_t Executor::cuda_graph_captures() const {
  std::lock_guard<std::mutex> lock(graph_mu_);
  return graph_captures_;
}

void Executor::launch_all(const LaunchPlan& p, const uint64_t* base, void* stream,
                          const char* verb) const {
  if (p.counters_bytes)
    cuda::memset_d8_async(address(p.counters, base), 0, p.counters_bytes, stream);
  if (p.errors_bytes) cuda::memset_d8_async(address(p.errors, base), 0, p.errors_bytes, stream);
  const EnvConfig& cfg = env();
  for (const PlannedLaunch& l : p.launches) {
    if (cfg.dump_launch) {
      const KernelSpec& s = l.kernel->spec;
      fmt::print(stderr, "kiln: {} {} grid [{},{},{}] block [{},{},{}] smem {} ({}){}\n", verb,
                 s.name, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2],
                 s.smem_bytes, bindings_str(p.bindings), l.empty ? " skipped: empty" : "");
    }
    NvtxRange r(cfg.nvtx && !l.empty, l.kernel->spec.name);
    launch(l, p.bindings, base, stream);
  }
  for (const PlannedCopy& c : p.copies)
    cuda::memcpy_dtod_async(address(c.dst, base), address(c.src, base), c.bytes, stream);
}

Bindings Executor::run(const std::map<std::string, DeviceTensor>& inputs,
                       const std::map<std::string, DeviceTensor>& outputs, void* stream,
                       uint64_t workspace) const {
  const cuda::ContextScope scope = enter("run");
  if (readback_) report_errors(readback_->take(false), true);
  Bases base;
  std::shared_ptr<const LaunchPlan> p = plan_for(inputs, outputs, workspace, &base);
  launch_all(*p, base.data(), stream, "launch");
  if (p->errors_bytes) check_errors(address(p->errors, base.data()), p->errors_bytes, stream);
  return p->bindings;
}

std::vector<double> Executor::time_kernels(const std::map<std::string, DeviceTensor>& inputs,
                                           const std::map<std::string, DeviceTensor>& outputs,
                                           int warmup, int iters, Bindings* bound) const {
  KILN_CHECK(iters >= 1, "time_kernels: iters must be at least 1, found {}", iters);
  KILN_CHECK(warmup >= 0, "time_kernels: warmup must be non-negative, found {}", warmup);
  const cuda::ContextScope scope = enter("time_kernels");
  Bases base;
  std::shared_ptr<const LaunchPlan> p = plan_for(inputs, outputs, 0, &base);
  if (bound) *bound = p->bindings;
  // At least one whole run: it zeroes the split-K counters the kernels timed alone rely on.
  for (int w = 0; w < std::max(warmup, 1); ++w) launch_all(*p, base.data(), nullptr, "launch");
  // Each kernel alone, timed as the anchors are (L2 flushed, launch latency hidden).
  std::vector<double> medians;
  for (const PlannedLaunch& l : p->launches)
    medians.push_back(cuda::median_ms(
        cuda::time_flushed([&] { launch(l, p->bindings, base.data(), nullptr); }, 0, iters)));
  cuda::stream_synchronize(nullptr);
  return medians;
}

}  // namespace kiln
