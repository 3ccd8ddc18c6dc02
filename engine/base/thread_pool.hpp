// A tiny parallel-for over std::threads: no pool kept between calls (starting two threads costs
// microseconds; the CPU reference calls it once per node).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

// `threads` if positive, else the hardware concurrency (at least 1).
inline int resolve_threads(int threads) {
  if (threads > 0) return threads;
  unsigned h = std::thread::hardware_concurrency();
  return h > 0 ? static_cast<int>(h) : 1;
}

// Calls f(i) for every i in [0, n) on up to `threads` threads (0 = hardware concurrency). Work is
// handed out dynamically in chunks of `grain` indices. The first exception thrown by any f(i) is
// rethrown here once every thread has stopped; the remaining chunks are then skipped.
template <class F>
void parallel_for(int64_t n, int threads, F&& f, int64_t grain = 1) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = (n + grain - 1) / grain;
  int t = static_cast<int>(std::min<int64_t>(resolve_threads(threads), chunks));
  if (t <= 1) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::atomic<int64_t> next{0};
  std::atomic<bool> stop{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    try {
      while (!stop.load(std::memory_order_relaxed)) {
        int64_t b = next.fetch_add(grain, std::memory_order_relaxed);
        if (b >= n) return;
        int64_t e = std::min(n, b + grain);
        for (int64_t i = b; i < e; ++i) f(i);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      stop.store(true);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(t - 1));
  for (int i = 1; i < t; ++i) {
    try {
      pool.emplace_back(work);
    } catch (...) {
      break;  // could not start a thread: the ones we have (and this one) do the work
    }
  }
  work();
  for (std::thread& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace kiln
