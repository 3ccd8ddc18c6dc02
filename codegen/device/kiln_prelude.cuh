// kiln device prelude: included (as text) at the top of every generated kernel. No toolkit
// headers: f16/bf16 conversions are inline PTX and bit operations; everything else is NVRTC
// builtins (expf, __shfl_xor_sync, ...). Targets sm_80 and newer.
#pragma once

#define KILN_INF __int_as_float(0x7f800000)
#define KILN_DEVICE __device__ __forceinline__

// ---------------------------------------------------------------- storage types
struct __align__(2) kiln_f16 {
  unsigned short bits;
};
struct __align__(2) kiln_bf16 {
  unsigned short bits;
};

KILN_DEVICE float kiln_f16_to_f32(unsigned short h) {
  float f;
  asm("{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
  return f;
}
KILN_DEVICE unsigned short kiln_f32_to_f16(float f) {
  unsigned short h;
  asm("{ .reg .b16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(f));
  return h;
}
KILN_DEVICE float kiln_bf16_to_f32(unsigned short h) {
  return __uint_as_float(static_cast<unsigned int>(h) << 16);
}
KILN_DEVICE unsigned short kiln_f32_to_bf16(float f) {
  unsigned short h;
  asm("{ .reg .b16 t; cvt.rn.bf16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(f));
  return h;
}
// Two f32 -> one packed pair (lo in the low half), round to nearest even.
KILN_DEVICE unsigned int kiln_pack_f16x2(float lo, float hi) {
  unsigned int r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
KILN_DEVICE unsigned int kiln_pack_bf16x2(float lo, float hi) {
  unsigned int r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// A value rounded through a narrower type (cast inside a fused chain).
KILN_DEVICE float kiln_round_f16(float f) {
  return kiln_f16_to_f32(kiln_f32_to_f16(f));
}
KILN_DEVICE float kiln_round_bf16(float f) {
  return kiln_bf16_to_f32(kiln_f32_to_bf16(f));
}

// ---------------------------------------------------------------- scalar load/store (f32 math)
KILN_DEVICE float kiln_ld(const float* p) {
  return *p;
}
KILN_DEVICE float kiln_ld(const kiln_f16* p) {
  return kiln_f16_to_f32(p->bits);
}
KILN_DEVICE float kiln_ld(const kiln_bf16* p) {
  return kiln_bf16_to_f32(p->bits);
}
KILN_DEVICE void kiln_st(float* p, float v) {
  *p = v;
}
KILN_DEVICE void kiln_st(kiln_f16* p, float v) {
  p->bits = kiln_f32_to_f16(v);
}
KILN_DEVICE void kiln_st(kiln_bf16* p, float v) {
  p->bits = kiln_f32_to_bf16(v);
}

// Integer and bool elements load and store as their own type (no f32 round trip). Bool is one
// byte; any nonzero byte reads as true.
typedef unsigned char kiln_bool;
KILN_DEVICE int kiln_ld(const int* p) {
  return *p;
}
KILN_DEVICE long long kiln_ld(const long long* p) {
  return *p;
}
KILN_DEVICE bool kiln_ld(const kiln_bool* p) {
  return *p != 0;
}
KILN_DEVICE void kiln_st(int* p, int v) {
  *p = v;
}
KILN_DEVICE void kiln_st(long long* p, long long v) {
  *p = v;
}
KILN_DEVICE void kiln_st(kiln_bool* p, bool v) {
  *p = v ? 1 : 0;
}

// ---------------------------------------------------------------- integer math
// Two's complement wrapping (through the unsigned type: no signed overflow), truncating
// division with x / 0 = 0 and MIN / -1 = MIN, ONNX Mod (kiln_imod: the divisor's sign, Python;
// kiln_ifmod: the dividend's, C; x mod 0 = 0). The CPU reference computes the same
// (engine/ir/op_table.cpp).
#define KILN_DEFINE_INT_MATH(T, U)                                                      \
  KILN_DEVICE T kiln_iadd(T a, T b) {                                                   \
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));                       \
  }                                                                                     \
  KILN_DEVICE T kiln_isub(T a, T b) {                                                   \
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));                       \
  }                                                                                     \
  KILN_DEVICE T kiln_imul(T a, T b) {                                                   \
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));                       \
  }                                                                                     \
  KILN_DEVICE T kiln_ineg(T a) {                                                        \
    return static_cast<T>(static_cast<U>(0) - static_cast<U>(a));                       \
  }                                                                                     \
  KILN_DEVICE T kiln_iabs(T a) {                                                        \
    return a < 0 ? kiln_ineg(a) : a;                                                    \
  }                                                                                     \
  KILN_DEVICE T kiln_imax(T a, T b) {                                                   \
    return a > b ? a : b;                                                               \
  }                                                                                     \
  KILN_DEVICE T kiln_imin(T a, T b) {                                                   \
    return a < b ? a : b;                                                               \
  }                                                                                     \
  KILN_DEVICE T kiln_idiv(T a, T b) {                                                   \
    return b == 0 ? static_cast<T>(0) : b == static_cast<T>(-1) ? kiln_ineg(a) : a / b; \
  }                                                                                     \
  KILN_DEVICE T kiln_ifmod(T a, T b) {                                                  \
    return b == 0 || b == static_cast<T>(-1) ? static_cast<T>(0) : a % b;               \
  }                                                                                     \
  KILN_DEVICE T kiln_imod(T a, T b) {                                                   \
    T r = kiln_ifmod(a, b);                                                             \
    return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;                                  \
  }
