// kiln grouped / depthwise conv helpers (codegen/contraction/grouped.cpp): N consecutive channels
// of one NHWC pixel loaded to f32 in W-element vectors (p aligned to W elements), and N f32
// values stored likewise. Follows contraction_common.cuh (kc_ld_*, kc_st_*).
#pragma once

__device__ __forceinline__ void kg_unpack_f16x2(unsigned w, float* v) {
  v[0] = kc_f16_of_x2(w, 0);
  v[1] = kc_f16_of_x2(w, 1);
}
__device__ __forceinline__ void kg_unpack_bf16x2(unsigned w, float* v) {
  v[0] = kc_bf16_of_x2(w, 0);
  v[1] = kc_bf16_of_x2(w, 1);
}

// 16-bit storage: W of 8 (one 16-byte load), 4, 2 or 1 elements per load.
#define KG_DEFINE_LD16(dt)                                                        \
  template <int N, int W>                                                         \
  __device__ __forceinline__ void kg_ld_##dt(const unsigned short* p, float* v) { \
    _Pragma("unroll") for (int i = 0; i < N; i += W) {                            \
      if (W == 8) {                                                               \
        const uint4 w = *reinterpret_cast<const uint4*>(p + i);                   \
        kg_unpack_##dt##x2(w.x, v + i);                                           \
        kg_unpack_##dt##x2(w.y, v + i + 2);                                       \
        kg_unpack_##dt##x2(w.z, v + i + 4);                                       \
        kg_unpack_##dt##x2(w.w, v + i + 6);                                       \
      } else if (W == 4) {                                                        \
        const uint2 w = *reinterpret_cast<const uint2*>(p + i);                   \
        kg_unpack_##dt##x2(w.x, v + i);                                           \
        kg_unpack_##dt##x2(w.y, v + i + 2);                                       \
      } else if (W == 2) {                                                        \
        kg_unpack_##dt##x2(*reinterpret_cast<const unsigned*>(p + i), v + i);     \
      } else {                                                                    \
        v[i] = kc_ld_##dt(p + i);                                                 \
      }                                                                           \
    }                                                                             \
  }
KG_DEFINE_LD16(f16)
KG_DEFINE_LD16(bf16)
#undef KG_DEFINE_LD16

template <int N, int W>
__device__ __forceinline__ void kg_ld_f32(const float* p, float* v) {
#pragma unroll
  for (int i = 0; i < N; i += W) {
    if (W == 4) {
      const float4 w = *reinterpret_cast<const float4*>(p + i);
      v[i] = w.x;
      v[i + 1] = w.y;
      v[i + 2] = w.z;
      v[i + 3] = w.w;
    } else if (W == 2) {
      const float2 w = *reinterpret_cast<const float2*>(p + i);
      v[i] = w.x;
      v[i + 1] = w.y;
    } else {
      v[i] = p[i];
    }
  }
}

__device__ __forceinline__ unsigned kg_pack_f16(float a, float b) {
  return (unsigned)kc_f32_to_f16(a) | ((unsigned)kc_f32_to_f16(b) << 16);
}
__device__ __forceinline__ unsigned kg_pack_bf16(float a, float b) {
  return (unsigned)kc_f32_to_bf16(a) | ((unsigned)kc_f32_to_bf16(b) << 16);
}

// N values to N consecutive 16-bit elements at p (aligned to N elements; N of 8, 4, 2 or 1).
#define KG_DEFINE_ST16(dt)                                                                         \
  template <int N>                                                                                 \
  __device__ __forceinline__ void kg_st_##dt(unsigned short* p, const float* v) {                  \
    if (N == 8) {                                                                                  \
      *reinterpret_cast<uint4*>(p) =                                                               \
          make_uint4(kg_pack_##dt(v[0], v[1]), kg_pack_##dt(v[2], v[3]), kg_pack_##dt(v[4], v[5]), \
                     kg_pack_##dt(v[6], v[7]));                                                    \
    } else if (N == 4) {                                                                           \
      *reinterpret_cast<uint2*>(p) =                                                               \
          make_uint2(kg_pack_##dt(v[0], v[1]), kg_pack_##dt(v[2], v[3]));                          \
    } else if (N == 2) {                                                                           \
      *reinterpret_cast<unsigned*>(p) = kg_pack_##dt(v[0], v[1]);                                  \
    } else {                                                                                       \
      _Pragma("unroll") for (int i = 0; i < N; ++i) kc_st_##dt(p + i, v[i]);                       \
    }                                                                                              \
  }
KG_DEFINE_ST16(f16)
KG_DEFINE_ST16(bf16)
#undef KG_DEFINE_ST16

template <int N>
__device__ __forceinline__ void kg_st_f32(float* p, const float* v) {
  if (N == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else if (N == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) p[i] = v[i];
  }
}

// Warp MMAs of the tensor-core grouped kernel (grouped_mma.cpp), f32 accumulators: m16n8k16 (a:
// 4 words, b: 2) and m16n8k8 (a: 2 words, b: 1) of f16 / bf16 pairs.
#define KG_DEFINE_MMA(dt)                                                                 \
  __device__ __forceinline__ void kg_mma16_##dt(float* c, const unsigned* a, unsigned b0, \
                                                unsigned b1) {                            \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." #dt "." #dt                     \
                 ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"   \
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                         \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));         \
  }                                                                                       \
  __device__ __forceinline__ void kg_mma8_##dt(float* c, const unsigned* a, unsigned b0,  \
                                               unsigned) {                                \
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32." #dt "." #dt                      \
                 ".f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"               \
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                         \
                 : "r"(a[0]), "r"(a[1]), "r"(b0));                                        \
  }
KG_DEFINE_MMA(f16)
KG_DEFINE_MMA(bf16)
#undef KG_DEFINE_MMA

