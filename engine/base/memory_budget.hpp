// Size arithmetic that cannot wrap, beside the host memory budget (kiln/memory_budget.hpp).
#pragma once

#include <cstdint>

#include "kiln/memory_budget.hpp"  // host_memory_budget, check_host_bytes, bytes_text

namespace kiln {

// Checked products and sums: false when the result does not fit (the output is then unchanged).
inline bool checked_mul(int64_t a, int64_t b, int64_t* out) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}
inline bool checked_add(int64_t a, int64_t b, int64_t* out) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}

}  // namespace kiln
