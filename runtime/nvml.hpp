// NVML (libnvidia-ml.so.1), loaded at run time like the driver and only for what the CUDA driver
// API cannot say: a GPU's MIG mode.
#pragma once

#include <string>

namespace kiln::nvml {

// "enabled" or "disabled": the MIG mode of the GPU at `pci_bus_id` ("0000:17:00.0"); "unknown"
// when NVML is missing or cannot say.
std::string mig_mode(const std::string& pci_bus_id);

}  // namespace kiln::nvml
