#include "runtime/cuda_driver.hpp"

// Types, enums and prototypes only: libcuda is never linked, every function is called through
// the table below.
#include <cuda.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

#include "engine/base/check.hpp"
#include "engine/base/memory_budget.hpp"

namespace kiln::cuda {

namespace {

#define KILN_STR2(x) #x
#define KILN_STR(x) KILN_STR2(x)

// Every entry point kiln uses. Many names are macros in cuda.h (cuMemAlloc -> cuMemAlloc_v2):
// decltype(&::name) then gives the versioned prototype, #name the base name cuGetProcAddress
// wants, and KILN_STR(name) the versioned symbol for the dlsym fallback.
// clang-format 14 does not settle on X-macro lists: laid out by hand.
// clang-format off
#define KILN_CU_FUNCS(X) \
  X(cuInit) X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName) X(cuDeviceGetAttribute) \
  X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxSynchronize) \
  X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuCtxGetDevice) X(cuDeviceTotalMem) \
  X(cuDeviceGetPCIBusId) X(cuPointerGetAttribute) \
  X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncSetAttribute) \
  X(cuLaunchKernel) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) \
  X(cuMemcpyDtoDAsync) X(cuMemsetD8) X(cuMemsetD8Async) X(cuStreamCreate) X(cuStreamDestroy) \
  X(cuStreamSynchronize) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) \
  X(cuEventSynchronize) X(cuEventElapsedTime) X(cuGetErrorName) X(cuGetErrorString) \
  X(cuEventQuery) X(cuMemAllocHost) X(cuMemFreeHost) X(cuMemcpyDtoHAsync) \
  KILN_CU_GRAPH_FUNCS(X)
// clang-format on

// CUDA graphs. cuGraphInstantiate is a macro for cuGraphInstantiateWithFlags, but
// cuGetProcAddress("cuGraphInstantiate") hands back the old 5-argument ABI: name the WithFlags
// entry point itself. cuStreamBeginCapture (a macro for _v2) resolves to the (stream, mode) ABI.
#define KILN_CU_GRAPH_FUNCS(X) \
  X(cuStreamBeginCapture)      \
  X(cuStreamEndCapture)        \
  X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy)

// Optional entry points: a driver without them still runs everything else (TMA needs a CUDA 12
// driver; kernels that use it say so when the entry point is missing).
#define KILN_CU_OPTIONAL_FUNCS(X) \
  X(cuTensorMapEncodeTiled) X(cuTensorMapEncodeIm2col) X(cuMemGetInfo)

struct Api {
#define KILN_X(name) decltype(&::name) name = nullptr;
  KILN_CU_FUNCS(KILN_X)
  KILN_CU_OPTIONAL_FUNCS(KILN_X)
#undef KILN_X
};

using GetProcV2 = CUresult (*)(const char*, void**, int, cuuint64_t,
                               CUdriverProcAddressQueryResult*);
using GetProcV1 = CUresult (*)(const char*, void**, int, cuuint64_t);
using DriverGetVersion = CUresult (*)(int*);

struct State {
  void* lib = nullptr;
  Api api;
  int version = 0;
  bool ok = false;
  std::string reason;
  int count = 0;  // devices
  // Retained primary contexts by ordinal (null until first used), under primary_mu.
  std::mutex primary_mu;
  std::vector<CUcontext> primary;
};

// The context of the innermost ContextScope on this thread (null outside any).
thread_local CUcontext t_scope = nullptr;

