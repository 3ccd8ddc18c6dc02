#include "runtime/event_timer.hpp"

#include <algorithm>

#include "engine/base/check.hpp"
#include "runtime/cuda_driver.hpp"

namespace kiln::cuda {

namespace {
constexpr size_t kFlushBytes = size_t{256} << 20;  // as do_bench: larger than any L2 so far
}

std::vector<double> time_flushed(const std::function<void()>& enqueue, int warmup, int iters,
                                 void* stream) {
  KILN_CHECK(iters >= 1, "timing: iters must be at least 1, found {}", iters);
  KILN_CHECK(warmup >= 0, "timing: warmup must be non-negative, found {}", warmup);
  DeviceBuffer flush(kFlushBytes);
  for (int i = 0; i < warmup; ++i) enqueue();
  // Enough events for every call; created up front so that creation is not timed.
  std::vector<void*> start(static_cast<size_t>(iters)), end(static_cast<size_t>(iters));
  struct Destroy {
    std::vector<void*>& a;
    std::vector<void*>& b;
    ~Destroy() {
      for (void* e : a)
        if (e) event_destroy(e);
      for (void* e : b)
        if (e) event_destroy(e);
    }
  } destroy{start, end};
  for (int i = 0; i < iters; ++i) {
    start[static_cast<size_t>(i)] = event_create();
    end[static_cast<size_t>(i)] = event_create();
  }
  stream_synchronize(stream);
  for (int i = 0; i < iters; ++i) {
    memset_d8_async(flush.ptr(), 0, kFlushBytes, stream);
    event_record(start[static_cast<size_t>(i)], stream);
    enqueue();
    event_record(end[static_cast<size_t>(i)], stream);
  }
  event_synchronize(end.back());
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i)
    ms.push_back(event_elapsed_ms(start[static_cast<size_t>(i)], end[static_cast<size_t>(i)]));
  return ms;
}

std::vector<double> time_flushed_budget(const std::function<void()>& enqueue, double warmup_ms,
                                        double rep_ms, void* stream) {
  KILN_CHECK(warmup_ms >= 0 && rep_ms > 0, "timing: budgets must be positive, found {} / {} ms",
             warmup_ms, rep_ms);
  double est = 0;
  {
    DeviceBuffer flush(kFlushBytes);
    void* e0 = event_create();
    void* e1 = event_create();
    enqueue();  // the first call may load modules: not part of the estimate
    stream_synchronize(stream);
    event_record(e0, stream);
    for (int i = 0; i < 5; ++i) {
      memset_d8_async(flush.ptr(), 0, kFlushBytes, stream);
      enqueue();
    }
    event_record(e1, stream);
    event_synchronize(e1);
    est = event_elapsed_ms(e0, e1) / 5;
    event_destroy(e0);
    event_destroy(e1);
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

}  // namespace kiln::cuda
