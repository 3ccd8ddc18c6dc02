// The GPU path of `kiln run` and `kiln bench`: the one place that talks to the Engine.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/device.hpp"
#include "kiln/engine.hpp"
#include "kiln/graph.hpp"
#include "kiln/host_tensor.hpp"

namespace kiln::cli {

struct DeviceRunResult {
  std::map<std::string, HostTensor> outputs;  // every graph output, in its declared layout
  double ms = 0;                              // wall time of the run itself (not compilation)
  std::string backend;                        // printed: "gpu sm_90 (3 kernels)"
  EngineStats stats;                          // the Engine's counters after the runs
};

// True when this build can run graphs on a GPU; otherwise *why says why not (one phrase).
bool gpu_available(std::string* why);

// A --device value. `kiln run` takes auto, cpu, gpu (device 0) or gpu:N; bench, explain and cache
// warm take gpu or gpu:N (`allow_cpu` false). Anything else (gpu:, gpu:-1, gpu:1x, gpu: 1,
// GPU:0) is a usage error of `cmd` naming the valid forms.
struct DeviceFlag {
  enum class Kind { Auto, Cpu, Gpu } kind = Kind::Auto;
  int ordinal = 0;
};
DeviceFlag parse_device_flag(const std::string& cmd, const std::string& value, bool allow_cpu);
// A user error (exit 2) unless there is a GPU `ordinal`: "--device gpu:N: no CUDA device: ...",
// or, when the ordinal does not exist, the list of the devices there are.
void require_gpu(const std::string& cmd, int ordinal);

// Runs `g` on GPU `device` with host `inputs` (every graph input, bound by `bindings`).
DeviceRunResult run_on_gpu(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                           const Bindings& bindings, int device = 0);

// A compiled graph with its inputs uploaded and its outputs allocated on the device.
class DeviceSession {
 public:
  DeviceSession(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                const Bindings& bindings, const EngineOptions& opts);
  // Poisons the outputs, runs once and synchronizes; returns the wall time of the run in ms.
  double run();
  std::map<std::string, HostTensor> download() const;

  Engine& engine() { return engine_; }
  const CompiledGraph& compiled() const { return compiled_; }
  const std::map<std::string, DeviceTensor>& inputs() const { return inputs_; }
  const std::map<std::string, DeviceTensor>& outputs() const { return outputs_; }
  const Bindings& bindings() const { return bindings_; }
  double compile_ms() const { return compile_ms_; }
  // The CUDA driver's own start-up in this process (dlopen, cuInit, context creation), measured
  // before the Engine so that compile_ms() is kiln's part alone.
  double cuda_init_ms() const { return init_ms_; }

 private:
  int device_ = 0;
  double init_ms_ = 0;  // CUDA driver load + primary context creation (before engine_ exists)
  Engine engine_;
  CompiledGraph compiled_;
  Bindings bindings_;
  double compile_ms_ = 0;
  std::vector<DeviceBuffer> buffers_;
  std::map<std::string, DeviceTensor> inputs_, outputs_;
  std::map<std::string, HostTensor> host_outputs_;
};

}  // namespace kiln::cli
