// kiln contraction helpers: dtype conversion for conv2d / matmul kernels (no toolkit headers).
// f16 and bf16 values are carried as their 16-bit patterns (unsigned short).
#pragma once

__device__ __forceinline__ float kc_ld_f32(const float* p) {
  return *p;
}
__device__ __forceinline__ float kc_ld_f16(const unsigned short* p) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(*p));
  return f;
}
__device__ __forceinline__ float kc_ld_bf16(const unsigned short* p) {
  return __uint_as_float(((unsigned)*p) << 16);
}
// Two adjacent 16-bit values at p (4-byte aligned) as one 32-bit word (first in the low half),
// and element e (0, 1) of such a word as f32: the values kc_ld_f16 / kc_ld_bf16 of p + e read.
__device__ __forceinline__ unsigned kc_ld_x2(const unsigned short* p) {
  return *reinterpret_cast<const unsigned*>(p);
}
__device__ __forceinline__ float kc_f16_of_x2(unsigned w, int e) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)(e ? w >> 16 : w & 0xffffu)));
  return f;
}
__device__ __forceinline__ float kc_bf16_of_x2(unsigned w, int e) {
  return __uint_as_float(e ? w & 0xffff0000u : w << 16);
}
// Eight adjacent 16-bit values at p (16-byte aligned) as one uint4, and element e (0..7) of it.
__device__ __forceinline__ uint4 kc_ld_x8(const unsigned short* p) {
  return *reinterpret_cast<const uint4*>(p);
}
__device__ __forceinline__ unsigned kc_word_of_x8(uint4 w, int e) {
  return e < 2 ? w.x : e < 4 ? w.y : e < 6 ? w.z : w.w;
}
__device__ __forceinline__ float kc_f16_of_x8(uint4 w, int e) {
  return kc_f16_of_x2(kc_word_of_x8(w, e), e & 1);
}
__device__ __forceinline__ float kc_bf16_of_x8(uint4 w, int e) {
  return kc_bf16_of_x2(kc_word_of_x8(w, e), e & 1);
}
__device__ __forceinline__ unsigned short kc_f32_to_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ unsigned short kc_f32_to_bf16(float f) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ float kc_f16_to_f32(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ float kc_bf16_to_f32(unsigned short h) {
  return __uint_as_float(((unsigned)h) << 16);
}
__device__ __forceinline__ void kc_st_f32(float* p, float v) {
  *p = v;
}
__device__ __forceinline__ void kc_st_f16(unsigned short* p, float v) {
  *p = kc_f32_to_f16(v);
}
__device__ __forceinline__ void kc_st_bf16(unsigned short* p, float v) {
  *p = kc_f32_to_bf16(v);
}
// Rounds an f32 value through a 16-bit type (what a cast node does).
__device__ __forceinline__ float kc_round_f16(float v) {
  return kc_f16_to_f32(kc_f32_to_f16(v));
}
__device__ __forceinline__ float kc_round_bf16(float v) {
  return kc_bf16_to_f32(kc_f32_to_bf16(v));
}

// Shared-memory addresses and cp.async (sm_80+): the mma.sync / wgmma pipelines
// (contraction_mma.cuh) and the tiled depthwise kernel stage their operands with these.
__device__ __forceinline__ unsigned kc_smem_u32(const void* p) {
  unsigned r;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
}
// 16-byte async copy; `valid` false zero-fills the destination without reading `src`.
__device__ __forceinline__ void kc_cp_async16(unsigned dst, const void* src, bool valid) {
  int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
// 8-byte async copy (4 channels of 16-bit data: convs with C % 4 == 0 but not % 8).
__device__ __forceinline__ void kc_cp_async8(unsigned dst, const void* src, bool valid) {
  int n = valid ? 8 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
__device__ __forceinline__ void kc_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void kc_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
