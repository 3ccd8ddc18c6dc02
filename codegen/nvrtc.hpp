// NVRTC: CUDA C++ source -> cubin for one arch. Needs no GPU.
#pragma once

#include <string>
#include <vector>

namespace kiln {

struct NvrtcResult {
  std::vector<char> cubin;
  std::string log;  // compiler messages (warnings included)
  double ms = 0;    // wall time of the compile
};

// Compiles `source` (program name `name`, used for the dumped file) for `arch` ("sm_80", "sm_90",
// "sm_90a") to a cubin. On failure throws kiln::Error(Driver) whose message holds the options,
// the NVRTC log and the path where the source was dumped.
NvrtcResult nvrtc_compile(const std::string& source, const std::string& name,
                          const std::string& arch, const std::vector<std::string>& extra_opts = {});

// The full NVRTC option list nvrtc_compile uses for `arch` and `extra_opts` (part of the cache
// key).
std::vector<std::string> nvrtc_options(const std::string& arch,
                                       const std::vector<std::string>& extra_opts = {});

// "13.0": part of every kernel cache key.
std::string nvrtc_version();

}  // namespace kiln
