// Deterministic random values (the same on every platform): seeded constant init, test inputs.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/random.hpp"  // random_values

namespace kiln {

// splitmix64: small, fast, and defined bit-for-bit, unlike std::normal_distribution.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double normal();

 private:
  uint64_t s_;
  bool has_spare_ = false;
  double spare_ = 0;
};

}  // namespace kiln
