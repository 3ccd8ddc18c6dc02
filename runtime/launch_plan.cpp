// Executor launch plans: what CompiledGraph::run decides once per set of input shapes (the
// bindings, the arena, every kernel's arguments and grid), so that each run only checks its
// buffers, adds their addresses and launches. Zoo graphs of 60-80 kernels spent 5-12 us of host
// time per kernel in the per-run evaluation this replaces (docs/PERFORMANCE.md, session 17).
#include <fmt/format.h>

#include <cstring>

#include "engine/base/check.hpp"
#include "engine/base/env.hpp"
#include "runtime/executor.hpp"
#include "runtime/run_text.hpp"

namespace kiln {

namespace {

constexpr uint64_t kPtrAlign = 16;  // kernels use 16-byte vector accesses

void check_pointer(const char* what, const std::string& name, uint64_t ptr) {
  KILN_CHECK(ptr != 0, "run: {} '{}': the device pointer is null", what, name);
  KILN_CHECK(ptr % kPtrAlign == 0, "run: {} '{}': device pointer {:#x} is not {}-byte aligned",
             what, name, ptr, kPtrAlign);
}

std::vector<int64_t> shapes_key(const std::map<std::string, DeviceTensor>& inputs) {
  std::vector<int64_t> k;
  for (const auto& [name, t] : inputs) {
    k.push_back(static_cast<int64_t>(t.shape.size()));
    k.insert(k.end(), t.shape.begin(), t.shape.end());
  }
  return k;
}

bool same_buffers(const std::vector<std::string>& names,
                  const std::vector<std::vector<int64_t>>& shapes,
                  const std::map<std::string, DeviceTensor>& given) {
  if (given.size() != names.size()) return false;
  size_t i = 0;
  for (const auto& [name, t] : given) {
    if (name != names[i] || t.shape != shapes[i] || t.ptr == 0 || t.ptr % kPtrAlign != 0)
      return false;
    ++i;
  }
  return true;
}

}  // namespace

bool Executor::fits(const LaunchPlan& p, const std::map<std::string, DeviceTensor>& inputs,
                    const std::map<std::string, DeviceTensor>& outputs) {
  return same_buffers(p.in_names, p.in_shapes, inputs) &&
         same_buffers(p.out_names, p.out_shapes, outputs);
}

// Every check of a run, with located errors; the origins of every pointer the kernels take.
std::shared_ptr<Executor::LaunchPlan> Executor::build_plan(
    const std::map<std::string, DeviceTensor>& inputs,
    const std::map<std::string, DeviceTensor>& outputs) const {
  const Graph& g = *graph_;
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
  auto p = std::make_shared<LaunchPlan>();
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& [name, id] : in_ids) {
    auto it = inputs.find(name);
    KILN_CHECK(it != inputs.end(), "run: input '{}' ({}) is missing", name,
               g.tensor(id).desc.str());
    check_pointer("input", name, it->second.ptr);
    shapes[name] = it->second.shape;
    p->in_names.push_back(name);
    p->in_shapes.push_back(it->second.shape);
  }
  p->bindings = g.bind(shapes);  // located errors for rank/dim mismatches
  const Bindings& b = p->bindings;

  std::map<int, Origin> at;
  int slot = 0;
  for (const auto& [name, id] : in_ids) at[id] = {slot++, 0};
  for (const auto& [id, dp] : constant_ptr_) at[id] = {-1, dp};
  for (const auto& [name, id] : out_ids) {
    auto it = outputs.find(name);
    const TensorInfo& t = g.tensor(id);
    KILN_CHECK(it != outputs.end(), "run: output '{}' ({}) is missing", name, t.desc.str());
    check_pointer("output", name, it->second.ptr);
    std::vector<int64_t> want = eval_shape(t.desc.shape, b);
    KILN_CHECK(it->second.shape == want,
               "run: output '{}': expected shape {} ({} with {}), found {}", name, shape_text(want),
               shape_str(t.desc.shape), bindings_str(b), shape_text(it->second.shape));
    p->out_names.push_back(name);
    p->out_shapes.push_back(want);
    const Origin mine{slot++, 0};
    if (t.role == TensorRole::Intermediate) {
      at[id] = mine;
    } else {  // an input or constant listed as an output: copied after the kernels
      auto src = at.find(id);
      KILN_ASSERT(src != at.end(), "output '{}' has no device data", name);
      p->copies.push_back({mine, src->second, static_cast<size_t>(tensor_bytes(t.desc, b))});
    }
  }

