// The CUDA device without CUDA headers: whether there is one, its facts (what kiln plans and
// generates kernels for), its start-up, and device memory. The driver (libcuda.so.1) is loaded at
// run time, never linked: every call but cuda_available() and default_device() needs it and
// throws kiln::Error(Driver) naming the failed CUDA call. Device pointers are CUdeviceptr values,
// streams CUstream handles (null: the legacy default stream).
//
// Devices: every call runs in the context of the innermost DeviceScope on the calling thread, or
// else in the primary context of device 0, and leaves the thread's current CUDA context as it
// found it (docs/EMBEDDING.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

// What kiln's planner, cost model, tile choice and codegen know about a GPU.
struct DeviceFacts {
  std::string name;              // "NVIDIA H200", or "default sm_90 (H200-like)"
  std::string arch;              // the NVRTC target of its kernels: "sm_90", "sm_80"
  int sm = 0;                    // compute capability, major * 10 + minor
  int sm_count = 0;              // streaming multiprocessors
  int smem_per_block_optin = 0;  // bytes of shared memory one block may opt in to
  int64_t l2_bytes = 0;
  double mem_bandwidth = 0;  // bytes/s: peak DRAM bandwidth (clock x bus width, or the default's)
  bool from_device = false;  // queried from a device (else an arch's defaults)
};

// True when libcuda.so.1 loaded, every entry point resolved, cuInit succeeded and there is at
// least one device; otherwise `reason` (if given) says which of those failed. Loads once.
bool cuda_available(std::string* reason = nullptr);

// The facts of device `ordinal` (needs the driver).
DeviceFacts query_device(int ordinal = 0);

// The CUDA driver's version (cuDriverGetVersion: 13000 for 13.0); 0 without libcuda.so.1.
int cuda_driver_version();

// How many CUDA devices this process sees (after CUDA_VISIBLE_DEVICES); 0 without a driver.
int device_count();

// One device as `kiln devices` lists it.
struct DeviceListing {
  int ordinal = 0;
  DeviceFacts facts;
  uint64_t total_memory = 0;  // bytes
  std::string pci_bus_id;     // "0000:17:00.0"
  // "instance" (a MIG instance, chosen through CUDA_VISIBLE_DEVICES=MIG-<uuid>), "enabled" or
  // "disabled" (the whole GPU's MIG mode, from NVML), or "unknown" (no libnvidia-ml.so.1).
  std::string mig;
};
// Every device (needs the driver).
std::vector<DeviceListing> list_devices();

// While it lives, every call of this header on this thread (allocations, copies, synchronize,
// DeviceBuffer) runs on device `ordinal`'s primary context; the thread's current CUDA context
// comes back when it ends. A device that does not exist is a user error listing the devices.
// Scopes nest; an Engine chooses its own device (EngineOptions::device) whatever scope is open.
class DeviceScope {
 public:
  explicit DeviceScope(int ordinal);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The defaults kiln assumes for `arch` ("sm_90": H200-like, "sm_80": A100-like, ...) when there is
// no device to ask. A malformed arch is a user error naming `where` ("--arch: expected ...").
DeviceFacts default_device(const std::string& arch, const std::string& where = "arch");

// CUDA's own start-up in this process (driver load, cuInit, the primary context of `device`
// created and retained; the thread's current context is left alone); every other call does it
// too, this one lets a caller time it.
void cuda_init(int device = 0);

// ---- device memory (the innermost DeviceScope's device, else device 0; a buffer is freed on
// its own device wherever it is freed)
uint64_t device_alloc(size_t bytes);
void device_free(uint64_t ptr);  // never throws (errors on free are ignored)
void copy_to_device(uint64_t dst, const void* src, size_t bytes);
void copy_to_host(void* dst, uint64_t src, size_t bytes);
void fill_device(uint64_t dst, uint8_t value, size_t bytes);  // every byte set to `value`
void synchronize_device();                                    // waits for all work
void synchronize_stream(void* stream);

// Device memory owned by this object (freed in the destructor).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : ptr_(bytes ? device_alloc(bytes) : 0), bytes_(bytes) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = 0;
    o.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = o.ptr_;
      bytes_ = o.bytes_;
      o.ptr_ = 0;
      o.bytes_ = 0;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void reset() {
    if (ptr_) device_free(ptr_);
    ptr_ = 0;
    bytes_ = 0;
  }
  uint64_t ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  uint64_t ptr_ = 0;
  size_t bytes_ = 0;
};

}  // namespace kiln
