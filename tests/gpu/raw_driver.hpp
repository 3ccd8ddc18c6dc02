// The few raw CUDA driver calls the device tests make behind kiln's back (creating their own
// contexts, asking which context is current or owns a pointer), resolved from libcuda.so.1 by
// their stable versioned names: kiln never links libcuda and the tests do not either.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kiln::gputest {

struct RawDriver {
  using Ctx = void*;  // CUcontext
  int (*ctx_create)(Ctx*, unsigned, int) = nullptr;
  int (*ctx_destroy)(Ctx) = nullptr;
  int (*ctx_get_current)(Ctx*) = nullptr;
  int (*ctx_set_current)(Ctx) = nullptr;
  int (*ctx_push)(Ctx) = nullptr;
  int (*ctx_pop)(Ctx*) = nullptr;
  int (*pointer_attribute)(void*, int, uint64_t) = nullptr;
  int (*primary_state)(int, unsigned*, int*) = nullptr;

  static const RawDriver& get() {
    static RawDriver d = [] {
      RawDriver r;
      void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
      if (!lib) throw std::runtime_error("libcuda.so.1 not loadable");
      auto sym = [lib](const char* name) {
        void* f = dlsym(lib, name);
        if (!f) throw std::runtime_error(std::string("libcuda.so.1 lacks ") + name);
        return f;
      };
      r.ctx_create = reinterpret_cast<decltype(r.ctx_create)>(sym("cuCtxCreate_v2"));
      r.ctx_destroy = reinterpret_cast<decltype(r.ctx_destroy)>(sym("cuCtxDestroy_v2"));
      r.ctx_get_current = reinterpret_cast<decltype(r.ctx_get_current)>(sym("cuCtxGetCurrent"));
      r.ctx_set_current = reinterpret_cast<decltype(r.ctx_set_current)>(sym("cuCtxSetCurrent"));
      r.ctx_push = reinterpret_cast<decltype(r.ctx_push)>(sym("cuCtxPushCurrent_v2"));
      r.ctx_pop = reinterpret_cast<decltype(r.ctx_pop)>(sym("cuCtxPopCurrent_v2"));
      r.pointer_attribute =
          reinterpret_cast<decltype(r.pointer_attribute)>(sym("cuPointerGetAttribute"));
      r.primary_state =
          reinterpret_cast<decltype(r.primary_state)>(sym("cuDevicePrimaryCtxGetState"));
      return r;
    }();
    return d;
  }

  Ctx current() const {
    Ctx c = nullptr;
    if (ctx_get_current(&c) != 0) throw std::runtime_error("cuCtxGetCurrent failed");
    return c;
  }
  // The context that owns device pointer `p` (CU_POINTER_ATTRIBUTE_CONTEXT).
  Ctx owner(uint64_t p) const {
    Ctx c = nullptr;
    if (pointer_attribute(&c, 1, p) != 0) throw std::runtime_error("cuPointerGetAttribute failed");
    return c;
  }
};

// A context of the test's own on device 0 (cuCtxCreate: pushed, so current on this thread), popped
// and destroyed at the end of the scope.
class OwnContext {
 public:
  OwnContext() {
    if (RawDriver::get().ctx_create(&ctx_, 0, 0) != 0)
      throw std::runtime_error("cuCtxCreate failed");
  }
  ~OwnContext() { RawDriver::get().ctx_destroy(ctx_); }
  OwnContext(const OwnContext&) = delete;
  OwnContext& operator=(const OwnContext&) = delete;
  void* get() const { return ctx_; }

 private:
  void* ctx_ = nullptr;
};

}  // namespace kiln::gputest
