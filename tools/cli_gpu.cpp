// The GPU path of the CLI. This build has no GPU executor wired in yet (the Engine facade of
// include/kiln/engine.hpp is filled in by the GPU work): `--device auto` falls back to the CPU
// reference and `--device gpu` is refused with a clear message.
#include "tools/cli_gpu.hpp"

#include "engine/check.hpp"

namespace kiln::cli {

bool gpu_available(std::string* why) {
  if (why) *why = "this kiln build found no CUDA device";
  return false;
}

DeviceRunResult run_on_gpu(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                           const Bindings& bindings) {
  KILN_ASSERT(false, "run_on_gpu called for graph '{}' although gpu_available() is false",
              g.name());
}

}  // namespace kiln::cli
