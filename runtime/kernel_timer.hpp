// Times one generated kernel alone, on fresh random buffers, the way benchmarks time kernels
// (runtime/event_timer.hpp): what autotuning compares candidate configs with.
#pragma once

#include <map>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "kiln/graph.hpp"

namespace kiln::cuda {

// Median milliseconds of `iters` launches of `k` (compiled to `cubin`) with every symbol of its
// arguments bound by `b`. Tensor arguments get random data (constants too: values do not change
// a contraction's time), split-K scratch and counters are allocated as the executor does.
// Tensor arguments get the same data in every call (seeded by tensor id), so candidates of one
// problem compute the same values: `read_back` names tensors (the kernel's outputs) whose final
// contents are returned in `values` (raw element order, as f32) for comparison.
double time_kernel_alone(const KernelSpec& k, const std::vector<char>& cubin, const Graph& g,
                         const Bindings& b, int iters, const std::vector<int>& read_back = {},
                         std::map<int, std::vector<float>>* values = nullptr);

}  // namespace kiln::cuda
