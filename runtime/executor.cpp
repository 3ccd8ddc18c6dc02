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

// NVTX3 (header-only, from the CUDA toolkit): without a profiler attached the calls are no-ops
// that never load anything; KILN_NVTX=1 turns the ranges on (engine/env.hpp).
#include <nvtx3/nvToolsExt.h>

namespace kiln {

namespace {

constexpr uint64_t kPtrAlign = 16;  // kernels use 16-byte vector accesses

std::string bindings_str(const Bindings& b) {
  std::string s;
  for (const auto& [k, v] : b) s += fmt::format("{}{}={}", s.empty() ? "" : ", ", k, v);
  return s.empty() ? "static shapes" : s;
}

std::string shape_text(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ","));
}

std::string names_of(const Graph& g, const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ", ") + g.tensor(id).name;
  return s.empty() ? "(none)" : s;
}

}  // namespace

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
                   std::shared_ptr<ModuleCache> modules, std::string not_loaded_reason)
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

Executor::Prepared Executor::prepare(const std::map<std::string, DeviceTensor>& inputs,
                                     const std::map<std::string, DeviceTensor>& outputs,
                                     uint64_t workspace) const {
  const Graph& g = *graph_;  // callers entered the engine's context (enter: kernels loaded)
  // Names first: every given name must exist, every declared one must be given.
  std::map<std::string, int> in_ids, out_ids;
  for (int id : g.inputs()) in_ids[g.tensor(id).name] = id;
  for (int id : g.outputs()) out_ids[g.tensor(id).name] = id;
  for (const auto& [name, t] : inputs)
    KILN_CHECK(in_ids.count(name),
               "run: inputs: '{}' is not an input of graph '{}'; its inputs are: {}", name,
               g.name(), names_of(g, g.inputs()));
  for (const auto& [name, t] : outputs)
    KILN_CHECK(out_ids.count(name),
               "run: outputs: '{}' is not an output of graph '{}'; its outputs are: {}", name,
               g.name(), names_of(g, g.outputs()));
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& [name, id] : in_ids) {
    auto it = inputs.find(name);
    KILN_CHECK(it != inputs.end(), "run: input '{}' ({}) is missing", name,
               g.tensor(id).desc.str());
    KILN_CHECK(it->second.ptr != 0, "run: input '{}': the device pointer is null", name);
    KILN_CHECK(it->second.ptr % kPtrAlign == 0,
               "run: input '{}': device pointer {:#x} is not {}-byte aligned", name, it->second.ptr,
               kPtrAlign);
    shapes[name] = it->second.shape;
  }
  Prepared p;
  p.bindings = g.bind(shapes);  // located errors for rank/dim mismatches
  const Bindings& b = p.bindings;

  std::map<int, uint64_t> ptr;
  for (const auto& [name, id] : in_ids) ptr[id] = inputs.at(name).ptr;
  for (const auto& [id, dp] : constant_ptr_) ptr[id] = dp;
  for (const auto& [name, id] : out_ids) {
    auto it = outputs.find(name);
    const TensorInfo& t = g.tensor(id);
    KILN_CHECK(it != outputs.end(), "run: output '{}' ({}) is missing", name, t.desc.str());
    KILN_CHECK(it->second.ptr != 0, "run: output '{}': the device pointer is null", name);
    KILN_CHECK(it->second.ptr % kPtrAlign == 0,
               "run: output '{}': device pointer {:#x} is not {}-byte aligned", name,
               it->second.ptr, kPtrAlign);
    std::vector<int64_t> want = eval_shape(t.desc.shape, b);
    KILN_CHECK(it->second.shape == want,
               "run: output '{}': expected shape {} ({} with {}), found {}", name, shape_text(want),
               shape_str(t.desc.shape), bindings_str(b), shape_text(it->second.shape));
    if (t.role == TensorRole::Intermediate) {
      ptr[id] = it->second.ptr;
    } else {  // an input or constant listed as an output: copied after the kernels
      auto src = ptr.find(id);
      KILN_ASSERT(src != ptr.end(), "output '{}' has no device data", name);
      p.copies.push_back(
          {it->second.ptr, src->second, static_cast<size_t>(tensor_bytes(t.desc, b))});
    }
  }

  std::shared_ptr<const ArenaPlan> ap = arena(b);
  uint64_t base = workspace;
  if (ap->peak > 0 && base == 0) {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int64_t>(arena_.bytes()) < ap->peak) {
      // Earlier runs may still use the old arena: wait for them before freeing it.
      if (arena_.ptr()) cuda::ctx_synchronize();
      // Grow geometrically (x1.5, 2 MiB granules): rising batch sizes reallocate (and
      // synchronize) a logarithmic number of times, not at every new size.
      constexpr size_t kGranule = size_t{2} << 20;
      size_t want = std::max(static_cast<size_t>(ap->peak), arena_.bytes() + arena_.bytes() / 2);
      if (want > static_cast<size_t>(ap->peak)) {  // growth beyond the need: only if it fits
        size_t free = 0, total = 0;
        if (cuda::mem_info(&free, &total) && want > free + arena_.bytes())
          want = static_cast<size_t>(ap->peak);
      }
      cuda::check_device_bytes(
          fmt::format("graph '{}': the workspace (intermediate tensors) for {}", graph_->name(),
                      bindings_str(b)),
          static_cast<uint64_t>(ap->peak));
      arena_ = cuda::DeviceBuffer((want + kGranule - 1) / kGranule * kGranule);
      ++arena_generation_;  // CUDA graphs captured on the old arena are never replayed again
    }
    base = arena_.ptr();
  }
  KILN_CHECK(ap->peak == 0 || base % kArenaAlign == 0,
             "run: workspace pointer {:#x} is not {}-byte aligned", workspace, kArenaAlign);
  for (const auto& [id, off] : ap->offset) ptr[id] = base + static_cast<uint64_t>(off);
  for (const ViewBinding& v : views_)  // their root's memory, at their offset
    if (auto it = ptr.find(v.root); it != ptr.end())
      ptr[v.view] = it->second + static_cast<uint64_t>(v.offset.eval(b) * v.elem_bytes);

  uint64_t scratch_ptr = ap->scratch_bytes ? base + static_cast<uint64_t>(ap->scratch_offset) : 0;
  uint64_t counters_ptr =
      ap->counters_bytes ? base + static_cast<uint64_t>(ap->counters_offset) : 0;
  p.counters = counters_ptr;
  p.counters_bytes = static_cast<size_t>(ap->counters_bytes);
  p.errors = ap->errors_bytes ? base + static_cast<uint64_t>(ap->errors_offset) : 0;
  p.errors_bytes = static_cast<size_t>(ap->errors_bytes);
  uint64_t next_error_word = p.errors;

  for (const ExecutorKernel& k : kernels_) {
    Launch l;
    l.kernel = &k;
    for (const KernelArg& a : k.spec.args) {
      if (a.kind == KernelArg::Kind::Int) {
        int64_t v = a.value.eval(b);
        uint64_t u = 0;
        std::memcpy(&u, &v, sizeof(u));
        l.args.push_back(u);
      } else if (a.kind == KernelArg::Kind::Scratch) {
        l.args.push_back(scratch_ptr);
      } else if (a.kind == KernelArg::Kind::Counters) {
        l.args.push_back(counters_ptr);
      } else if (a.kind == KernelArg::Kind::ErrorWord) {
        l.args.push_back(next_error_word);
        next_error_word += 4;
      } else if (a.kind == KernelArg::Kind::TensorMap) {
        l.map_of_arg.resize(l.args.size() + 1, -1);
        l.map_of_arg.back() = static_cast<int32_t>(l.maps.size());
        l.maps.emplace_back();  // encoded below, once the grid is known not to be empty
        l.args.push_back(0);
      } else {
        auto it = ptr.find(a.tensor);
        KILN_ASSERT(it != ptr.end(), "kernel {} argument tensor {} has no device memory",
                    k.spec.name, a.tensor);
        l.args.push_back(it->second);
      }
    }
    static constexpr int64_t kMax[3] = {2147483647, 65535, 65535};
    for (int i = 0; i < 3; ++i) {
      int64_t v = k.spec.grid[i].eval(b);
      if (v <= 0) {
        l.empty = true;
        v = 1;
      }
      KILN_CHECK(v <= kMax[i],
                 "run: kernel {}: grid dim {} is {} for {}, above the CUDA limit {} (shapes too "
                 "large for this kernel)",
                 k.spec.name, "xyz"[i], v, bindings_str(b), kMax[i]);
      l.grid[i] = static_cast<uint32_t>(v);
      KILN_ASSERT(k.spec.block[i] > 0, "kernel {}: block dim {} is {}", k.spec.name, i,
                  k.spec.block[i]);
      l.block[i] = static_cast<uint32_t>(k.spec.block[i]);
    }
    if (!l.empty) {
      for (size_t i = 0; i < l.map_of_arg.size(); ++i) {
        if (l.map_of_arg[i] < 0) continue;
        const KernelArg& a = k.spec.args[i];
        auto it = ptr.find(a.tensor);
        KILN_ASSERT(it != ptr.end(), "kernel {} tensor map over tensor {} has no device memory",
                    k.spec.name, a.tensor);
        cuda::encode_kernel_tensor_map(&l.maps[static_cast<size_t>(l.map_of_arg[i])], a,
                                       graph_->tensor(a.tensor).desc.dtype, it->second, b);
      }
    }
    p.launches.push_back(std::move(l));
  }
  return p;
}

