// Facts about the target GPU that the cost model, tile choice and codegen use. Filled from the
// driver when a device is present (runtime/cuda_driver.hpp: query_device_info), else a default for
// the target arch (sm_90: H200-like, sm_80: A100-like).
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

struct DeviceInfo {
  std::string name;                   // "NVIDIA H200" or "default sm_90 (H200-like)"
  std::string arch;                   // NVRTC target: "sm_90", "sm_90a", "sm_80"
  int sm = 90;                        // compute capability major*10+minor
  int sm_count = 132;                 // streaming multiprocessors
  int smem_per_block_optin = 232448;  // max dynamic+static shared memory per block (opt-in)
  int64_t l2_bytes = 50 << 20;
  double mem_bandwidth = 4.8e12;  // bytes/s (a guess: peak DRAM bandwidth)
  bool from_device = false;       // true when queried from a real device
};

// The oldest arch kiln generates kernels for: the f16/bf16 kernels need sm_80.
constexpr int kMinSm = 80;

// Parses "sm_90", "sm_90a", "sm_80", "sm_86", "sm_89", "sm_100"... into the numeric sm (90) and
// whether it is the arch-specific 'a' variant. Throws a user error for anything else (an arch
// older than kMinSm included), naming `where` and the accepted form.
int parse_arch(const std::string& arch, bool* arch_specific = nullptr,
               const std::string& where = "arch");

// True when a cubin built for `arch` runs on a device of compute capability `device_sm`: same
// major version and a minor no newer than the device's; the 'a' variants only on their exact sm.
bool cubin_runs_on(const std::string& arch, int device_sm);

// Default facts for a target arch with no device to ask.
DeviceInfo default_device_info(const std::string& arch);

}  // namespace kiln
