// Runs compiled kernels: binds symbols from the input shapes, checks the caller's buffers, places
// intermediates in an arena (runtime/memory_plan.hpp), evaluates every kernel's arguments and grid
// for the bindings and launches them in order on a stream. Nothing is recompiled for new shapes.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/kernel_cache.hpp"
#include "codegen/kernel_spec.hpp"
#include "kiln/device_tensor.hpp"
#include "runtime/cuda_driver.hpp"
#include "runtime/error_readback.hpp"
#include "runtime/memory_plan.hpp"
#include "runtime/tensor_map.hpp"

namespace kiln {

// Modules loaded into one context (an Engine's: its device's primary context or the caller's), by
// cache key and entry. Thread-safe; unloads everything when destroyed. Executors built on it run
// every driver call in its context (cuda::ContextScope).
class ModuleCache {
 public:
  explicit ModuleCache(cuda::Context ctx) : ctx_(ctx) {}
  ~ModuleCache();
  ModuleCache(const ModuleCache&) = delete;
  ModuleCache& operator=(const ModuleCache&) = delete;

  // The CUfunction of `entry` in the cubin of `k` (loading it once), with its max dynamic shared
  // memory raised to `smem_bytes` when that is above the 48 KB default.
  void* function(const CachedKernel& k, const std::string& entry, int smem_bytes);
  int64_t loaded_modules() const;
  const cuda::Context& context() const { return ctx_; }

 private:
  cuda::Context ctx_;
  struct Loaded {
    void* module = nullptr;
    std::map<std::string, void*> functions;
    std::map<void*, int> smem_set;
  };
  mutable std::mutex mu_;
  std::map<std::string, Loaded> modules_;
};

struct ExecutorKernel {
  KernelSpec spec;
  CachedKernel cached;
  void* function = nullptr;  // set when loaded
};

class Executor {
 public:
  // `modules` null: compile-only (run() is then a user error saying why: `not_loaded_reason`).
  // Otherwise every kernel is loaded and the constants the kernels use are uploaded now.
  // `deferred_errors`: EngineOptions.deferred_errors (a run does not wait to check its words).
  Executor(std::shared_ptr<const Graph> g, std::vector<ExecutorKernel> kernels,
           std::shared_ptr<ModuleCache> modules, std::string not_loaded_reason,
           bool deferred_errors = false);
  ~Executor();

  const Graph& graph() const { return *graph_; }
  const std::vector<ExecutorKernel>& kernels() const { return kernels_; }
  bool loaded() const { return modules_ != nullptr; }

  // The arena layout for these bindings (cached per Bindings).
  std::shared_ptr<const ArenaPlan> arena(const Bindings& b) const;
  std::map<std::string, std::vector<int64_t>> output_shapes(const Bindings& b) const;

  // Checks, binds, launches; returns the bindings used.
  Bindings run(const std::map<std::string, DeviceTensor>& inputs,
               const std::map<std::string, DeviceTensor>& outputs, void* stream,
               uint64_t workspace) const;
  // Per-kernel median time in ms (CUDA events) over `iters` launches after `warmup` full runs.
  std::vector<double> time_kernels(const std::map<std::string, DeviceTensor>& inputs,
                                   const std::map<std::string, DeviceTensor>& outputs, int warmup,
                                   int iters, Bindings* bound) const;

  // Waits for the error words of earlier runs read back without waiting (deferred_errors) and
  // throws a user error naming each reporting node; nothing otherwise.
  void check_deferred_errors() const;

  // Bytes of constants on the device.
  int64_t constant_bytes() const { return static_cast<int64_t>(constants_.bytes()); }

  // CUDA graphs (EngineOptions::cuda_graphs): like run(), but the launches of each distinct
  // (input/output names, pointers and shapes, workspace) are captured into a CUDA graph once and
  // replayed afterwards. Thread-safe like run().
  Bindings run_graph(const std::map<std::string, DeviceTensor>& inputs,
                     const std::map<std::string, DeviceTensor>& outputs, void* stream,
                     uint64_t workspace) const;
  // Captured CUDA graphs held now, and captures done so far.
  int64_t cuda_graph_count() const;
  int64_t cuda_graph_captures() const;

