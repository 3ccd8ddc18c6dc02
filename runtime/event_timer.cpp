#include "runtime/event_timer.hpp"

#include <algorithm>

#include "engine/base/check.hpp"
#include "runtime/cuda_driver.hpp"

namespace kiln {

namespace {
constexpr size_t kFlushBytes = size_t{256} << 20;  // as do_bench: larger than any L2 so far
constexpr size_t kCopyBytes = size_t{1} << 30;     // copy_bandwidth: far larger than L2
}  // namespace

std::vector<double> time_flushed(const std::function<void()>& enqueue, int warmup, int iters,
                                 void* stream) {
  KILN_CHECK(iters >= 1, "timing: iters must be at least 1, found {}", iters);
  KILN_CHECK(warmup >= 0, "timing: warmup must be non-negative, found {}", warmup);
  cuda::DeviceBuffer flush(kFlushBytes);
  for (int i = 0; i < warmup; ++i) enqueue();
  // Enough events for every call; created up front so that creation is not timed.
  std::vector<void*> start(static_cast<size_t>(iters)), end(static_cast<size_t>(iters));
  struct Destroy {
    std::vector<void*>& a;
    std::vector<void*>& b;
    ~Destroy() {
      for (void* e : a)
        if (e) cuda::event_destroy(e);
      for (void* e : b)
        if (e) cuda::event_destroy(e);
    }
  } destroy{start, end};
  for (int i = 0; i < iters; ++i) {
    start[static_cast<size_t>(i)] = cuda::event_create();
    end[static_cast<size_t>(i)] = cuda::event_create();
  }
  cuda::stream_synchronize(stream);
  for (int i = 0; i < iters; ++i) {
    cuda::memset_d8_async(flush.ptr(), 0, kFlushBytes, stream);
    cuda::event_record(start[static_cast<size_t>(i)], stream);
    enqueue();
    cuda::event_record(end[static_cast<size_t>(i)], stream);
  }
  cuda::event_synchronize(end.back());
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i)
    ms.push_back(
        cuda::event_elapsed_ms(start[static_cast<size_t>(i)], end[static_cast<size_t>(i)]));
  return ms;
}

std::vector<double> time_flushed_budget(const std::function<void()>& enqueue, double warmup_ms,
                                        double rep_ms, void* stream) {
  KILN_CHECK(warmup_ms >= 0 && rep_ms > 0, "timing: budgets must be positive, found {} / {} ms",
             warmup_ms, rep_ms);
  double est = 0;
  {
    cuda::DeviceBuffer flush(kFlushBytes);
    void* e0 = cuda::event_create();
    void* e1 = cuda::event_create();
    enqueue();  // the first call may load modules: not part of the estimate
    cuda::stream_synchronize(stream);
    cuda::event_record(e0, stream);
    for (int i = 0; i < 5; ++i) {
      cuda::memset_d8_async(flush.ptr(), 0, kFlushBytes, stream);
      enqueue();
    }
    cuda::event_record(e1, stream);
    cuda::event_synchronize(e1);
    est = cuda::event_elapsed_ms(e0, e1) / 5;
    cuda::event_destroy(e0);
    cuda::event_destroy(e1);
  }
  est = std::max(est, 1e-3);
  const int warmup = std::max(1, static_cast<int>(warmup_ms / est));
  const int iters = std::max(1, static_cast<int>(rep_ms / est));
  return time_flushed(enqueue, warmup, iters, stream);
}

double median_ms(std::vector<double> v) {
  KILN_ASSERT(!v.empty(), "median of nothing");
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double copy_bandwidth() {
  cuda::DeviceBuffer a(kCopyBytes), b(kCopyBytes);
  cuda::memset_d8(a.ptr(), 1, kCopyBytes);
  void* e0 = cuda::event_create();
  void* e1 = cuda::event_create();
  std::vector<double> t;
  for (int i = 0; i < 25; ++i) {
    cuda::event_record(e0, nullptr);
    cuda::memcpy_dtod_async(b.ptr(), a.ptr(), kCopyBytes, nullptr);
    cuda::event_record(e1, nullptr);
    cuda::event_synchronize(e1);
    if (i >= 5) t.push_back(cuda::event_elapsed_ms(e0, e1));
  }
  cuda::event_destroy(e0);
  cuda::event_destroy(e1);
  return 2.0 * static_cast<double>(kCopyBytes) / (median_ms(t) * 1e-3);
}

}  // namespace kiln
