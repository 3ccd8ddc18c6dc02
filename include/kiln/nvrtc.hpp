// NVRTC, as kiln uses it: CUDA C++ source -> cubin for one arch. Needs no GPU. What
// `kiln emit --compile` times; the Engine compiles through its kernel cache instead.
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
// "sm_90a") to a cubin, with kiln's options. On failure throws kiln::Error(Driver) whose message
// holds the options, the NVRTC log and the path where the source was dumped.
NvrtcResult nvrtc_compile(const std::string& source, const std::string& name,
                          const std::string& arch, const std::vector<std::string>& extra_opts = {});

// NVRTC's one-time start in this process: its first compile pays for paging in the 110 MB
// library (on the H200 machine ~200 ms even for an empty kernel, whose later compiles take
// 12 ms; 30-60 ms on the build machine). nvrtc_compile() waits for it before its own timer starts,
// so a kernel's compile time excludes it. nvrtc_start_async() begins it on a background thread
// (the CLI does so before CUDA's own start, which it then overlaps); nvrtc_start_ms() waits for
// it (running it here if nothing started it) and returns how long it took.
void nvrtc_start_async();
double nvrtc_start_ms();

// "13.0": part of every kernel cache key.
std::string nvrtc_version();

}  // namespace kiln
