#include "runtime/nvml.hpp"

#include <dlfcn.h>

#include <mutex>

namespace kiln::nvml {

namespace {

// The few NVML entry points used, by their stable C ABI (the toolkit ships no nvml.h here):
// every call returns 0 (NVML_SUCCESS) on success; a device is an opaque handle.
using Init = int (*)();
using HandleByPci = int (*)(const char*, void**);
using GetMigMode = int (*)(void*, unsigned*, unsigned*);

struct Nvml {
  HandleByPci by_pci = nullptr;
  GetMigMode mig_mode = nullptr;
  bool ok = false;
};

const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    auto init = reinterpret_cast<Init>(dlsym(lib, "nvmlInit_v2"));
    n.by_pci = reinterpret_cast<HandleByPci>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.mig_mode = reinterpret_cast<GetMigMode>(dlsym(lib, "nvmlDeviceGetMigMode"));
    n.ok = init && n.by_pci && n.mig_mode && init() == 0;
  });
  return n;
}

}  // namespace

std::string mig_mode(const std::string& pci_bus_id) {
  const Nvml& n = nvml();
  if (!n.ok) return "unknown";
  void* dev = nullptr;
  unsigned current = 0, pending = 0;
  if (n.by_pci(pci_bus_id.c_str(), &dev) != 0 || n.mig_mode(dev, &current, &pending) != 0)
    return "unknown";  // also GPUs without MIG support (NVML_ERROR_NOT_SUPPORTED)
  return current == 1 ? "enabled" : "disabled";
}

}  // namespace kiln::nvml
