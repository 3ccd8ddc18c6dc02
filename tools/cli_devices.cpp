// `kiln devices`: every CUDA device this process sees, as --device gpu:N names them.
#include <fmt/format.h>

#include <cstdlib>

#include "kiln/device.hpp"
#include "tools/cli_common.hpp"

namespace kiln::cli {
namespace {

int run_devices(const std::vector<std::string>& argv) {
  parse_args("devices", argv, {}, 0, 0);
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string vis =
      visible ? fmt::format("CUDA_VISIBLE_DEVICES={}", visible) : "CUDA_VISIBLE_DEVICES unset";
  std::string why;
  if (!cuda_available(&why)) {
    fmt::print("no CUDA devices: {} ({})\n", why, vis);
    return 1;
  }
  const int version = cuda_driver_version();
  std::vector<DeviceListing> ds = list_devices();
  fmt::print("{} CUDA device{} (driver {}.{}, {}):\n", ds.size(), ds.size() == 1 ? "" : "s",
             version / 1000, version % 1000 / 10, vis);
  for (const DeviceListing& d : ds)
    fmt::print("  gpu:{}  {}  {}  {} SMs  {:.1f} GiB  MIG {}  PCI {}\n", d.ordinal, d.facts.name,
               d.facts.arch, d.facts.sm_count, static_cast<double>(d.total_memory) / (1 << 30),
               d.mig, d.pci_bus_id);
  return 0;
}

}  // namespace

KILN_CLI_COMMAND(
    devices, "devices", "list the CUDA devices (--device gpu:N) with arch, SMs, memory, MIG",
    "usage: kiln devices\n\n"
    "Lists every CUDA device this process sees, by the ordinal --device gpu:N takes: its name,\n"
    "arch (the NVRTC target of its kernels), SM count, memory, MIG mode and PCI bus id. MIG:\n"
    "'instance' for a MIG instance, else the whole GPU's mode from NVML ('enabled', 'disabled',\n"
    "or 'unknown' without libnvidia-ml.so.1). CUDA_VISIBLE_DEVICES selects and renumbers the\n"
    "devices; a MIG instance is chosen by its UUID (CUDA_VISIBLE_DEVICES=MIG-<uuid>, from\n"
    "`nvidia-smi -L`) and is then a device like any other. Exit status 1 when there is no CUDA\n"
    "driver or device (the message says which).\n",
    run_devices);

}  // namespace kiln::cli
