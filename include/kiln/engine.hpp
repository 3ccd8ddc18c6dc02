// The Engine facade: plan -> codegen -> NVRTC -> cache -> run on the GPU.
//
// Thread safety: an Engine may be used from several threads at once (compiles share the kernel
// cache). A CompiledGraph is immutable after compile(); run() may be called concurrently from
// several threads provided each call uses its own stream and its own workspace.
// Details (docs/EMBEDDING.md): the kernel cache and module cache are locked, a kernel compiles
// once however many threads ask for it; run() with workspace 0 shares one internal arena and is
// NOT safe concurrently; with EngineOptions::cuda_graphs each (names, pointers, shapes,
// workspace) has its own captured graph, launched under a lock. kernels()' bytes/flops are those
// of the last bound shapes: read them while no run with other shapes is in flight.
// Devices: an Engine belongs to one device (EngineOptions::device) or to the caller's context
// (use_current_context); every driver call it makes runs in that context and leaves the calling
// thread's current context as it found it. Engines on several devices may run concurrently, each
// from its own threads and streams; a stream passed to run() must belong to the engine's context.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/device_tensor.hpp"
#include "kiln/graph.hpp"

namespace kiln {

struct EngineOptions {
  // The CUDA device (ordinal, after CUDA_VISIBLE_DEVICES, which also selects MIG instances) whose
  // primary context the engine's modules, constants, workspace and launches live in. One that
  // does not exist is a user error listing the devices. Without a driver: compile only, as ever.
  int device = 0;
  // Embedders: run in the CUDA context current on the thread that creates the Engine (not
  // retained: keep it alive while the engine lives), instead of `device`'s primary context;
  // `device` must then be 0 or that context's device. No current context is a user error.
  bool use_current_context = false;
  std::string arch;        // "sm_90", "sm_80"...; empty = the device's own (sm_90 with no device)
  bool fusion = true;      // false: one kernel per op (also KILN_DISABLE=fusion)
  bool disk_cache = true;  // also KILN_DISABLE=disk_cache
  std::string cache_dir;   // empty: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln
  bool load_kernels = true;  // false: compile to cubin only (no GPU needed)
  // Hot-shape specialization: once one concrete binding of a symbolic graph has run this many
  // times, a variant with those dims baked in is compiled in a background thread and used for
  // that exact binding from then on (the run never waits for it). 0 = off.
  int specialize_after = 0;
  // true: run() captures the launches for each distinct (input/output names, pointers, shapes,
  // workspace) into a CUDA graph once and replays it afterwards (less host overhead per run).
  // Keep buffers stable between runs to benefit; every new pointer set is a new capture.
  bool cuda_graphs = false;
  // A graph with error-reporting kernels (gather, attention_varlen) waits for its stream at the
  // end of every run to read their error words. true: it does not; the words are copied back
  // behind the run and checked at the start of the next run of the graph and by check_errors(),
  // which throw for the earlier run (as PyTorch reports a device-side assert at a later call).
  // The host then queues the next run while this one computes. The torch.compile backend sets it.
  bool deferred_errors = false;
  // Hand overrides of the memory-bound schedule rules, for measuring alternatives:
  // "pointwise.vecs=2,rownorm.threads=256,channelnorm.slice_kb=40" (docs/CONTRIBUTING.md lists the
  // keys). Empty: $KILN_SCHEDULE, else the rules.
  std::string schedule;
  // Autotuning (like cuDNN's benchmark mode): at compile, every conv/matmul whose shape class is
  // not in the tuning file yet has its candidate configs timed on the device and the fastest
  // recorded there; kernels then use the recorded config (this and later processes), otherwise
  // the rules'. Needs a device; without one the rules (and the file) are used. Symbolic dims are
  // tuned at the rules' estimates (batch 32 for conv, 2048 rows for matmul). KILN_DISABLE=autotune
  // turns measuring and the file off.
  bool autotune = false;
  std::string tuning_file;  // empty: <cache dir>/tuning.json
};

// Counters of one Engine (kiln run --stats).
struct EngineStats {
  int64_t plans = 0;
  int64_t nvrtc_compiles = 0;
  int64_t memory_cache_hits = 0;
  int64_t disk_cache_hits = 0;
  double nvrtc_ms = 0;            // total wall time in NVRTC
  int64_t graph_cache_hits = 0;   // compile() of a graph this Engine had compiled: no work at all
  int64_t specializations = 0;    // shape-specialized variants compiled and swapped in
  int64_t specialized_runs = 0;   // runs that used a specialized variant
  int64_t autotune_measured = 0;  // contraction shape classes timed by autotuning
  int64_t autotune_reused = 0;    // ... found in the tuning file instead
  // Where building graphs took its wall time (summed over builds, specializations included):
  // graph passes (batchnorm folding, channel padding), planning + code generation (autotuning
  // included), the kernel cache (NVRTC or disk reads), and the executor (module loads, constant
  // upload).
  double passes_ms = 0, codegen_ms = 0, cache_ms = 0, load_ms = 0;
};

struct KernelInfo {
  std::string name;
  int group = -1;
  std::vector<std::string> nodes;
  double compile_ms = 0;    // 0 when it came from a cache
  std::string cache;        // "nvrtc", "memory", "disk"
  int64_t bytes_moved = 0;  // for the last bound shapes
  int64_t flops = 0;
  // Contractions: "autotuned: wg128x256x64_s4 0.0312 ms (rules wg128x64x64_s4 0.0423 ms, 14
  // candidates)", "tuning file: ..." or empty (the rules).
  std::string tuning;
};

class CompiledGraphImpl;

class CompiledGraph {
 public:
  CompiledGraph();
  ~CompiledGraph();
  CompiledGraph(CompiledGraph&&) noexcept;
  CompiledGraph& operator=(CompiledGraph&&) noexcept;