KILN_DEFINE_INT_MATH(int, unsigned int)
KILN_DEFINE_INT_MATH(long long, unsigned long long)
#undef KILN_DEFINE_INT_MATH
// Float Mod with fmod = 0: the divisor's sign.
KILN_DEVICE float kiln_fmod_py(float a, float b) {
  float r = fmodf(a, b);
  return r != 0.0f && ((r < 0.0f) != (b < 0.0f)) ? r + b : r;
}

// ---------------------------------------------------------------- 16-byte vectors
// kiln_ldv(p, v): 16 bytes at p (16-byte aligned) into kiln_vec<T>::N floats; kiln_stv stores.
template <class T>
struct kiln_vec;
template <>
struct kiln_vec<float> {
  static constexpr int N = 4;
};
template <>
struct kiln_vec<kiln_f16> {
  static constexpr int N = 8;
};
template <>
struct kiln_vec<kiln_bf16> {
  static constexpr int N = 8;
};

// The 16-byte global loads differ only in their instruction.
#define KILN_DEFINE_LD16(name, instr)                         \
  KILN_DEVICE uint4 name(const void* p) {                     \
    uint4 r;                                                  \
    asm volatile(instr " {%0, %1, %2, %3}, [%4];"             \
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) \
                 : "l"(p));                                   \
    return r;                                                 \
  }
KILN_DEFINE_LD16(kiln_ld16, "ld.global.nc.v4.u32")
KILN_DEVICE void kiln_st16(void* p, uint4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}

KILN_DEVICE void kiln_unpack(unsigned int w, const kiln_f16*, float* v) {
  v[0] = kiln_f16_to_f32(static_cast<unsigned short>(w & 0xffffu));
  v[1] = kiln_f16_to_f32(static_cast<unsigned short>(w >> 16));
}
KILN_DEVICE void kiln_unpack(unsigned int w, const kiln_bf16*, float* v) {
  v[0] = __uint_as_float(w << 16);
  v[1] = __uint_as_float(w & 0xffff0000u);
}

