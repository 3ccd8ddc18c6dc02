// Kernel timing the way the PyTorch anchors are timed (triton.testing.do_bench): before every
// timed call, a 256 MiB memset flushes L2 and keeps the GPU busy, so the start event and the
// call are already queued behind it and the time excludes the host's launch latency; all calls
// are enqueued first and read back once. Used by `kiln bench`, `kiln explain --bench` and
// bench/, so that kiln and its anchors are measured alike.
#pragma once

#include <functional>
#include <vector>

namespace kiln::cuda {

// Milliseconds of each of `iters` calls of `enqueue` (which enqueues work on `stream`), after
// `warmup` untimed calls. Not sorted.
std::vector<double> time_flushed(const std::function<void()>& enqueue, int warmup, int iters,
                                 void* stream = nullptr);

// The median of `v` (copied, then sorted).
double median_ms(std::vector<double> v);

}  // namespace kiln::cuda