void Executor::zero_counters(const Prepared& p, void* stream) {
  if (p.counters_bytes) cuda::memset_d8_async(p.counters, 0, p.counters_bytes, stream);
  if (p.errors_bytes) cuda::memset_d8_async(p.errors, 0, p.errors_bytes, stream);
}

void Executor::check_errors(uint64_t errors, size_t bytes, void* stream) const {
  if (bytes == 0) return;
  cuda::stream_synchronize(stream);
  std::vector<uint32_t> words(bytes / 4);
  cuda::memcpy_dtoh(words.data(), errors, bytes);
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
  KILN_CHECK(report.empty(),
             "run: graph '{}': {} (the kernel clamped its reads, the outputs are not valid)",
             graph_->name(), report);
}

void Executor::launch(Launch& l, void* stream) const {
  if (l.empty) return;
  const KernelSpec& s = l.kernel->spec;
  void* small[16];
  std::vector<void*> big;
  void** params = small;
  if (l.args.size() > 16) {
    big.resize(l.args.size());
    params = big.data();
  }
  for (size_t i = 0; i < l.args.size(); ++i)
    params[i] = i < l.map_of_arg.size() && l.map_of_arg[i] >= 0
                    ? static_cast<void*>(l.maps[static_cast<size_t>(l.map_of_arg[i])].v)
                    : static_cast<void*>(&l.args[i]);
  cuda::launch(l.kernel->function, l.grid, l.block, static_cast<uint32_t>(s.smem_bytes), stream,
               params, s.name);
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
  GraphKey key = graph_key(inputs, outputs, workspace);
  std::shared_ptr<GraphExec> ge;
  {
    std::lock_guard<std::mutex> lock(graph_mu_);
    auto it = graphs_.find(key);
    if (it != graphs_.end()) ge = it->second;
  }
  if (!ge) {
    // Capture: prepare (all checks) on this thread, record the launches on a private stream.
    Prepared p = prepare(inputs, outputs, workspace);
    if (workspace == 0) key = graph_key(inputs, outputs, workspace);  // the arena may have grown
    auto fresh = std::make_shared<GraphExec>();
    fresh->bindings = p.bindings;
    fresh->errors = p.errors;
    fresh->errors_bytes = p.errors_bytes;
    fresh->range = "kiln graph " + graph_->name();
    void* cs = cuda::stream_create_nonblocking();
    struct StreamGuard {
      void* s;
      ~StreamGuard() { cuda::stream_destroy(s); }
    } guard{cs};
    cuda::stream_begin_capture(cs);
    try {
      zero_counters(p, cs);
      for (Launch& l : p.launches) {
        if (cfg.dump_launch) {
          const KernelSpec& s = l.kernel->spec;
          fmt::print(stderr, "kiln: capture {} grid [{},{},{}] block [{},{},{}] smem {} ({}){}\n",
                     s.name, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2],
                     s.smem_bytes, bindings_str(p.bindings), l.empty ? " skipped: empty" : "");
        }
        launch(l, cs);
      }
      for (const Copy& c : p.copies) cuda::memcpy_dtod_async(c.dst, c.src, c.bytes, cs);
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

Bindings Executor::run(const std::map<std::string, DeviceTensor>& inputs,
                       const std::map<std::string, DeviceTensor>& outputs, void* stream,
                       uint64_t workspace) const {
  const cuda::ContextScope scope = enter("run");
  Prepared p = prepare(inputs, outputs, workspace);
  const EnvConfig& cfg = env();
  bool dump = cfg.dump_launch;
  zero_counters(p, stream);
  for (Launch& l : p.launches) {
    if (dump) {
      const KernelSpec& s = l.kernel->spec;
      fmt::print(stderr, "kiln: launch {} grid [{},{},{}] block [{},{},{}] smem {} ({}){}\n",
                 s.name, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2],
                 s.smem_bytes, bindings_str(p.bindings), l.empty ? " skipped: empty" : "");
    }
    NvtxRange r(cfg.nvtx && !l.empty, l.kernel->spec.name);
    launch(l, stream);
  }
  for (const Copy& c : p.copies) cuda::memcpy_dtod_async(c.dst, c.src, c.bytes, stream);
  check_errors(p.errors, p.errors_bytes, stream);
  return p.bindings;
}

std::vector<double> Executor::time_kernels(const std::map<std::string, DeviceTensor>& inputs,
                                           const std::map<std::string, DeviceTensor>& outputs,
                                           int warmup, int iters, Bindings* bound) const {
  KILN_CHECK(iters >= 1, "time_kernels: iters must be at least 1, found {}", iters);
  KILN_CHECK(warmup >= 0, "time_kernels: warmup must be non-negative, found {}", warmup);
  const cuda::ContextScope scope = enter("time_kernels");
  Prepared p = prepare(inputs, outputs, 0);
  if (bound) *bound = p.bindings;
  zero_counters(p, nullptr);
  for (int w = 0; w < warmup; ++w)
    for (Launch& l : p.launches) launch(l, nullptr);
  // Each kernel alone, timed as the anchors are (L2 flushed, launch latency hidden).
  std::vector<double> medians;
  for (Launch& l : p.launches)
    medians.push_back(cuda::median_ms(cuda::time_flushed([&] { launch(l, nullptr); }, 0, iters)));
  for (const Copy& c : p.copies) cuda::memcpy_dtod_async(c.dst, c.src, c.bytes, nullptr);
  cuda::stream_synchronize(nullptr);
  return medians;
}

}  // namespace kiln