// One 16-byte vector (as loaded) to kiln_vec<T>::N floats; the pointer only selects the type.
KILN_DEVICE void kiln_unpack16(uint4 r, const float*, float* v) {
  v[0] = __uint_as_float(r.x);
  v[1] = __uint_as_float(r.y);
  v[2] = __uint_as_float(r.z);
  v[3] = __uint_as_float(r.w);
}
template <class T>
KILN_DEVICE void kiln_unpack16(uint4 r, const T* tag, float* v) {
  kiln_unpack(r.x, tag, v + 0);
  kiln_unpack(r.y, tag, v + 2);
  kiln_unpack(r.z, tag, v + 4);
  kiln_unpack(r.w, tag, v + 6);
}
// 16-byte loads of parameters reused across rows (the read-only path).
template <class T>
KILN_DEVICE void kiln_ldv(const T* p, float* v) {
  kiln_unpack16(kiln_ld16(p), p, v);
}
// kiln_vec<T>::N floats as one 16-byte vector of T (the pointer only selects the type).
KILN_DEVICE uint4 kiln_pack16(const float* v, const float*) {
  return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]),
                    __float_as_uint(v[3]));
}
KILN_DEVICE uint4 kiln_pack16(const float* v, const kiln_f16*) {
  return make_uint4(kiln_pack_f16x2(v[0], v[1]), kiln_pack_f16x2(v[2], v[3]),
                    kiln_pack_f16x2(v[4], v[5]), kiln_pack_f16x2(v[6], v[7]));
}
KILN_DEVICE uint4 kiln_pack16(const float* v, const kiln_bf16*) {
  return make_uint4(kiln_pack_bf16x2(v[0], v[1]), kiln_pack_bf16x2(v[2], v[3]),
                    kiln_pack_bf16x2(v[4], v[5]), kiln_pack_bf16x2(v[6], v[7]));
}
template <class T>
KILN_DEVICE void kiln_stv(T* p, const float* v) {
  kiln_st16(p, kiln_pack16(v, p));
}
// Half a vector: kiln_vec<T>::N / 2 floats as 8 bytes of T at p (8-byte aligned).
KILN_DEVICE void kiln_st8(void* p, unsigned int a, unsigned int b) {
  asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(a), "r"(b) : "memory");
}
KILN_DEVICE void kiln_stv_half(float* p, const float* v) {
  kiln_st8(p, __float_as_uint(v[0]), __float_as_uint(v[1]));
}
KILN_DEVICE void kiln_stv_half(kiln_f16* p, const float* v) {
  kiln_st8(p, kiln_pack_f16x2(v[0], v[1]), kiln_pack_f16x2(v[2], v[3]));
}
KILN_DEVICE void kiln_stv_half(kiln_bf16* p, const float* v) {
  kiln_st8(p, kiln_pack_bf16x2(v[0], v[1]), kiln_pack_bf16x2(v[2], v[3]));
}

// Coherent (not .nc) loads for single-use row/element data: under the anchors' timing (L2 left
// dirty by the flush) plain ld.global / st.global stream faster than the non-coherent and
// streaming forms (docs/PERFORMANCE.md).
KILN_DEFINE_LD16(kiln_ld16_plain, "ld.global.v4.u32")
template <class T>
KILN_DEVICE void kiln_ldv_plain(const T* p, float* v) {
  kiln_unpack16(kiln_ld16_plain(p), p, v);
}

