// Shared helpers for GPU tests: skip without a device, upload/download HostTensors, poisoned
// outputs, random inputs, and comparison against the CPU reference with dtype tolerances.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine/base/random.hpp"
#include "kiln/engine.hpp"
#include "kiln/host_tensor.hpp"
#include "kiln/reference.hpp"
#include "runtime/cuda_driver.hpp"

namespace kiln::gputest {

// In a TEST body: skips (with the reason) when there is no CUDA driver or device.
#define KILN_REQUIRE_DEVICE()                             \
  do {                                                    \
    std::string kiln_reason_;                             \
    if (!::kiln::cuda::driver_available(&kiln_reason_))   \
      GTEST_SKIP() << "no CUDA device: " << kiln_reason_; \
  } while (0)

// A device buffer with the DeviceTensor that describes it.
struct DeviceData {
  cuda::DeviceBuffer buf;
  DeviceTensor t;
  DType dtype = DType::F32;
  Layout layout = Layout::NCHW;
};

// Copies `h` to the device in `layout` (its logical shape is kept).
inline DeviceData upload(const HostTensor& h, Layout layout = Layout::NCHW) {
  HostTensor r = h.relayout(layout);
  DeviceData d;
  d.buf = cuda::DeviceBuffer(std::max<size_t>(r.data.size(), 1));
  cuda::memcpy_htod(d.buf.ptr(), r.data.data(), r.data.size());
  cuda::ctx_synchronize();  // a pageable copy may still be in flight when cuMemcpyHtoD returns
  d.t.ptr = d.buf.ptr();
  d.t.shape = r.shape;
  d.dtype = r.dtype;
  d.layout = layout;
  return d;
}

// An uninitialized-looking output: every byte 0xFF (NaN in f32, f16 and bf16), so that an element
// a kernel forgets to write can never pass a comparison.
inline DeviceData alloc_poisoned(DType dtype, const std::vector<int64_t>& shape,
                                 Layout layout = Layout::NCHW) {
  HostTensor z = HostTensor::zeros(dtype, shape, layout);
  DeviceData d;
  d.buf = cuda::DeviceBuffer(std::max<size_t>(z.data.size(), 1));
  cuda::memset_d8(d.buf.ptr(), 0xFF, d.buf.bytes());
  cuda::ctx_synchronize();  // cuMemsetD8 may be asynchronous: never race the kernel under test
  d.t.ptr = d.buf.ptr();
  d.t.shape = shape;
  d.dtype = dtype;
  d.layout = layout;
  return d;
}

// Reads a device tensor back (synchronizes the context first).
inline HostTensor download(const DeviceData& d) {
  cuda::ctx_synchronize();
  HostTensor h = HostTensor::zeros(d.dtype, d.t.shape, d.layout);
  cuda::memcpy_dtoh(h.data.data(), d.t.ptr, h.data.size());
  return h;
}

// Seeded uniform values in [lo, hi), rounded to dtype.
inline HostTensor random_tensor(DType dtype, const std::vector<int64_t>& shape, uint64_t seed,
                                double lo = -1.0, double hi = 1.0) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return HostTensor::from_f64(dtype, shape, random_values(false, lo, hi, seed, n));
}

// The house tolerance by dtype: f32 1e-5 relative, f16/bf16 1e-2.
inline double default_rtol(DType t) {
  return t == DType::F32 ? 1e-5 : 1e-2;
}

// |got - want| <= atol + rtol * |want| for every element; NaN/Inf in `got` never passes unless
// `want` holds the same non-finite value. Reports the first few mismatches and the worst one.
inline ::testing::AssertionResult all_close(const HostTensor& got, const HostTensor& want,
                                            double rtol, double atol = -1) {
  if (atol < 0) atol = rtol;
  if (got.shape != want.shape) return ::testing::AssertionFailure() << "shape mismatch";
  std::vector<double> g = got.to_f64(), w = want.to_f64();
  int64_t bad = 0;
  std::string first;
  double worst = 0;
  int64_t worst_i = -1;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok;
    if (!std::isfinite(w[i]))
      ok = std::isnan(w[i]) ? std::isnan(g[i]) : g[i] == w[i];
    else
      ok = std::isfinite(g[i]) && std::abs(g[i] - w[i]) <= atol + rtol * std::abs(w[i]);
    if (ok) continue;
    double err = std::isfinite(g[i]) ? std::abs(g[i] - w[i]) : INFINITY;
    if (worst_i < 0 || err > worst) {
      worst = err;
      worst_i = static_cast<int64_t>(i);
    }
    if (bad++ < 5)
      first += "\n  [" + std::to_string(i) + "] got " + std::to_string(g[i]) + " want " +
               std::to_string(w[i]);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << g.size() << " elements differ (rtol " << rtol << ", atol " << atol
         << "); worst at [" << worst_i << "] |err| " << worst << first;
}

// Device inputs/outputs by name, as CompiledGraph::run takes them.
inline std::map<std::string, DeviceTensor> tensors_of(const std::map<std::string, DeviceData>& m) {
  std::map<std::string, DeviceTensor> out;
  for (const auto& [k, v] : m) out[k] = v.t;
  return out;
}

// Runs `cg` (compiled from `g`) on `inputs`, each uploaded in its declared layout, every output
// poisoned first, and compares each output with the CPU reference of `g` (the graph as built) at
// its dtype's tolerance.
// `atol_by_scale`: the absolute tolerance is rtol times the output's largest magnitude (a deep
// 16-bit chain whose outputs cancel to near zero: each rounding is relative to the values that
// were summed, not to the small result).
inline ::testing::AssertionResult matches_reference(CompiledGraph& cg, const Graph& g,
                                                    const std::map<std::string, HostTensor>& inputs,
                                                    void* stream, bool atol_by_scale = false) {
  const auto want = run_reference(g, inputs);
  std::map<std::string, DeviceData> din, dout;
  for (int id : g.inputs()) {
    const TensorInfo& t = g.tensor(id);
    din[t.name] = upload(inputs.at(t.name), t.desc.layout);
  }
  for (int id : g.outputs()) {
    const TensorInfo& t = g.tensor(id);
    dout[t.name] = alloc_poisoned(t.desc.dtype, want.at(t.name).shape, t.desc.layout);
  }
  cg.run(tensors_of(din), tensors_of(dout), stream);
  cuda::stream_synchronize(stream);
  for (auto& [name, d] : dout) {
    const double rtol = default_rtol(d.dtype);
    double atol = rtol;
    if (atol_by_scale)
      for (double v : want.at(name).to_f64()) atol = std::max(atol, rtol * std::abs(v));
    auto r = all_close(download(d), want.at(name), rtol, atol);
    if (!r) return r << " (output " << name << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kiln::gputest
