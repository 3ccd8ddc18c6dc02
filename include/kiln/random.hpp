// Deterministic random values, the same on every platform: what seeded constants in graph files
// (`init`) and `kiln run`'s random inputs are made of, so an embedding application can make the
// same data.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln {

// n values: normal(mean=a, std=b, Box-Muller) or uniform(low=a, high=b), from a splitmix64
// stream of `seed`.
std::vector<double> random_values(bool normal, double a, double b, uint64_t seed, int64_t n);

}  // namespace kiln
