// A device buffer of the caller, as the Engine and the executor take it.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln {

// Pointer plus concrete logical shape (its layout is the one the graph declares for that tensor).
struct DeviceTensor {
  uint64_t ptr = 0;  // CUdeviceptr
  std::vector<int64_t> shape;
};

}  // namespace kiln