std::string error_text(const Api& api, CUresult r) {
  const char* name = nullptr;
  const char* str = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(r, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(r, &str);
  return fmt::format("{} ({}): {}", name ? name : "CUDA_ERROR_UNKNOWN", static_cast<int>(r),
                     str ? str : "unknown error");
}

void load(State* s) {
  s->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!s->lib) {
    const char* e = dlerror();
    s->reason = fmt::format("the CUDA driver library libcuda.so.1 could not be loaded ({})",
                            e ? e : "not found");
    return;
  }
  auto get_version = reinterpret_cast<DriverGetVersion>(dlsym(s->lib, "cuDriverGetVersion"));
  if (get_version) get_version(&s->version);
  // cuGetProcAddress gives the entry point matching the ABI of the header we were built with
  // (or the newest the driver has, when it is older).
  int want = s->version > 0 ? std::min(s->version, CUDA_VERSION) : CUDA_VERSION;
  auto gp2 = reinterpret_cast<GetProcV2>(dlsym(s->lib, "cuGetProcAddress_v2"));
  auto gp1 = reinterpret_cast<GetProcV1>(dlsym(s->lib, "cuGetProcAddress"));
  auto resolve = [&](const char* base, const char* versioned) -> void* {
    void* fn = nullptr;
    // CUDA 13 added cuCtxSynchronize_v2(CUcontext) and cuCtxGetDevice_v2(CUdevice*, CUcontext)
    // without renaming the header's v1 prototypes: cuGetProcAddress(13000) hands back the v2
    // ABI, which then reads a garbage context ("context is destroyed"). The plain exported
    // symbols keep the v1 ABI.
    if (std::string_view(base) == "cuCtxSynchronize" || std::string_view(base) == "cuCtxGetDevice")
      return dlsym(s->lib, base);
    if (gp2) {
      CUdriverProcAddressQueryResult status{};
      if (gp2(base, &fn, want, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS &&
          status == CU_GET_PROC_ADDRESS_SUCCESS && fn)
        return fn;
      fn = nullptr;
    } else if (gp1) {
      if (gp1(base, &fn, want, CU_GET_PROC_ADDRESS_DEFAULT) == CUDA_SUCCESS && fn) return fn;
      fn = nullptr;
    }
    fn = dlsym(s->lib, versioned);
    if (!fn) fn = dlsym(s->lib, base);
    return fn;
  };
#define KILN_X(name)                                                                     \
  s->api.name = reinterpret_cast<decltype(s->api.name)>(resolve(#name, KILN_STR(name))); \
  if (!s->api.name) {                                                                    \
    s->reason = fmt::format("libcuda.so.1 (driver version {}) lacks the entry point {}", \
                            s->version, KILN_STR(name));                                 \
    return;                                                                              \
  }
  KILN_CU_FUNCS(KILN_X)
#undef KILN_X
#define KILN_X(name) \
  s->api.name = reinterpret_cast<decltype(s->api.name)>(resolve(#name, KILN_STR(name)));
  KILN_CU_OPTIONAL_FUNCS(KILN_X)
#undef KILN_X
  CUresult r = s->api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    s->reason = fmt::format("cuInit failed: {}", error_text(s->api, r));
    return;
  }
  int n = 0;
  r = s->api.cuDeviceGetCount(&n);
  if (r != CUDA_SUCCESS) {
    s->reason = fmt::format("cuDeviceGetCount failed: {}", error_text(s->api, r));
    return;
  }
  if (n <= 0) {
    s->reason = "the CUDA driver found no device";
    return;
  }
  s->count = n;
  s->primary.assign(static_cast<size_t>(n), nullptr);
  s->ok = true;
}

State& state() {
  static State s;
  static std::once_flag once;
  std::call_once(once, [] { load(&s); });
  return s;
}

const Api& api() {
  State& s = state();
  if (!s.ok) throw Error(ErrorKind::Driver, fmt::format("CUDA driver not available: {}", s.reason));
  return s.api;
}

[[noreturn]] void fail(CUresult r, const std::string& call) {
  throw Error(ErrorKind::Driver, fmt::format("{} failed: {}", call, error_text(state().api, r)));
}

void check(CUresult r, const char* call) {
  if (r != CUDA_SUCCESS) fail(r, call);
}

// The message of a formatted call is built only when the call fails: launches and copies are
// on the per-run path (a formatted string per cuLaunchKernel cost about a microsecond).
template <class Describe, class = decltype(std::declval<Describe>()())>
void check(CUresult r, Describe&& describe) {
  if (r != CUDA_SUCCESS) fail(r, describe());
}

// One wrapper call's context: the innermost ContextScope's, else the primary context of device 0
// for the length of the call (the caller's current context comes back after it).
class Call {
 public:
  Call() : a_(api()) {
    if (!t_scope) own_.emplace(primary_context(0));
  }
  const Api& fns() const { return a_; }

 private:
  const Api& a_;
  std::optional<ContextScope> own_;
};

CUstream as_stream(void* s) {
  return static_cast<CUstream>(s);
}

}  // namespace

bool driver_available(std::string* reason) {
  State& s = state();
  if (reason) *reason = s.reason;
  return s.ok;
}

std::string driver_unavailable_reason() {
  return state().reason;
}

int driver_version() {
  return state().version;
}

int device_count() {
  int n = 0;
  check(api().cuDeviceGetCount(&n), "cuDeviceGetCount");
  return n;
}

DeviceInfo query_device_info(int ordinal) {
  const Api& a = api();
  CUdevice dev = 0;
  check(a.cuDeviceGet(&dev, ordinal), [&] { return fmt::format("cuDeviceGet({})", ordinal); });
  auto attr = [&](CUdevice_attribute at, const char* what) {
    int v = 0;
    check(a.cuDeviceGetAttribute(&v, at, dev),
          [&] { return fmt::format("cuDeviceGetAttribute({})", what); });
    return v;
  };
  char name[256] = {};
  check(a.cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName");
  int major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major");
  int minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor");
  DeviceInfo d = default_device_info(fmt::format("sm_{}{}", major, minor));
  d.name = name;
  d.from_device = true;
  d.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count");
  d.smem_per_block_optin =
      attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "max shared memory per block");
  d.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 cache size");
  // Peak DRAM bandwidth: double data rate x bus width. Some drivers report 0 for the clock: keep
  // the arch default then.
  int clock_khz = 0, bus_bits = 0;
  if (a.cuDeviceGetAttribute(&clock_khz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, dev) ==
          CUDA_SUCCESS &&
      a.cuDeviceGetAttribute(&bus_bits, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, dev) ==
          CUDA_SUCCESS &&
      clock_khz > 0 && bus_bits > 0)
    d.mem_bandwidth = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0);
  return d;
}

uint64_t device_total_memory(int ordinal) {
  const Api& a = api();
  CUdevice dev = 0;
  check(a.cuDeviceGet(&dev, ordinal), [&] { return fmt::format("cuDeviceGet({})", ordinal); });
  size_t bytes = 0;
  check(a.cuDeviceTotalMem(&bytes, dev), "cuDeviceTotalMem");
  return bytes;
}

std::string device_pci_bus_id(int ordinal) {
  const Api& a = api();
  CUdevice dev = 0;
  check(a.cuDeviceGet(&dev, ordinal), [&] { return fmt::format("cuDeviceGet({})", ordinal); });
  char id[64] = {};
  check(a.cuDeviceGetPCIBusId(id, sizeof(id) - 1, dev), "cuDeviceGetPCIBusId");
  return id;
}

std::string device_list() {
  if (!state().ok) return "none";
  std::string s;
  for (int i = 0; i < state().count; ++i) {
    DeviceInfo d = query_device_info(i);
    s += fmt::format("{}{}: {} ({})", i ? ", " : "", i, d.name, d.arch);
  }
  return s.empty() ? "none" : s;
}

void check_device_ordinal(int ordinal, const std::string& what) {
  api();
  KILN_CHECK(ordinal >= 0 && ordinal < state().count,
             "{}: CUDA device {} does not exist; the devices here are {} (CUDA_VISIBLE_DEVICES "
             "selects and renumbers them)",
             what, ordinal, device_list());
}

Context primary_context(int ordinal, const std::string& what) {
  const Api& a = api();
  State& s = state();
  check_device_ordinal(ordinal, what);
  std::lock_guard<std::mutex> lock(s.primary_mu);
  CUcontext& c = s.primary[static_cast<size_t>(ordinal)];
  if (!c) {
    CUdevice dev = 0;
    check(a.cuDeviceGet(&dev, ordinal), [&] { return fmt::format("cuDeviceGet({})", ordinal); });
    check(a.cuDevicePrimaryCtxRetain(&c, dev),
          [&] { return fmt::format("cuDevicePrimaryCtxRetain(device {})", ordinal); });
  }
  return Context{c, ordinal};
}

Context current_context(const std::string& what) {
  const Api& a = api();
  CUcontext c = nullptr;
  check(a.cuCtxGetCurrent(&c), "cuCtxGetCurrent");
  KILN_CHECK(c != nullptr,
             "{}: no CUDA context is current on this thread; make one current first "
             "(cuCtxSetCurrent, cudaSetDevice + any runtime call) or choose a device instead",
             what);
  CUdevice dev = 0;
  check(a.cuCtxGetDevice(&dev), "cuCtxGetDevice");
  return Context{c, static_cast<int>(dev)};
}

void retain_primary(int ordinal) {
  primary_context(ordinal);
}

ContextScope::ContextScope(const Context& ctx) : prev_scope_(t_scope) {
  CUcontext want = static_cast<CUcontext>(ctx.handle);
  KILN_ASSERT(want != nullptr, "ContextScope for device {} without a context", ctx.device);
  // Inside a scope of the same context nothing else ran that could have changed the current one.
  if (t_scope == want) return;
  const Api& a = api();
  CUcontext cur = nullptr;
  check(a.cuCtxGetCurrent(&cur), "cuCtxGetCurrent");
  if (cur != want) {
    check(a.cuCtxPushCurrent(want),
          [&] { return fmt::format("cuCtxPushCurrent(context of device {})", ctx.device); });
    pushed_ = true;
  }
  t_scope = want;
}

ContextScope::~ContextScope() {
  if (pushed_) {
    CUcontext popped = nullptr;
    state().api.cuCtxPopCurrent(&popped);  // cannot fail for the context pushed above
  }
  t_scope = static_cast<CUcontext>(prev_scope_);
}

void* module_load(const std::vector<char>& cubin) {
  const Call call;
  const Api& a = call.fns();
  CUmodule m = nullptr;
  check(a.cuModuleLoadData(&m, cubin.data()), [&] {
    return fmt::format("cuModuleLoadData({} byte cubin; the driver supports CUDA {}.{})",
                       cubin.size(), state().version / 1000, state().version % 1000 / 10);
  });
  return m;
}

void module_unload(void* module) {
  if (!module || !state().ok) return;
  Call().fns().cuModuleUnload(static_cast<CUmodule>(module));
}

void* module_function(void* module, const std::string& entry) {
  const Call call;
  const Api& a = call.fns();
  CUfunction f = nullptr;
  check(a.cuModuleGetFunction(&f, static_cast<CUmodule>(module), entry.c_str()),
        [&] { return fmt::format("cuModuleGetFunction({})", entry); });
  return f;
}

void func_set_max_dynamic_smem(void* function, int bytes) {
  const Call call;
  const Api& a = call.fns();
  check(
      a.cuFuncSetAttribute(static_cast<CUfunction>(function),
                           CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
      [&] { return fmt::format("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, {})", bytes); });
}

void launch(void* function, const uint32_t grid[3], const uint32_t block[3], uint32_t smem,
            void* stream, void** params, const std::string& what) {
  const Call call;
  const Api& a = call.fns();
  check(a.cuLaunchKernel(static_cast<CUfunction>(function), grid[0], grid[1], grid[2], block[0],
                         block[1], block[2], smem, as_stream(stream), params, nullptr),
        [&] {
          return fmt::format("cuLaunchKernel({}, grid [{},{},{}], block [{},{},{}], smem {})", what,
                             grid[0], grid[1], grid[2], block[0], block[1], block[2], smem);
        });
}

void encode_tensor_map(void* out, DType dtype, uint64_t ptr, const std::vector<uint64_t>& dims,
                       const std::vector<uint64_t>& strides_bytes, const std::vector<uint32_t>& box,
                       const std::vector<uint32_t>& elem_strides, int swizzle) {
  const Call call;
  const Api& a = call.fns();
  static_assert(sizeof(CUtensorMap) == 128, "CUtensorMap is 128 bytes");
  KILN_CHECK(a.cuTensorMapEncodeTiled != nullptr,
             "this CUDA driver (version {}) has no cuTensorMapEncodeTiled: kernels with TMA loads "
             "need a CUDA 12 or newer driver",
             state().version);
  KILN_ASSERT(reinterpret_cast<uintptr_t>(out) % 64 == 0, "tensor map storage not 64-B aligned");
  const size_t r = dims.size();
  KILN_ASSERT(r >= 1 && r <= 5 && strides_bytes.size() + 1 == r && box.size() == r &&
                  elem_strides.size() == r,
              "tensor map of rank {}", r);
  CUtensorMapDataType t = dtype == DType::F16    ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                          : dtype == DType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  cuuint64_t d[5], st[4];
  cuuint32_t bx[5], es[5];
  std::string shape;
  for (size_t i = 0; i < r; ++i) {
    d[i] = dims[i];
    bx[i] = box[i];
    es[i] = elem_strides[i];
    if (i + 1 < r) st[i] = strides_bytes[i];
    shape += fmt::format("{}{}", i ? " x " : "", dims[i]);
  }
  check(a.cuTensorMapEncodeTiled(
            reinterpret_cast<CUtensorMap*>(out), t, static_cast<cuuint32_t>(r),
            reinterpret_cast<void*>(ptr), d, st, bx, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle == 0 ? CU_TENSOR_MAP_SWIZZLE_NONE : CU_TENSOR_MAP_SWIZZLE_128B,
            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        [&] {
          return fmt::format(
              "cuTensorMapEncodeTiled({} {} (innermost first), swizzle {}, address 0x{:x})", shape,
              dtype_name(dtype), swizzle, ptr);
        });
}

void encode_im2col_tensor_map(void* out, DType dtype, uint64_t ptr,
                              const std::vector<uint64_t>& dims,
                              const std::vector<uint64_t>& strides_bytes,
                              const std::vector<uint32_t>& elem_strides, const int lower[2],
                              const int upper[2], uint32_t channels, uint32_t pixels) {
  const Call call;
  const Api& a = call.fns();
  KILN_CHECK(a.cuTensorMapEncodeIm2col != nullptr,
             "this CUDA driver (version {}) has no cuTensorMapEncodeIm2col: kernels with im2col "
             "TMA loads need a CUDA 12 or newer driver",
             state().version);
  KILN_ASSERT(reinterpret_cast<uintptr_t>(out) % 64 == 0, "tensor map storage not 64-B aligned");
  KILN_ASSERT(dims.size() == 4 && strides_bytes.size() == 3 && elem_strides.size() == 4,
              "im2col tensor map of rank {}", dims.size());
  CUtensorMapDataType t = dtype == DType::F16    ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                          : dtype == DType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  cuuint64_t d[4], st[3];
  cuuint32_t es[4];
  std::string shape;
  for (size_t i = 0; i < 4; ++i) {
    d[i] = dims[i];
    es[i] = elem_strides[i];
    if (i < 3) st[i] = strides_bytes[i];
    shape += fmt::format("{}{}", i ? " x " : "", dims[i]);
  }
  check(a.cuTensorMapEncodeIm2col(
            reinterpret_cast<CUtensorMap*>(out), t, 4, reinterpret_cast<void*>(ptr), d, st, lower,
            upper, channels, pixels, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        [&] {
          return fmt::format(
              "cuTensorMapEncodeIm2col({} {} (innermost first), corners w/h {}/{} .. {}/{}, "
              "{} channels x {} pixels, address 0x{:x})",
              shape, dtype_name(dtype), lower[0], lower[1], upper[0], upper[1], channels, pixels,
              ptr);
        });
}

bool mem_info(size_t* free_bytes, size_t* total_bytes) {
  const Call call;
  const Api& a = call.fns();
  return a.cuMemGetInfo != nullptr && a.cuMemGetInfo(free_bytes, total_bytes) == CUDA_SUCCESS;
}

void check_device_bytes(const std::string& what, uint64_t bytes) {
  size_t free = 0, total = 0;
  if (!mem_info(&free, &total)) return;  // unknown: cuMemAlloc says what it can
  KILN_CHECK(bytes <= free, "{}: {} of device memory, but the device has {} free (of {})", what,
             bytes_text(bytes), bytes_text(free), bytes_text(total));
}

uint64_t mem_alloc(size_t bytes) {
  const Call call;
  const Api& a = call.fns();
  check_device_bytes(fmt::format("a device buffer of {} bytes", bytes), bytes);
  CUdeviceptr p = 0;
  check(a.cuMemAlloc(&p, bytes), [&] { return fmt::format("cuMemAlloc({} bytes)", bytes); });
  return static_cast<uint64_t>(p);
}

void mem_free(uint64_t ptr) {
  if (!ptr || !state().ok) return;
  try {
    // A buffer outlives the scope it was allocated in (destructors run anywhere): free it in its
    // own context.
    CUcontext owner = nullptr;
    if (state().api.cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT,
                                          static_cast<CUdeviceptr>(ptr)) == CUDA_SUCCESS &&
        owner != nullptr) {
      ContextScope scope(Context{owner, -1});
      state().api.cuMemFree(static_cast<CUdeviceptr>(ptr));
      return;
    }
    Call().fns().cuMemFree(static_cast<CUdeviceptr>(ptr));
  } catch (const Error&) {
    // Freeing happens in destructors: nothing useful can be done with a failure there.
  }
}

void memcpy_htod(uint64_t dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check(Call().fns().cuMemcpyHtoD(static_cast<CUdeviceptr>(dst), src, bytes),
        [&] { return fmt::format("cuMemcpyHtoD({} bytes)", bytes); });
}

void memcpy_dtoh(void* dst, uint64_t src, size_t bytes) {
  if (bytes == 0) return;
  check(Call().fns().cuMemcpyDtoH(dst, static_cast<CUdeviceptr>(src), bytes),
        [&] { return fmt::format("cuMemcpyDtoH({} bytes)", bytes); });
}

void memcpy_dtoh_async(void* dst, uint64_t src, size_t bytes, void* stream) {
  if (bytes == 0) return;
  check(
      Call().fns().cuMemcpyDtoHAsync(dst, static_cast<CUdeviceptr>(src), bytes, as_stream(stream)),
      [&] { return fmt::format("cuMemcpyDtoHAsync({} bytes)", bytes); });
}

void* host_alloc_pinned(size_t bytes) {
  void* p = nullptr;
  check(Call().fns().cuMemAllocHost(&p, bytes),
        [&] { return fmt::format("cuMemAllocHost({} bytes)", bytes); });
  return p;
}

void host_free_pinned(void* ptr) {
  if (!ptr || !state().ok) return;
  Call().fns().cuMemFreeHost(ptr);
}

void memcpy_dtod_async(uint64_t dst, uint64_t src, size_t bytes, void* stream) {
  if (bytes == 0) return;
  check(Call().fns().cuMemcpyDtoDAsync(static_cast<CUdeviceptr>(dst), static_cast<CUdeviceptr>(src),
                                       bytes, as_stream(stream)),
        [&] { return fmt::format("cuMemcpyDtoDAsync({} bytes)", bytes); });
}

void memset_d8(uint64_t dst, uint8_t value, size_t bytes) {
  if (bytes == 0) return;
  check(Call().fns().cuMemsetD8(static_cast<CUdeviceptr>(dst), value, bytes),
        [&] { return fmt::format("cuMemsetD8({} bytes)", bytes); });
}

void memset_d8_async(uint64_t dst, uint8_t value, size_t bytes, void* stream) {
  if (bytes == 0) return;
  check(
      Call().fns().cuMemsetD8Async(static_cast<CUdeviceptr>(dst), value, bytes, as_stream(stream)),
      [&] { return fmt::format("cuMemsetD8Async({} bytes)", bytes); });
}

void* stream_create() {
  CUstream s = nullptr;
  check(Call().fns().cuStreamCreate(&s, CU_STREAM_DEFAULT), "cuStreamCreate");
  return s;
}

void stream_destroy(void* stream) {
  if (!stream || !state().ok) return;
  Call().fns().cuStreamDestroy(as_stream(stream));
}

void stream_synchronize(void* stream) {
  check(Call().fns().cuStreamSynchronize(as_stream(stream)), "cuStreamSynchronize");
}

void ctx_synchronize() {
  check(Call().fns().cuCtxSynchronize(), "cuCtxSynchronize");
}

void* stream_create_nonblocking() {
  CUstream s = nullptr;
  check(Call().fns().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate(NON_BLOCKING)");
  return s;
}

void stream_begin_capture(void* stream) {
  check(Call().fns().cuStreamBeginCapture(as_stream(stream), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
        "cuStreamBeginCapture(THREAD_LOCAL)");
}

void* stream_end_capture(void* stream) {
  CUgraph g = nullptr;
  check(Call().fns().cuStreamEndCapture(as_stream(stream), &g), "cuStreamEndCapture");
  return g;
}

void* graph_instantiate(void* graph) {
  CUgraphExec e = nullptr;
  check(Call().fns().cuGraphInstantiateWithFlags(&e, static_cast<CUgraph>(graph), 0),
        "cuGraphInstantiateWithFlags");
  return e;
}

void graph_launch(void* exec, void* stream) {
  check(Call().fns().cuGraphLaunch(static_cast<CUgraphExec>(exec), as_stream(stream)),
        "cuGraphLaunch");
}

void graph_exec_destroy(void* exec) {
  if (!exec || !state().ok) return;
  Call().fns().cuGraphExecDestroy(static_cast<CUgraphExec>(exec));
}

void graph_destroy(void* graph) {
  if (!graph || !state().ok) return;
  Call().fns().cuGraphDestroy(static_cast<CUgraph>(graph));
}

void* event_create() {
  CUevent e = nullptr;
  check(Call().fns().cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  return e;
}

void event_destroy(void* event) {
  if (!event || !state().ok) return;
  Call().fns().cuEventDestroy(static_cast<CUevent>(event));
}

void event_record(void* event, void* stream) {
  check(Call().fns().cuEventRecord(static_cast<CUevent>(event), as_stream(stream)),
        "cuEventRecord");
}

void event_synchronize(void* event) {
  check(Call().fns().cuEventSynchronize(static_cast<CUevent>(event)), "cuEventSynchronize");
}

bool event_done(void* event) {
  const CUresult r = Call().fns().cuEventQuery(static_cast<CUevent>(event));
  if (r == CUDA_ERROR_NOT_READY) return false;
  check(r, "cuEventQuery");
  return true;
}

float event_elapsed_ms(void* start, void* end) {
  float ms = 0;
  check(
      Call().fns().cuEventElapsedTime(&ms, static_cast<CUevent>(start), static_cast<CUevent>(end)),
      "cuEventElapsedTime");
  return ms;
}

}  // namespace kiln::cuda
