// kiln channelnorm device helpers: included after the prelude by the split (sm_80+: statistics
// and apply kernels) and cluster (sm_90: thread-block clusters) paths of
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
// The cluster path's slice arrives in commit groups; kiln_cn_cp_wait<N> waits until at most the N
// newest groups of this thread are still in flight.
KILN_DEVICE void kiln_cn_cp_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N>
KILN_DEVICE void kiln_cn_cp_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
// ---- split path: a statistics kernel, then an apply kernel that re-reads the input from L2
// A float other CTAs wrote: from L2, never a stale L1 line.
KILN_DEVICE float kiln_cn_ld_relaxed(const float* p) {
  float v;
  asm volatile("ld.relaxed.gpu.global.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
  return v;
}
// L2 eviction policies (sm_80+) for the loads and stores below: the statistics kernel reads
// with evict_last so that the input outlives the flush's and other traffic's lines until the
// apply kernel re-reads it with evict_first; the apply kernel's stores are evict_first too.
KILN_DEVICE unsigned long long kiln_cn_policy_evict_last() {
  unsigned long long p;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  return p;
}
KILN_DEVICE unsigned long long kiln_cn_policy_evict_first() {
  unsigned long long p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
KILN_DEVICE uint4 kiln_cn_ld16_hint(const void* p, unsigned long long pol) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p), "l"(pol));
  return r;
}
KILN_DEVICE void kiln_cn_st16_hint(void* p, uint4 v, unsigned long long pol) {
  asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(p), "r"(v.x),
               "r"(v.y), "r"(v.z), "r"(v.w), "l"(pol)
               : "memory");
}
template <class T>
KILN_DEVICE void kiln_cn_stv_hint(T* p, const float* v, unsigned long long pol) {
  kiln_cn_st16_hint(p, kiln_pack16(v, p), pol);
}

#endif  // KILN_CHANNELNORM_CUH
