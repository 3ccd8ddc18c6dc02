// Intermediate buffers placed in one arena by liveness: buffers whose live ranges (in kernel
// order) do not overlap may share memory. Greedy by size (largest first), first-fit into the free
// gaps among the already-placed buffers that are live at the same time, 256-byte aligned.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "kiln/graph.hpp"

namespace kiln {

struct BufferRequest {
  int64_t bytes = 0;
  int first = 0;  // first kernel (step) that touches it
  int last = 0;   // last kernel (step) that touches it, inclusive
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per request, aligned
  int64_t peak = 0;              // arena size
  int64_t total = 0;             // sum of the aligned sizes (what one buffer each would take)
};

constexpr int64_t kArenaAlign = 256;

MemoryPlan plan_memory(const std::vector<BufferRequest>& bufs, int64_t align = kArenaAlign);

// Bytes a tensor of this desc occupies for these bindings (dense layouts: numel x element size;
// Strided: up to the furthest element).
int64_t tensor_bytes(const TensorDesc& d, const Bindings& b);

// The arena for one set of bindings: every tensor that some kernel touches and that is neither a
// graph input, a constant nor a graph output lives here, from the first kernel that references it
// to the last.
struct ArenaPlan {
  std::map<int, int64_t> offset;  // tensor id -> byte offset in the arena
  int64_t peak = 0;   // bytes of workspace needed (tensors, then kernel scratch and counters)
  int64_t total = 0;  // sum of every intermediate's size (what the liveness packing saves against)
  // Split-K kernels' f32 partials and per-tile counters live in the workspace too, after the
  // tensors, so that concurrent runs with their own workspaces never share them. The counters
  // are zeroed on the run's stream before the launches (the kernels leave them zero, but a
  // caller's workspace starts with anything in it).
  int64_t scratch_offset = 0, scratch_bytes = 0;
  int64_t counters_offset = 0, counters_bytes = 0;
  // The error words (KernelArg::ErrorWord, one 32-bit word per kernel that reports errors),
  // last: zeroed before the launches and read back after them. None without such kernels.
  int64_t errors_offset = 0, errors_bytes = 0;
};

ArenaPlan plan_arena(const Graph& g, const std::vector<KernelSpec>& kernels, const Bindings& b);

}  // namespace kiln