  const Graph& graph() const;
  // On a temporary (`engine.compile(g).kernels()`) a copy: a reference would dangle.
  const std::vector<KernelInfo>& kernels() const&;
  std::vector<KernelInfo> kernels() &&;
  // Concrete output shapes for these bindings (bind() from the input shapes first).
  std::map<std::string, std::vector<int64_t>> output_shapes(const Bindings& b) const;
  // Bytes of device workspace needed for these bindings (the intermediate arena).
  int64_t workspace_size(const Bindings& b) const;
  // Sum of every intermediate's size (what the arena saves against).
  int64_t intermediates_total(const Bindings& b) const;

  // Runs on `stream` (a CUstream; 0 = the legacy default stream). Inputs and outputs by name;
  // outputs must be allocated by the caller with output_shapes(). `workspace` (workspace_size
  // bytes) may be 0: then an internal arena is used (not thread-safe across concurrent runs).
  // Returns once the work is queued, except for a graph with a gather or an attention_varlen:
  // that run waits for its stream and throws a user error naming the node when an index was out
  // of range (the sequence offsets were invalid), unless EngineOptions.deferred_errors.
  void run(const std::map<std::string, DeviceTensor>& inputs,
           const std::map<std::string, DeviceTensor>& outputs, void* stream = nullptr,
           uint64_t workspace = 0) const;
  // With EngineOptions.deferred_errors: waits for the error words of the runs so far and throws
  // the user error run() would have thrown for them. Nothing to do otherwise.
  void check_errors() const;

  // Per-kernel launch list for the last run (for kiln bench): kernel index -> launches.
  // Times each kernel separately with CUDA events: median over `iters` after `warmup`.
  std::vector<double> time_kernels(const std::map<std::string, DeviceTensor>& inputs,
                                   const std::map<std::string, DeviceTensor>& outputs, int warmup,
                                   int iters) const;

 private:
  friend class Engine;
  std::unique_ptr<CompiledGraphImpl> impl_;
};

class EngineImpl;

class Engine {
 public:
  explicit Engine(EngineOptions opts = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Plans, generates and compiles (or loads from cache) every kernel of the graph. A graph this
  // Engine compiled before (same ops, attributes, tensor types incl. symbolic dims, constant
  // bytes, input/output names; intermediate names may differ) returns at once, sharing the
  // compiled kernels, constants and internal arena of the first (EngineStats::graph_cache_hits).
  CompiledGraph compile(const Graph& g);
  EngineStats stats() const;
  // True when a CUDA driver and a device were found (kernels can run).
  bool has_device() const;
  // The device ordinal the engine runs on (its context's device with use_current_context).
  int device() const;
  // The target arch in use ("sm_90").
  std::string arch() const;

 private:
  std::unique_ptr<EngineImpl> impl_;
};

}  // namespace kiln