 private:
  // ---- launch plans (runtime/launch_plan.cpp)
  // A run's launches for one set of input shapes, built once with every check and every
  // expression evaluated; a later run with those shapes only checks its buffers and adds their
  // addresses (the per-call cost of CompiledGraph::run is then the launches themselves).
  // A pointer's origin: slot < 0 is an absolute address (a constant) in `offset`; otherwise
  // base[slot] + offset, the slots being the caller's inputs then outputs in name order, then
  // the workspace (the caller's or the internal arena).
  struct Origin {
    int slot = -1;
    uint64_t offset = 0;
  };
  struct PlannedMap {  // a TMA descriptor (KernelArg::Kind::TensorMap)
    int32_t arg = 0;
    Origin at;
    const KernelArg* spec = nullptr;
    DType dtype = DType::F32;
    uint64_t encoded_for = 0;  // `bytes` encode this address; another is encoded per call
    cuda::TensorMapBytes bytes{};
  };
  struct PlannedLaunch {
    const ExecutorKernel* kernel = nullptr;
    uint32_t grid[3] = {1, 1, 1};
    uint32_t block[3] = {1, 1, 1};
    bool empty = false;          // a zero-sized grid: nothing to do
    std::vector<uint64_t> args;  // 8 bytes each; an argument from a slot holds its offset
    std::vector<std::pair<int32_t, int32_t>> relative;  // (arg, slot): args[arg] + base[slot]
    std::vector<PlannedMap> maps;
  };
  struct PlannedCopy {  // a graph output that is an input or a constant
    Origin dst, src;
    size_t bytes = 0;
  };
  struct LaunchPlan {
    Bindings bindings;
    std::vector<std::string> in_names, out_names;  // in the caller's (sorted) map order
    std::vector<std::vector<int64_t>> in_shapes, out_shapes;
    int64_t workspace_peak = 0;
    Origin counters, errors;  // split-K tile counters and error words, zeroed before a run
    size_t counters_bytes = 0, errors_bytes = 0;
    std::vector<PlannedLaunch> launches;
    std::vector<PlannedCopy> copies;
    int workspace_slot() const { return static_cast<int>(in_names.size() + out_names.size()); }
  };
  using Bases = std::vector<uint64_t>;  // per slot
  // The engine's context on this thread for one call (`what` names it in the error), after the
  // check that the kernels were loaded (a graph compiled with load_kernels off has no context).
  cuda::ContextScope enter(const char* what) const;
  // The plan for these buffers' shapes (cached) and the slots' addresses for this call; every
  // check of the buffers runs, with located errors. Needs the context entered.
  std::shared_ptr<const LaunchPlan> plan_for(const std::map<std::string, DeviceTensor>& inputs,
                                             const std::map<std::string, DeviceTensor>& outputs,
                                             uint64_t workspace, Bases* base) const;
  std::shared_ptr<LaunchPlan> build_plan(const std::map<std::string, DeviceTensor>& inputs,
                                         const std::map<std::string, DeviceTensor>& outputs) const;
  // Whether a plan fits these buffers (names, shapes, non-null aligned pointers).
  static bool fits(const LaunchPlan& p, const std::map<std::string, DeviceTensor>& inputs,
                   const std::map<std::string, DeviceTensor>& outputs);
  // The slots' addresses; the internal arena grows to the plan's workspace when none is given.
  Bases bases(const LaunchPlan& p, const std::map<std::string, DeviceTensor>& inputs,
              const std::map<std::string, DeviceTensor>& outputs, uint64_t workspace) const;
  void launch(const PlannedLaunch& l, const Bindings& b, const uint64_t* base, void* stream) const;
  // Zeroes the counters and error words, launches every kernel (`verb` for KILN_DUMP=launch),
  // then the output copies, all on `stream`.
  void launch_all(const LaunchPlan& p, const uint64_t* base, void* stream, const char* verb) const;
  // After the launches of a run with error words (`errors`, `bytes`) on `stream`: waits for the
  // stream, reads the words back and throws a user error naming each reporting node. Nothing
  // (no wait) when the plan has no kernel that reports errors.
  // With deferred errors (readback_), queues the words' copy instead, reporting the earlier runs'
  // words it had to wait for.
  void check_errors(uint64_t errors, size_t bytes, void* stream) const;
  // A user error naming each node whose word in `words` is set (nothing when none is); `earlier`:
  // the words are those of earlier runs, read back without waiting.
  void report_errors(const std::vector<uint32_t>& words, bool earlier) const;
  static uint64_t address(Origin o, const uint64_t* base) {
    return o.slot < 0 ? o.offset : base[o.slot] + o.offset;
  }

  std::shared_ptr<const Graph> graph_;
  std::vector<ExecutorKernel> kernels_;
  std::vector<KernelSpec> arg_specs_;  // names and args only, for plan_arena
  std::shared_ptr<ModuleCache> modules_;
  std::string not_loaded_reason_;
  cuda::DeviceBuffer constants_;
  std::map<int, uint64_t> constant_ptr_;  // tensor id -> device pointer
  // Tensors in another's memory (TensorInfo::view_of): the view's pointer is its root's plus
  // view_offset elements, evaluated for each run's bindings.
  struct ViewBinding {
    int view = -1, root = -1;
    Dim offset;
    int64_t elem_bytes = 0;
  };
  std::vector<ViewBinding> views_;
  // The kernel args that are error words, in order: word i of the run's error words belongs to
  // the node (by name) error_sites_[i] names.
  std::vector<std::string> error_sites_;
  // EngineOptions.deferred_errors on a graph with error words: their readback without waiting.
  mutable std::unique_ptr<ErrorReadback> readback_;

  mutable std::mutex mu_;
  mutable std::map<Bindings, std::shared_ptr<const ArenaPlan>> arenas_;
  // Launch plans by the inputs' shapes (rank and dims, in name order); the last one used first.
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const LaunchPlan>> plans_;
  mutable std::shared_ptr<const LaunchPlan> last_plan_;
  mutable cuda::DeviceBuffer arena_;       // the internal arena when the caller gives no workspace
  mutable uint64_t arena_generation_ = 0;  // bumped whenever arena_ (or scratch) is reallocated
  // Kernel scratch (KernelArg::Scratch) and zero-initialized self-resetting counters
  // (KernelArg::Counters), shared by the kernels of a run (they run one after another).

  // ---- CUDA graphs
  struct GraphExec;
  struct GraphKey {
    std::vector<uint64_t> words;  // workspace, arena generation, then ptr/rank/dims per tensor
    std::vector<std::string> names;
    bool operator<(const GraphKey& o) const {
      return words != o.words ? words < o.words : names < o.names;
    }
  };
  GraphKey graph_key(const std::map<std::string, DeviceTensor>& inputs,
                     const std::map<std::string, DeviceTensor>& outputs, uint64_t workspace) const;
  mutable std::mutex graph_mu_;
  mutable std::map<GraphKey, std::shared_ptr<GraphExec>> graphs_;
  mutable int64_t graph_captures_ = 0;
};

// The bytes of a constant in its declared device layout (NCHW row-major, NHWC, or Strided).
std::vector<std::byte> constant_device_bytes(const TensorInfo& t);

}  // namespace kiln
