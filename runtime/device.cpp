// The public device calls (kiln/device.hpp) over the driver loader (runtime/cuda_driver.hpp).
#include "kiln/device.hpp"

#include "runtime/cuda_driver.hpp"
#include "runtime/device_facts.hpp"
#include "runtime/nvml.hpp"

namespace kiln {

DeviceFacts device_facts(const DeviceInfo& d) {
  DeviceFacts f;
  f.name = d.name;
  f.arch = d.arch;
  f.sm = d.sm;
  f.sm_count = d.sm_count;
  f.smem_per_block_optin = d.smem_per_block_optin;
  f.l2_bytes = d.l2_bytes;
  f.mem_bandwidth = d.mem_bandwidth;
  f.from_device = d.from_device;
  return f;
}

DeviceInfo device_info(const DeviceFacts& f) {
  DeviceInfo d;
  d.name = f.name;
  d.arch = f.arch;
  d.sm = f.sm;
  d.sm_count = f.sm_count;
  d.smem_per_block_optin = f.smem_per_block_optin;
  d.l2_bytes = f.l2_bytes;
  d.mem_bandwidth = f.mem_bandwidth;
  d.from_device = f.from_device;
  return d;
}

bool cuda_available(std::string* reason) {
  return cuda::driver_available(reason);
}

DeviceFacts query_device(int ordinal) {
  return device_facts(cuda::query_device_info(ordinal));
}

int cuda_driver_version() {
  cuda::driver_available();  // loads the library once
  return cuda::driver_version();
}

int device_count() {
  return cuda::driver_available() ? cuda::device_count() : 0;
}

std::vector<DeviceListing> list_devices() {
  std::vector<DeviceListing> out;
  const int n = cuda::device_count();
  for (int i = 0; i < n; ++i) {
    DeviceListing d;
    d.ordinal = i;
    d.facts = query_device(i);
    d.total_memory = cuda::device_total_memory(i);
    d.pci_bus_id = cuda::device_pci_bus_id(i);
    // A MIG instance is named after its profile ("NVIDIA H200 MIG 1g.18gb"); NVML, asked by PCI
    // bus id, answers for the whole GPU it is part of.
    d.mig =
        d.facts.name.find(" MIG ") != std::string::npos ? "instance" : nvml::mig_mode(d.pci_bus_id);
    out.push_back(std::move(d));
  }
  return out;
}

struct DeviceScope::Impl {
  explicit Impl(int ordinal) : scope(cuda::primary_context(ordinal, "DeviceScope")) {}
  cuda::ContextScope scope;
};

DeviceScope::DeviceScope(int ordinal) : impl_(std::make_unique<Impl>(ordinal)) {}
DeviceScope::~DeviceScope() = default;

DeviceFacts default_device(const std::string& arch, const std::string& where) {
  parse_arch(arch, nullptr, where);
  return device_facts(default_device_info(arch));
}

void cuda_init(int device) {
  cuda::retain_primary(device);
}

uint64_t device_alloc(size_t bytes) {
  return cuda::mem_alloc(bytes);
}

void device_free(uint64_t ptr) {
  cuda::mem_free(ptr);
}

void copy_to_device(uint64_t dst, const void* src, size_t bytes) {
  cuda::memcpy_htod(dst, src, bytes);
}

void copy_to_host(void* dst, uint64_t src, size_t bytes) {
  cuda::memcpy_dtoh(dst, src, bytes);
}

void fill_device(uint64_t dst, uint8_t value, size_t bytes) {
  cuda::memset_d8(dst, value, bytes);
}

void synchronize_device() {
  cuda::ctx_synchronize();
}

void synchronize_stream(void* stream) {
  cuda::stream_synchronize(stream);
}

}  // namespace kiln
