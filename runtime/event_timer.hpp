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

// do_bench's own budget: five flushed calls estimate the time of one (flush included), then
// `warmup_ms` of untimed calls and `rep_ms` of timed ones (at least one each), as
// triton.testing.do_bench(warmup=50, rep=300) does. Without enough warm-up a short kernel is timed
// before the clocks settle: 10 warm-up calls left kiln's whole-graph times 1-4 % above the same
// kernel timed after longer runs (docs/PERFORMANCE.md run 49).
std::vector<double> time_flushed_budget(const std::function<void()>& enqueue, double warmup_ms,
                                        double rep_ms, void* stream = nullptr);

// The median of `v` (copied, then sorted).
double median_ms(std::vector<double> v);

}  // namespace kiln::cuda
