// The CUDA driver, loaded at run time: libcuda.so.1 is dlopen'ed (never linked) and its entry
// points resolved with cuGetProcAddress (falling back to dlsym). Every call is checked: a failure
// throws kiln::Error(Driver) naming the call and the CUDA error name and string.
//
// This header exposes no CUDA types: device pointers are uint64_t (CUdeviceptr), handles are
// opaque pointers (CUmodule, CUfunction, CUstream, CUevent). Every wrapper runs in the context of
// the innermost ContextScope on the calling thread, or, outside any, in the primary context of
// device 0 for the length of the call: the caller's current context is never left changed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "heuristics/device_info.hpp"
#include "kiln/device.hpp"
#include "kiln/types.hpp"

namespace kiln::cuda {

// True when libcuda.so.1 loaded, every entry point resolved, cuInit succeeded and there is at
// least one device. Otherwise `reason` (if given) says which of those failed. Loads once.
bool driver_available(std::string* reason = nullptr);
// The reason the driver is not available ("" when it is).
std::string driver_unavailable_reason();
// cuDriverGetVersion (e.g. 13000); 0 when the library is missing.
int driver_version();

int device_count();
// Name, compute capability, SM count, opt-in shared memory, L2, bandwidth guess of a device.
DeviceInfo query_device_info(int ordinal = 0);
// Bytes of memory on the device (cuDeviceTotalMem) and its PCI bus id ("0000:17:00.0").
uint64_t device_total_memory(int ordinal);
std::string device_pci_bus_id(int ordinal);
// "0: NVIDIA H200 (sm_90), 1: ..." for messages; "none" without devices.
std::string device_list();

// ---- contexts
// A CUDA context kiln runs in: the primary context of a device, or the caller's own
// (EngineOptions::use_current_context; not retained: the caller keeps it alive).
struct Context {
  void* handle = nullptr;  // CUcontext
  int device = 0;          // its device's ordinal
};
// The primary context of device `ordinal`, retained on first use and kept for the process (as the
// runtime API does). An ordinal that does not exist is a user error naming `what` and listing the
// devices.
Context primary_context(int ordinal, const std::string& what = "device");
// A user error naming `what` and listing the devices when `ordinal` does not exist.
void check_device_ordinal(int ordinal, const std::string& what);
// The context current on this thread and its device; a user error naming `what` when none is.
Context current_context(const std::string& what);

// Retains the primary context of device `ordinal` (creating it: what `kiln run` times as CUDA's
// start-up); the thread's current context is left alone.
void retain_primary(int ordinal = 0);

// Makes `ctx` current on this thread while it lives (cuCtxPushCurrent, then cuCtxPopCurrent: the
// thread's context stack is left exactly as found; nothing at all when `ctx` is current already).
// Every wrapper called inside runs in `ctx`. Scopes nest; not movable.
class ContextScope {
 public:
  explicit ContextScope(const Context& ctx);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  void* prev_scope_ = nullptr;  // the enclosing scope's context on this thread
  bool pushed_ = false;
};

// ---- modules and launches
void* module_load(const std::vector<char>& cubin);  // cuModuleLoadData
void module_unload(void* module);
void* module_function(void* module, const std::string& entry);  // cuModuleGetFunction
// cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES).
void func_set_max_dynamic_smem(void* function, int bytes);
// cuLaunchKernel; `params` points at each argument's storage. `what` names it in errors.
void launch(void* function, const uint32_t grid[3], const uint32_t block[3], uint32_t smem,
            void* stream, void** params, const std::string& what);

// cuTensorMapEncodeTiled: `dims` innermost first, byte strides of dims 1.. in `strides_bytes`,
// boxes of `box` elements walked with `elem_strides`, `swizzle`-byte swizzle (128 or 0: none),
// out-of-bounds elements read as zero. `out`: 128 bytes, 64-byte aligned (a CUtensorMap).
void encode_tensor_map(void* out, DType dtype, uint64_t ptr, const std::vector<uint64_t>& dims,
                       const std::vector<uint64_t>& strides_bytes, const std::vector<uint32_t>& box,
                       const std::vector<uint32_t>& elem_strides, int swizzle = 128);

// cuTensorMapEncodeIm2col over a 4-D NHWC tensor (`dims` C, W, H, N): each load walks
// `pixels` output positions (W fastest, then H, then N) through the bounding box whose corners
// are `lower` (from the top-left) and `upper` (from the bottom-right), {W, H}, stepping by
// `elem_strides`, and reads `channels` channels of each; 128-byte swizzle, zero fill.
void encode_im2col_tensor_map(void* out, DType dtype, uint64_t ptr,
                              const std::vector<uint64_t>& dims,
                              const std::vector<uint64_t>& strides_bytes,
                              const std::vector<uint32_t>& elem_strides, const int lower[2],
                              const int upper[2], uint32_t channels, uint32_t pixels);

// ---- memory
// Free and total memory of the device (cuMemGetInfo); false when the driver cannot say.
bool mem_info(size_t* free_bytes, size_t* total_bytes);
// A user error "<what>: <size> of device memory, but the device has <free> free (of <total>)"
// when `bytes` is more than the device has free.
void check_device_bytes(const std::string& what, uint64_t bytes);
// Checks the request against the free memory first (a user error naming the size).
uint64_t mem_alloc(size_t bytes);
// Frees in the context that owns `ptr` (cuPointerGetAttribute), wherever it is called from.
void mem_free(uint64_t ptr);  // never throws (logs nothing; errors are ignored on free)
void memcpy_htod(uint64_t dst, const void* src, size_t bytes);
void memcpy_dtoh(void* dst, uint64_t src, size_t bytes);
void memcpy_dtod_async(uint64_t dst, uint64_t src, size_t bytes, void* stream);
// Into page-locked host memory (host_alloc_pinned): queued on `stream`, no wait.
void memcpy_dtoh_async(void* dst, uint64_t src, size_t bytes, void* stream);
void* host_alloc_pinned(size_t bytes);
void host_free_pinned(void* ptr);  // null-safe, ignores errors
void memset_d8(uint64_t dst, uint8_t value, size_t bytes);
void memset_d8_async(uint64_t dst, uint8_t value, size_t bytes, void* stream);

// ---- streams and events
// A stream that synchronizes with the legacy default stream (so that synchronous copies and
// memsets issued before a launch on it are ordered before it).
void* stream_create();
void stream_destroy(void* stream);
void stream_synchronize(void* stream);
void ctx_synchronize();
// A stream that does not synchronize with the legacy default stream (for capturing).
void* stream_create_nonblocking();

// ---- CUDA graphs (stream capture): handles are CUgraph / CUgraphExec
// cuStreamBeginCapture in CU_STREAM_CAPTURE_MODE_THREAD_LOCAL (other threads are unaffected).
void stream_begin_capture(void* stream);
void* stream_end_capture(void* stream);  // the captured CUgraph
void* graph_instantiate(void* graph);    // cuGraphInstantiateWithFlags(flags 0)
void graph_launch(void* exec, void* stream);
void graph_exec_destroy(void* exec);  // null-safe, ignores errors
void graph_destroy(void* graph);      // null-safe, ignores errors

void* event_create();
void event_destroy(void* event);
void event_record(void* event, void* stream);
void event_synchronize(void* event);
bool event_done(void* event);  // cuEventQuery: the work before the event has completed
float event_elapsed_ms(void* start, void* end);

// Device memory owned by this object (the public kiln::DeviceBuffer, freed through mem_free).
using DeviceBuffer = ::kiln::DeviceBuffer;

}  // namespace kiln::cuda