// ---------------------------------------------------------------- reductions
// Warp reductions over aligned groups of W lanes (a power of two; a whole warp by default).
template <int W = 32>
KILN_DEVICE float kiln_warp_sum(float v) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <int W = 32>
KILN_DEVICE float kiln_warp_max(float v) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <int W = 32>
KILN_DEVICE float kiln_warp_min(float v) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide reductions for blocks of THREADS threads (a multiple of 32, at most 1024). `red`
// is shared scratch of at least 33 floats; every thread gets the result. Safe to call back to
// back (the scratch is re-synchronized on entry).
template <int THREADS>
KILN_DEVICE float kiln_block_sum(float v, float* red) {
  v = kiln_warp_sum(v);
  if (THREADS == 32) return v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < THREADS / 32 ? red[lane] : 0.0f;
  return kiln_warp_sum(v);
}
// The same without the entry barrier (one __syncthreads instead of two): `red` must be scratch
// (>= 32 floats) that no earlier reduction of this kernel used.
template <int THREADS>
KILN_DEVICE float kiln_block_sum_once(float v, float* red) {
  v = kiln_warp_sum(v);
  if (THREADS == 32) return v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < THREADS / 32 ? red[lane] : 0.0f;
  return kiln_warp_sum(v);
}
template <int THREADS>
KILN_DEVICE float kiln_block_max_once(float v, float* red) {
  v = kiln_warp_max(v);
  if (THREADS == 32) return v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < THREADS / 32 ? red[lane] : -KILN_INF;
  return kiln_warp_max(v);
}
template <int THREADS>
KILN_DEVICE float kiln_block_max(float v, float* red) {
  v = kiln_warp_max(v);
  if (THREADS == 32) return v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < THREADS / 32 ? red[lane] : -KILN_INF;
  return kiln_warp_max(v);
}
template <int THREADS>
KILN_DEVICE float kiln_block_min(float v, float* red) {
  v = kiln_warp_min(v);
  if (THREADS == 32) return v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < THREADS / 32 ? red[lane] : KILN_INF;
  return kiln_warp_min(v);
}

KILN_DEVICE float kiln_warp_prod(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v *= __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <int THREADS>
KILN_DEVICE float kiln_block_prod(float v, float* red) {
  v = kiln_warp_prod(v);
  if (THREADS == 32) return v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < THREADS / 32 ? red[lane] : 1.0f;
  return kiln_warp_prod(v);
}

// Prefix sums of v over the block's THREADS threads (a multiple of 32, at most 1024) in thread
// order: returns the inclusive one, `excl` gets the exclusive one (a sum of the earlier values
// only, not the inclusive one minus v) and `total` the block's sum. `red` is shared scratch of at
// least 32 floats; safe to call back to back.
template <int THREADS>
KILN_DEVICE float kiln_block_scan(float v, float& excl, float& total, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float s = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float t = __shfl_up_sync(0xffffffffu, s, o);
    if (lane >= o) s += t;
  }
  float e = __shfl_up_sync(0xffffffffu, s, 1);
  if (lane == 0) e = 0.0f;
  if (THREADS == 32) {
    excl = e;
    total = __shfl_sync(0xffffffffu, s, 31);
    return s;
  }
  __syncthreads();
  if (lane == 31) red[warp] = s;
  __syncthreads();
  if (warp == 0) {
    float w = lane < THREADS / 32 ? red[lane] : 0.0f;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float t = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += t;
    }
    if (lane < THREADS / 32) red[lane] = w;  // inclusive prefix of the warp sums
  }
  __syncthreads();
  const float before = warp > 0 ? red[warp - 1] : 0.0f;
  total = red[THREADS / 32 - 1];
  excl = before + e;
  return before + s;
}

// Welford running statistics (count, mean, M2) and their merge (Chan et al.).
struct kiln_welford {
  float n, mean, m2;
};
KILN_DEVICE kiln_welford kiln_welford_init() {
  kiln_welford w;
  w.n = 0.0f;
  w.mean = 0.0f;
  w.m2 = 0.0f;
  return w;
}
KILN_DEVICE void kiln_welford_add(kiln_welford& w, float x) {
  w.n += 1.0f;
  float d = x - w.mean;
  w.mean += d / w.n;
  w.m2 += d * (x - w.mean);
}
KILN_DEVICE kiln_welford kiln_welford_merge(kiln_welford a, kiln_welford b) {
  if (b.n == 0.0f) return a;
  if (a.n == 0.0f) return b;
  kiln_welford r;
  r.n = a.n + b.n;
  float d = b.mean - a.mean, fb = b.n / r.n;
  r.mean = a.mean + d * fb;
  r.m2 = a.m2 + b.m2 + d * d * a.n * fb;
  return r;
}
template <int W = 32>
KILN_DEVICE kiln_welford kiln_warp_welford(kiln_welford w) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) {
    kiln_welford b;
    b.n = __shfl_xor_sync(0xffffffffu, w.n, o);
    b.mean = __shfl_xor_sync(0xffffffffu, w.mean, o);
    b.m2 = __shfl_xor_sync(0xffffffffu, w.m2, o);
    w = kiln_welford_merge(w, b);
  }
  return w;
}

