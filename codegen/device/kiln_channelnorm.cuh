// kiln channelnorm device helpers (sm_90 thread-block clusters): included after the prelude by
// the cluster path of codegen/emit_channelnorm.cpp. Guarded, not `#pragma once`: several kernels
// may be concatenated into one NVRTC program.
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

#endif  // KILN_CHANNELNORM_CUH
