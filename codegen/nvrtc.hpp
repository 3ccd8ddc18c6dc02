// NVRTC: CUDA C++ source -> cubin for one arch. Needs no GPU. The compile itself, its one-time
// start and the version are public (kiln/nvrtc.hpp); the option list is kiln's own.
#pragma once

#include <string>
#include <vector>

#include "kiln/nvrtc.hpp"

namespace kiln {

// The full NVRTC option list nvrtc_compile uses for `arch` and `extra_opts` (part of the cache
// key).
std::vector<std::string> nvrtc_options(const std::string& arch,
                                       const std::vector<std::string>& extra_opts = {});

}  // namespace kiln