// Block-wide Welford merge (one barrier): `red` is 96 floats of scratch no earlier reduction of
// this kernel used; every thread gets the row's (n, mean, m2).
template <int THREADS>
KILN_DEVICE kiln_welford kiln_block_welford_once(kiln_welford w, float* red) {
  w = kiln_warp_welford(w);
  if (THREADS == 32) return w;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    red[warp] = w.n;
    red[32 + warp] = w.mean;
    red[64 + warp] = w.m2;
  }
  __syncthreads();
  if (lane < THREADS / 32) {
    w.n = red[lane];
    w.mean = red[32 + lane];
    w.m2 = red[64 + lane];
  } else {
    w = kiln_welford_init();
  }
  return kiln_warp_welford(w);
}

// The same when every thread holds `n` elements (a row covered exactly): equal-count merges
// (mean = average, M2 += d^2 n / 2) are symmetric, so every lane gets bit-identical statistics,
// with no division or branch. THREADS: a power of two (below 32: aligned groups of THREADS lanes,
// a row each); `red`: 64 floats of unused scratch.
template <int THREADS>
KILN_DEVICE void kiln_block_welford_equal(float& mean, float& m2, float n, float* red) {
#pragma unroll
  for (int o = 1; o < (THREADS < 32 ? THREADS : 32); o <<= 1) {
    const float mb = __shfl_xor_sync(0xffffffffu, mean, o);
    const float m2b = __shfl_xor_sync(0xffffffffu, m2, o);
    const float d = mb - mean;
    m2 = m2 + m2b + d * d * (0.5f * n);
    mean = 0.5f * (mean + mb);
    n *= 2.0f;
  }
  if (THREADS <= 32) return;
  constexpr int W = THREADS > 32 ? THREADS / 32 : 1;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    red[warp] = mean;
    red[32 + warp] = m2;
  }
  __syncthreads();
  mean = red[lane & (W - 1)];
  m2 = red[32 + (lane & (W - 1))];
#pragma unroll
  for (int o = 1; o < W; o <<= 1) {
    const float mb = __shfl_xor_sync(0xffffffffu, mean, o);
    const float m2b = __shfl_xor_sync(0xffffffffu, m2, o);
    const float d = mb - mean;
    m2 = m2 + m2b + d * d * (0.5f * n);
    mean = 0.5f * (mean + mb);
    n *= 2.0f;
  }
}

// Online softmax statistics: (max m, sum s of exp(x - m)); merge rescales to the larger max.
// A part with m == -inf (no valid element) contributes nothing.
struct kiln_maxsum {
  float m, s;
};
KILN_DEVICE kiln_maxsum kiln_maxsum_merge(kiln_maxsum a, kiln_maxsum b) {
  if (b.m == -KILN_INF) return a;
  if (a.m == -KILN_INF) return b;
  kiln_maxsum r;
  r.m = fmaxf(a.m, b.m);
  r.s = a.s * expf(a.m - r.m) + b.s * expf(b.m - r.m);
  return r;
}
template <int W = 32>
KILN_DEVICE kiln_maxsum kiln_warp_maxsum(kiln_maxsum w) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) {
    kiln_maxsum b;
    b.m = __shfl_xor_sync(0xffffffffu, w.m, o);
    b.s = __shfl_xor_sync(0xffffffffu, w.s, o);
    w = kiln_maxsum_merge(w, b);
  }
  return w;
}
// One barrier; `red` is 64 floats of scratch no earlier reduction of this kernel used.
template <int THREADS>
KILN_DEVICE kiln_maxsum kiln_block_maxsum_once(kiln_maxsum w, float* red) {
  w = kiln_warp_maxsum(w);
  if (THREADS == 32) return w;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    red[warp] = w.m;
    red[32 + warp] = w.s;
  }
  __syncthreads();
  if (lane < THREADS / 32) {
    w.m = red[lane];
    w.s = red[32 + lane];
  } else {
    w.m = -KILN_INF;
    w.s = 0.0f;
  }
  return kiln_warp_maxsum(w);
}

