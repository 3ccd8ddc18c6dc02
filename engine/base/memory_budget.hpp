// The host memory kiln may allocate for tensors whose size a file or a flag decides, and size
// arithmetic that cannot wrap. A file that asks for more than the budget is refused up front with
// the tensor and its size, instead of growing the process until the system kills it.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

// Bytes: KILN_MEMORY_BUDGET (bytes or a percentage of physical memory), else half of physical
// memory.
uint64_t host_memory_budget();
// How the budget was set, for messages: "50 % of 23.4 GiB of physical memory; KILN_MEMORY_BUDGET
// sets it" or "KILN_MEMORY_BUDGET=8G".
std::string host_memory_budget_source();

// A user error "<what>: <size> of host memory is over the budget of <budget> (<source>)" when
// `bytes` is over the budget.
void check_host_bytes(const std::string& what, uint64_t bytes);

// "1.5 GiB (1610612736 bytes)".
std::string bytes_text(uint64_t bytes);

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