  std::shared_ptr<const ArenaPlan> ap = arena(b);
  const int ws = p->workspace_slot();
  p->workspace_peak = ap->peak;
  for (const auto& [id, off] : ap->offset) at[id] = {ws, static_cast<uint64_t>(off)};
  for (const ViewBinding& v : views_)  // their root's memory, at their offset
    if (auto it = at.find(v.root); it != at.end())
      at[v.view] = {it->second.slot,
                    it->second.offset + static_cast<uint64_t>(v.offset.eval(b) * v.elem_bytes)};
  const Origin scratch{ws, static_cast<uint64_t>(ap->scratch_offset)};
  p->counters = {ws, static_cast<uint64_t>(ap->counters_offset)};
  p->counters_bytes = static_cast<size_t>(ap->counters_bytes);
  p->errors = {ws, static_cast<uint64_t>(ap->errors_offset)};
  p->errors_bytes = static_cast<size_t>(ap->errors_bytes);
  Origin next_error_word = p->errors;

  for (const ExecutorKernel& k : kernels_) {
    PlannedLaunch l;
    l.kernel = &k;
    auto push = [&l](Origin o) {
      if (o.slot >= 0) l.relative.emplace_back(static_cast<int32_t>(l.args.size()), o.slot);
      l.args.push_back(o.offset);
    };
    for (const KernelArg& a : k.spec.args) {
      if (a.kind == KernelArg::Kind::Int) {
        int64_t v = a.value.eval(b);
        uint64_t u = 0;
        std::memcpy(&u, &v, sizeof(u));
        l.args.push_back(u);
      } else if (a.kind == KernelArg::Kind::Scratch) {
        push(ap->scratch_bytes ? scratch : Origin{});
      } else if (a.kind == KernelArg::Kind::Counters) {
        push(ap->counters_bytes ? p->counters : Origin{});
      } else if (a.kind == KernelArg::Kind::ErrorWord) {
        push(next_error_word);
        next_error_word.offset += 4;
      } else if (a.kind == KernelArg::Kind::TensorMap) {
        auto it = at.find(a.tensor);
        KILN_ASSERT(it != at.end(), "kernel {} tensor map over tensor {} has no device memory",
                    k.spec.name, a.tensor);
        l.maps.push_back({static_cast<int32_t>(l.args.size()), it->second, &a,
                          graph_->tensor(a.tensor).desc.dtype});
        l.args.push_back(0);
      } else {
        auto it = at.find(a.tensor);
        KILN_ASSERT(it != at.end(), "kernel {} argument tensor {} has no device memory",
                    k.spec.name, a.tensor);
        push(it->second);
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
    p->launches.push_back(std::move(l));
  }
  return p;
}

Executor::Bases Executor::bases(const LaunchPlan& p,
                                const std::map<std::string, DeviceTensor>& inputs,
                                const std::map<std::string, DeviceTensor>& outputs,
                                uint64_t workspace) const {
  Bases base;
  base.reserve(static_cast<size_t>(p.workspace_slot() + 1));
  for (const auto& [name, t] : inputs) base.push_back(t.ptr);
  for (const auto& [name, t] : outputs) base.push_back(t.ptr);
  uint64_t ws = workspace;
  if (p.workspace_peak > 0 && ws == 0) {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int64_t>(arena_.bytes()) < p.workspace_peak) {
      // Earlier runs may still use the old arena: wait for them before freeing it.
      if (arena_.ptr()) cuda::ctx_synchronize();
      // Grow geometrically (x1.5, 2 MiB granules): rising batch sizes reallocate (and
      // synchronize) a logarithmic number of times, not at every new size.
      constexpr size_t kGranule = size_t{2} << 20;
      const auto peak = static_cast<size_t>(p.workspace_peak);
      size_t want = std::max(peak, arena_.bytes() + arena_.bytes() / 2);
      if (want > peak) {  // growth beyond the need: only if it fits
        size_t free = 0, total = 0;
        if (cuda::mem_info(&free, &total) && want > free + arena_.bytes()) want = peak;
      }
      cuda::check_device_bytes(
          fmt::format("graph '{}': the workspace (intermediate tensors) for {}", graph_->name(),
                      bindings_str(p.bindings)),
          static_cast<uint64_t>(p.workspace_peak));
      arena_ = cuda::DeviceBuffer((want + kGranule - 1) / kGranule * kGranule);
      ++arena_generation_;  // CUDA graphs captured on the old arena are never replayed again
    }
    ws = arena_.ptr();
  }
  KILN_CHECK(p.workspace_peak == 0 || ws % kArenaAlign == 0,
             "run: workspace pointer {:#x} is not {}-byte aligned", workspace, kArenaAlign);
  base.push_back(ws);
  return base;
}

std::shared_ptr<const Executor::LaunchPlan> Executor::plan_for(
    const std::map<std::string, DeviceTensor>& inputs,
    const std::map<std::string, DeviceTensor>& outputs, uint64_t workspace, Bases* base) const {
  std::shared_ptr<const LaunchPlan> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (last_plan_ && fits(*last_plan_, inputs, outputs)) p = last_plan_;
  }
  std::vector<int64_t> key;
  if (!p) {
    key = shapes_key(inputs);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end() && fits(*it->second, inputs, outputs)) p = it->second;
  }
  if (p) {
    *base = bases(*p, inputs, outputs, workspace);
    std::lock_guard<std::mutex> lock(mu_);
    last_plan_ = p;
    return p;
  }
  std::shared_ptr<LaunchPlan> fresh = build_plan(inputs, outputs);  // throws on bad buffers
  *base = bases(*fresh, inputs, outputs, workspace);
  for (PlannedLaunch& l : fresh->launches) {  // encoded for this run's addresses
    if (l.empty) continue;
    for (PlannedMap& m : l.maps) {
      m.encoded_for = address(m.at, base->data());
      cuda::encode_kernel_tensor_map(&m.bytes, *m.spec, m.dtype, m.encoded_for, fresh->bindings);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (plans_.size() >= 64) plans_.clear();  // bounded: many distinct shapes just replan
  plans_[key] = fresh;
  last_plan_ = fresh;
  return fresh;
}

void Executor::launch(const PlannedLaunch& l, const Bindings& b, const uint64_t* base,
                      void* stream) const {
  if (l.empty) return;
  const KernelSpec& s = l.kernel->spec;
  constexpr size_t kSmall = 24;
  uint64_t small_vals[kSmall];
  void* small_params[kSmall];
  std::vector<uint64_t> big_vals;
  std::vector<void*> big_params;
  uint64_t* vals = small_vals;
  void** params = small_params;
  const size_t n = l.args.size();
  if (n > kSmall) {
    big_vals.resize(n);
    big_params.resize(n);
    vals = big_vals.data();
    params = big_params.data();
  }
  for (size_t i = 0; i < n; ++i) {
    vals[i] = l.args[i];
    params[i] = &vals[i];
  }
  for (const auto& [arg, slot] : l.relative) vals[arg] += base[slot];
  std::vector<cuda::TensorMapBytes> fresh;  // maps over addresses other than the planned ones
  if (!l.maps.empty()) fresh.reserve(l.maps.size());
  for (const PlannedMap& m : l.maps) {
    const uint64_t ptr = address(m.at, base);
    const cuda::TensorMapBytes* bytes = &m.bytes;
    if (ptr != m.encoded_for) {
      fresh.emplace_back();
      cuda::encode_kernel_tensor_map(&fresh.back(), *m.spec, m.dtype, ptr, b);
      bytes = &fresh.back();
    }
    params[m.arg] = const_cast<uint64_t*>(bytes->v);  // the driver copies the parameters
  }
  cuda::launch(l.kernel->function, l.grid, l.block, static_cast<uint32_t>(s.smem_bytes), stream,
               params, s.name);
}

}  // namespace kiln
