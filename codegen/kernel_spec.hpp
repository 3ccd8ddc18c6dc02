// What codegen hands the runtime for one fusion group: CUDA source, kernel parameters and launch
// geometry as expressions over the graph's symbols, so that a new batch size only re-evaluates
// them and never recompiles.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/planner/plan.hpp"
#include "heuristics/contraction_config.hpp"
#include "heuristics/device_info.hpp"
#include "heuristics/schedule.hpp"
#include "kiln/types.hpp"

namespace kiln {

// The codes a kernel ORs into its error word (KernelArg::ErrorWord); the executor words its
// report by them.
inline constexpr unsigned kErrorIndexOutOfRange = 1u;  // gather: an index outside [-dim, dim)
inline constexpr unsigned kErrorBadOffsets = 2u;       // attention_varlen: cu_seqlens invalid

struct KernelArg {
  // Scratch: a device pointer to `value` bytes of executor-owned scratch (contents undefined).
  // Counters: a device pointer to `value` 32-bit counters that are zero at launch; the kernel
  // must leave them zero when it finishes (self-resetting), the executor zeroes them only once.
  // TensorMap: a 128-byte CUtensorMap (sm_90 TMA) over tensor `tensor`: dims `map_dims`
  // (innermost first), byte-less element strides of dims 1.. `map_strides`, boxes of `map_box`
  // elements with traversal strides `map_elem_strides`, 128-byte swizzle, out-of-bounds elements
  // read as zero; encoded at launch from the tensor's pointer (the kernel also takes that tensor
  // as a Tensor argument). The kernel declares it `const __grid_constant__ KcTmaDesc`.
  // ErrorWord: a device pointer to one 32-bit word of the executor's that is zero at launch;
  // the kernel ORs an error code into it (gather: an index out of range), which the executor
  // reads back after the run and reports as a user error naming the node that produces
  // `tensor`.
  enum class Kind { Tensor, Int, Scratch, Counters, TensorMap, ErrorWord } kind = Kind::Tensor;
  int tensor = -1;  // Tensor / TensorMap: graph tensor id; ErrorWord: the reporting node's output
  Dim value;        // Int: passed as long long, evaluated from the bindings at launch
  std::vector<Dim> map_dims = {}, map_strides = {};
  std::vector<int> map_box = {}, map_elem_strides = {};
  int map_swizzle = 128;  // the boxes' shared-memory swizzle in bytes: 128, or 0 (none)
  // The map starts this many elements past the tensor's pointer (an operand that is a slice of
  // its tensor, as q, k, v of one projection are): 16-byte aligned, as TMA needs.
  Dim map_offset = Dim(0);
  // Non-empty: the map is in im2col mode (a 4-D NHWC input of a conv, map_box unused):
  // {lower_w, lower_h, upper_w, upper_h, channels per pixel, pixels per load}. A load at
  // (c, w, h, n) with offsets (dw, dh) reads `pixels` consecutive output positions' window
  // taps, W fastest, then H, then N (see cuda::encode_im2col_tensor_map).
  std::vector<int> map_im2col = {};
};

struct KernelSpec {
  std::string name;  // readable and unique within the plan: "rownorm_bf16_c4096_add_layernorm_gelu"
  std::string entry;            // the __global__ function name (extern "C")
  std::string source;           // complete CUDA source, prelude included, no toolkit headers
  std::vector<KernelArg> args;  // in parameter order
  std::array<Dim, 3> grid{Dim(1), Dim(1), Dim(1)};
  std::array<int, 3> block{1, 1, 1};
  int smem_bytes = 0;  // dynamic shared memory
  Dim bytes_moved;     // minimum DRAM bytes (each input read once, each output written once)
  Dim flops;
  int group = -1;  // the FusionGroup id it implements
  // The NVRTC target this kernel needs when it is not the plan's own: "sm_90a" for kernels using
  // arch-specific instructions (wgmma). Empty: compile for the engine's arch.
  std::string arch;
};

struct CodegenOptions {
  int sm = 90;  // target arch (80, 86, 89, 90): picks vector widths and paths
  // The target's SMs and L2 (DeviceInfo; the H200's by default): sizes single-wave grids.
  int sm_count = 132;
  int64_t l2_bytes = int64_t{50} << 20;
  // Kernels may use arch-specific instructions (sm_90a wgmma when sm == 90); such kernels name
  // their NVRTC target in KernelSpec::arch. Off: every kernel runs on any device of the sm.
  bool arch_specific = false;
  // Hand overrides of the memory-bound schedule rules (KILN_SCHEDULE), empty by default.
  ScheduleOverrides schedule;
  // Autotuned contraction configs by shape-class key (contraction_tuning_key); a config that is
  // not a candidate of the problem is ignored (the rules decide).
  std::function<std::optional<ContractionConfig>(const std::string& key)> tuned;
};
// What the Engine builds for device `d` (queried, or default_device_info for an arch): its arch's
// kernels (sm_90a ones on sm_90), sized by its SMs and L2, under `schedule`.
CodegenOptions codegen_options(const DeviceInfo& d, const ScheduleOverrides& schedule);

// One contraction group as autotuning sees it: its shape-class key, the candidate configs (the
// rules' choice first) and their kernels, and the bindings of the graph's symbols it is timed
// at (the estimates the rules used; empty for a static graph).
struct TuningSite {
  int group = -1;
  std::string key;
  std::vector<ContractionConfig> configs;
  std::vector<KernelSpec> kernels;  // kernels[i] implements configs[i]
  std::map<std::string, int64_t> bindings;
};
std::vector<TuningSite> contraction_tuning_sites(const Graph& g, const Plan& p,
                                                 const CodegenOptions& opts = {});

// One kernel per group. Throws a user error for a combination codegen does not support, naming
// the group and its nodes.
std::vector<KernelSpec> generate_kernels(const Graph& g, const Plan& p,
                                         const CodegenOptions& opts = {});

// The device prelude (codegen/device/*.cuh, embedded at build time) by file name.
const std::string& device_file(const std::string& name);

}  // namespace kiln
