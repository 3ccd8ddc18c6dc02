// kiln channelnorm device helpers: included after the prelude by the resident (sm_80+: grid-wide
// per-sample wait) and cluster (sm_90: thread-block clusters) paths of
// codegen/emit_channelnorm.cpp. The cluster helpers are inline and only emitted where called.
// Guarded, not `#pragma once`: several kernels may be concatenated into one NVRTC program.
#ifndef KILN_CHANNELNORM_CUH
#define KILN_CHANNELNORM_CUH

// Rank of this CTA in its cluster.
KILN_DEVICE unsigned kiln_cn_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// Full cluster barrier (every thread of every CTA): shared-memory writes before it are visible
// to the whole cluster after it.
KILN_DEVICE void kiln_cn_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::
                   : "memory");
}
// Split barrier: arrive once this CTA is done reading its peers' shared memory, wait before the
// CTA exits (a CTA's shared memory must outlive its peers' reads of it).
KILN_DEVICE void kiln_cn_cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
KILN_DEVICE void kiln_cn_cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The float at the same shared-memory address as `local`, in the CTA of cluster rank `rank`.
KILN_DEVICE float kiln_cn_ld_remote(const float* local, unsigned rank) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(local));
  unsigned ra;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(ra) : "memory");
  return v;
}
// 16 bytes global -> shared without staging in registers (L2 only: the data is read once).
KILN_DEVICE void kiln_cn_cp16(void* smem, const void* gmem) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(a), "l"(gmem) : "memory");
}
KILN_DEVICE void kiln_cn_cp_wait_all() {
  asm volatile("cp.async.wait_all;" ::: "memory");
}
// One 16-byte vector (as loaded) to floats; the pointer only selects the element type.
KILN_DEVICE void kiln_cn_unpack(uint4 r, const float*, float* v) {
  v[0] = __uint_as_float(r.x);
  v[1] = __uint_as_float(r.y);
  v[2] = __uint_as_float(r.z);
  v[3] = __uint_as_float(r.w);
}
template <class T>
KILN_DEVICE void kiln_cn_unpack(uint4 r, const T* tag, float* v) {
  kiln_unpack(r.x, tag, v);
  kiln_unpack(r.y, tag, v + 2);
  kiln_unpack(r.z, tag, v + 4);
  kiln_unpack(r.w, tag, v + 6);
}

// ---- resident path: CTAs of one sample meet through counters in global memory
KILN_DEVICE unsigned kiln_cn_ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
// A float other CTAs accumulated with atomics: from L2, never a stale L1 line.
KILN_DEVICE float kiln_cn_ld_relaxed(const float* p) {
  float v;
  asm volatile("ld.relaxed.gpu.global.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
  return v;
}
KILN_DEVICE unsigned long long kiln_cn_globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// One thread of the CTA: publishes the CTA's earlier writes and atomics (fence, then the
// arrival), then waits until `expected` CTAs have arrived at `*counter`. The waiters rely on all
// of them being resident at once (see emit_channelnorm.cpp); if that ever fails, trap after about
// two seconds instead of hanging the device.
KILN_DEVICE void kiln_cn_arrive_and_wait(unsigned* counter, unsigned expected) {
  __threadfence();
  atomicAdd(counter, 1u);
  if (kiln_cn_ld_acquire(counter) < expected) {
    const unsigned long long t0 = kiln_cn_globaltimer();
    unsigned ns = 32;
    while (kiln_cn_ld_acquire(counter) < expected) {
      asm volatile("nanosleep.u32 %0;" ::"r"(ns));
      ns = ns < 256 ? ns * 2 : ns;  // short: the last arrival is at most a chunk load away
      if (kiln_cn_globaltimer() - t0 > 2000000000ull) asm volatile("trap;");
    }
  }
  __threadfence();
}

#endif  // KILN_CHANNELNORM_CUH
