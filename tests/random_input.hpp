// Seeded random test inputs for the CPU tests of graph passes.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/host_tensor.hpp"

namespace kiln::test {

// Uniform values in [-1, 1) (no zeros by construction of the grid), seeded.
inline HostTensor random_input(DType dt, std::vector<int64_t> shape, Layout l, uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(n);
  uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (double& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = (static_cast<double>((s >> 11) % 20000) + 0.5) / 10000.0 - 1.0;
  }
  return HostTensor::from_f64(dt, shape, v, l);
}

}  // namespace kiln::test
