// Shared by the hand-written device probes (bench/*_probe.cu): error checks and do_bench's timing.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t err_ = (x);                                                                     \
    if (err_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(err_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

namespace probe {

constexpr size_t kFlushBytes = size_t{256} << 20;

// do_bench's L2 flush: a 256 MiB memset (it leaves L2 full of dirty lines).
inline void flush() {
  static void* buf = nullptr;
  if (!buf) CK(cudaMalloc(&buf, kFlushBytes));
  CK(cudaMemsetAsync(buf, 0, kFlushBytes));
}

// do_bench's timing: a flush before every call, CUDA events around the call alone, the median of
// `iters` calls after `warm` warm-up calls.
template <class F>
float time_ms(F launch, int warm, int iters) {
  for (int i = 0; i < warm; ++i) {
    flush();
    launch();
  }
  std::vector<cudaEvent_t> s(iters), e(iters);
  for (int i = 0; i < iters; ++i) {
    CK(cudaEventCreate(&s[i]));
    CK(cudaEventCreate(&e[i]));
  }
  CK(cudaDeviceSynchronize());
  for (int i = 0; i < iters; ++i) {
    flush();
    CK(cudaEventRecord(s[i]));
    launch();
    CK(cudaEventRecord(e[i]));
  }
  CK(cudaDeviceSynchronize());
  CK(cudaGetLastError());
  std::vector<float> ms(iters);
  for (int i = 0; i < iters; ++i) {
    CK(cudaEventElapsedTime(&ms[i], s[i], e[i]));
    CK(cudaEventDestroy(s[i]));
    CK(cudaEventDestroy(e[i]));
  }
  std::sort(ms.begin(), ms.end());
  return ms[iters / 2];
}

// The ceiling: a 2 GiB device-to-device copy timed the same way, in GB/s (bytes read + written).
template <class Timer>
double copy_ceiling_gbs(Timer time) {
  void *a, *b;
  const size_t big = size_t{2} << 30;
  CK(cudaMalloc(&a, big));
  CK(cudaMalloc(&b, big));
  const float ms = time([&] { CK(cudaMemcpyAsync(b, a, big, cudaMemcpyDeviceToDevice)); });
  const double gbs = 2.0 * big / (ms * 1e-3) / 1e9;
  std::printf("copy 2 GiB: %.4f ms = %.1f GB/s (the ceiling)\n", ms, gbs);
  CK(cudaFree(a));
  CK(cudaFree(b));
  return gbs;
}

}  // namespace probe
