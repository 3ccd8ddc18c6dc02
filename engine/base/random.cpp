#include "engine/base/random.hpp"

#include <cmath>

#include "engine/base/check.hpp"
#include "engine/base/memory_budget.hpp"

namespace kiln {

double Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1 = uniform(), u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  double r = std::sqrt(-2.0 * std::log(u1)), th = 2.0 * M_PI * u2;
  spare_ = r * std::sin(th);
  has_spare_ = true;
  return r * std::cos(th);
}

std::vector<double> random_values(bool normal, double a, double b, uint64_t seed, int64_t n) {
  check_host_bytes(fmt::format("{} random values", n),
                   n < 0 || static_cast<uint64_t>(n) > UINT64_MAX / sizeof(double)
                       ? UINT64_MAX
                       : static_cast<uint64_t>(n) * sizeof(double));
  Rng rng(seed);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = normal ? a + b * rng.normal() : a + (b - a) * rng.uniform();
  return v;
}

}  // namespace kiln
