// GPU timing the way the PyTorch anchors are timed (triton.testing.do_bench): before every timed
// call, a 256 MiB memset flushes L2 and keeps the GPU busy, so the start event and the call are
// already queued behind it and the time excludes the host's launch latency; all calls are
// enqueued first and read back once. Used by `kiln bench`, `kiln explain --bench`, autotuning and
// bench/, so that kiln and its anchors are measured alike. Needs a CUDA device (kiln/device.hpp).
#pragma once

#include <functional>
#include <vector>

namespace kiln {

// Milliseconds of each of `iters` calls of `enqueue` (which enqueues work on `stream`, a
// CUstream; null: the legacy default stream), after `warmup` untimed calls. Not sorted.
std::vector<double> time_flushed(const std::function<void()>& enqueue, int warmup, int iters,
                                 void* stream = nullptr);

// do_bench's own budget: five flushed calls estimate the time of one (flush included), then
// `warmup_ms` of untimed calls and `rep_ms` of timed ones (at least one each), as
// triton.testing.do_bench(warmup=50, rep=300) does. Without enough warm-up a short kernel is timed
// before the clocks settle (docs/PERFORMANCE.md).
std::vector<double> time_flushed_budget(const std::function<void()>& enqueue, double warmup_ms,
                                        double rep_ms, void* stream = nullptr);

// The median of `v` (copied, then sorted); `v` must not be empty.
double median_ms(std::vector<double> v);

// Device-to-device copy bandwidth in bytes (read + written) per second, the ceiling of a
// memory-bound kernel: the median of 20 copies of 1 GiB on the legacy default stream, after 5.
double copy_bandwidth();

}  // namespace kiln
