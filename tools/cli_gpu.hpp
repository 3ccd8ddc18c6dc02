// The GPU path of `kiln run` (and later `bench`): the one place that talks to the Engine.
// tools/cli_gpu.cpp is what a GPU-enabled build fills in; everything else in the CLI is agnostic.
#pragma once

#include <map>
#include <string>

#include "kiln/graph.hpp"
#include "kiln/host_tensor.hpp"

namespace kiln::cli {

struct DeviceRunResult {
  std::map<std::string, HostTensor> outputs;  // every graph output, in its declared layout
  double ms = 0;                              // wall time of the run itself (not compilation)
  std::string backend;                        // printed: "gpu sm_90 (3 kernels)"
};

// True when this build can run graphs on a GPU; otherwise *why says why not (one phrase).
bool gpu_available(std::string* why);

// Runs `g` on the GPU with host `inputs` (every graph input, bound by `bindings`).
DeviceRunResult run_on_gpu(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                           const Bindings& bindings);

}  // namespace kiln::cli
