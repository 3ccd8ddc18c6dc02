// Kernel timing (kiln/timing.hpp), under the names the runtime uses.
#pragma once

#include "kiln/timing.hpp"

namespace kiln::cuda {

using ::kiln::median_ms;
using ::kiln::time_flushed;
using ::kiln::time_flushed_budget;

}  // namespace kiln::cuda