// ---------------------------------------------------------------- math (the op table calls these)
KILN_DEVICE float kiln_sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}
KILN_DEVICE float kiln_silu(float x) {
  return x / (1.0f + expf(-x));
}
KILN_DEVICE float kiln_gelu_erf(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
}
// 0.5 x (1 + tanh(u)) == x * sigmoid(2u): one expf and a division instead of tanhf, no
// cancellation for negative x.
KILN_DEVICE float kiln_gelu_tanh(float x) {
  const float k2 = 1.5957691216057308f;  // 2 sqrt(2/pi)
  return x / (1.0f + expf(-k2 * (x + 0.044715f * x * x * x)));
}

// ---------------------------------------------------------------- fast math for 16-bit outputs
// Used (pointwise_node_expr) only where the value is stored as f16/bf16: relative error ~1e-6
// (ex2/rcp.approx: 2 ulp; erfc: < 1.2e-7 plus the argument's rounding), far below a 16-bit ulp,
// at a fraction of the instructions of the IEEE-exact expf / division / erff / tanhf.
KILN_DEVICE float kiln_ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
KILN_DEVICE float kiln_rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
KILN_DEVICE float kiln_exp_fast(float x) {
  return kiln_ex2_approx(x * 1.4426950408889634f);
}
KILN_DEVICE float kiln_sigmoid_fast(float x) {
  return kiln_rcp_approx(1.0f + kiln_exp_fast(-x));
}
KILN_DEVICE float kiln_silu_fast(float x) {
  return x * kiln_sigmoid_fast(x);
}
KILN_DEVICE float kiln_gelu_tanh_fast(float x) {
  const float k2 = 1.5957691216057308f;  // 2 sqrt(2/pi)
  return x * kiln_sigmoid_fast(k2 * (x + 0.044715f * x * x * x));
}
// x * Phi(x) with Phi(-|x|) = erfc(z) / 2, z = |x| / sqrt 2, erfc(z) = t exp(-z^2 + P(t)),
// t = 1 / (1 + z / 2) (the Numerical Recipes erfcc form, refitted minimax at degree 5; log2(e),
// the 1/2 and 1/sqrt 2 folded into the constants): relative error < 2e-5 for every x until the
// result underflows (checked in f32 emulation against erfc in f64), so the negative tail keeps its
// relative accuracy. 5 FMA + 2 MUFU + ~6 instructions instead of erff's ~25.
KILN_DEVICE float kiln_gelu_erf_fast(float x) {
  const float t = kiln_rcp_approx(fmaf(fabsf(x), 0.353553391f, 1.0f));
  float p = fmaf(t, 0.330074996f, -1.02314603f);
  p = fmaf(t, p, 0.684546947f);
  p = fmaf(t, p, 0.36708653f);
  p = fmaf(t, p, 1.46868193f);
  p = fmaf(t, p, -2.82723331f);
  const float xh = x * (t * kiln_ex2_approx(fmaf(x * x, -0.72134752f, p)));  // x Phi(-|x|)
  return x >= 0.0f ? x - xh : xh;
}
KILN_DEVICE float kiln_softplus(float x) {
  return x > 20.0f ? x : log1pf(expf(x));
}
// x * tanh(softplus(x)) with one exp: tanh(log(1 + e)) = n / (n + 2), n = e (e + 2), which
// neither cancels for x << 0 (n ~ 2e) nor overflows before x = 20, past which it is 1 in f32.
KILN_DEVICE float kiln_mish(float x) {
  if (x > 20.0f) return x;
  const float e = expf(x);
  const float n = e * (e + 2.0f);
  return x * (n / (n + 2.0f));
}
