// The host memory kiln may allocate for tensors whose size a file or a flag decides. An embedding
// application (and the CLI) checks its own allocations of that kind against the same budget, so
// a request for more is refused up front with the tensor and its size instead of growing the
// process until the system kills it.
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

}  // namespace kiln
