// ---- pointwise_f16_add_gelu grid=((((((N*64)*7)*7)+2047)/2048)) block=256 args=4

// group 0: pointwise_f16_add_gelu
extern "C" __global__ void __launch_bounds__(256) pointwise_f16_add_gelu(const kiln_f16* __restrict__ t0, const kiln_f16* __restrict__ t1, kiln_f16* __restrict__ t3, long long d0) {
  const long long n = d0;
  const long long base = (static_cast<long long>(blockIdx.x) * 256 + threadIdx.x) * 8;
  if (base >= n) return;
  if (base + 8 <= n) {
    float a0[8];
    kiln_ldv(t0 + base, a0);
    // lane 0
    const float l1_1_0 = kiln_ld(t1 + ((base + 0) % 64));
    const float v2_0 = (a0[0] + l1_1_0);  // bias
    const float v3_0 = kiln_gelu_erf(v2_0);  // gelu
    // lane 1
    const float l1_1_1 = kiln_ld(t1 + ((base + 1) % 64));
    const float v2_1 = (a0[1] + l1_1_1);  // bias
    const float v3_1 = kiln_gelu_erf(v2_1);  // gelu
    // lane 2
    const float l1_1_2 = kiln_ld(t1 + ((base + 2) % 64));
    const float v2_2 = (a0[2] + l1_1_2);  // bias
    const float v3_2 = kiln_gelu_erf(v2_2);  // gelu
    // lane 3
    const float l1_1_3 = kiln_ld(t1 + ((base + 3) % 64));
    const float v2_3 = (a0[3] + l1_1_3);  // bias
    const float v3_3 = kiln_gelu_erf(v2_3);  // gelu
    // lane 4
    const float l1_1_4 = kiln_ld(t1 + ((base + 4) % 64));
    const float v2_4 = (a0[4] + l1_1_4);  // bias
    const float v3_4 = kiln_gelu_erf(v2_4);  // gelu
    // lane 5
    const float l1_1_5 = kiln_ld(t1 + ((base + 5) % 64));
    const float v2_5 = (a0[5] + l1_1_5);  // bias
    const float v3_5 = kiln_gelu_erf(v2_5);  // gelu
    // lane 6
    const float l1_1_6 = kiln_ld(t1 + ((base + 6) % 64));
    const float v2_6 = (a0[6] + l1_1_6);  // bias
    const float v3_6 = kiln_gelu_erf(v2_6);  // gelu
    // lane 7
    const float l1_1_7 = kiln_ld(t1 + ((base + 7) % 64));
    const float v2_7 = (a0[7] + l1_1_7);  // bias
    const float v3_7 = kiln_gelu_erf(v2_7);  // gelu
    const float o3[8] = {v3_0, v3_1, v3_2, v3_3, v3_4, v3_5, v3_6, v3_7};
    kiln_stv(t3 + base, o3);
    return;
  }
  for (int j = 0; j < 8; ++j) {
    const long long i = base + j;
    if (i >= n) break;
    const float l0_0 = kiln_ld(t0 + i);
    const float l1_1 = kiln_ld(t1 + (i % 64));
    const float v2 = (l0_0 + l1_1);  // bias
    const float v3 = kiln_gelu_erf(v2);  // gelu
    kiln_st(t3 + i, v3);
  }
}
// ---- rownorm_bf16_r96_add_layernorm_gelu grid=(((N+3)/4)) block=128 args=3

// group 1: layernorm over bf16[N, 96] (rows of 96)
extern "C" __global__ void __launch_bounds__(128) rownorm_bf16_r96_add_layernorm_gelu(const kiln_bf16* __restrict__ t4, kiln_bf16* __restrict__ t7, long long d0) {
  const long long row = static_cast<long long>(blockIdx.x) * 4 + (threadIdx.x >> 5);
  if (row >= d0) return;
  const int tid = threadIdx.x & 31;
  float mean = 0.0f, rstd = 1.0f, inv_sum = 1.0f, row_max = 0.0f;
  (void)mean; (void)rstd; (void)inv_sum; (void)row_max;
  float x[1][8];
  #pragma unroll
  for (int k = 0; k < 1; ++k) {
    const int q = k * 32 + tid;
    if (q < 12) {
      float a4[8];
      kiln_ldv(t4 + row * 96 + q * 8, a4);
      #pragma unroll
      for (int l = 0; l < 8; ++l) {
        const int j = q * 8 + l;
        const float v5 = (a4[l] + a4[l]);  // twice
        x[k][l] = v5;
      }
    } else {
      #pragma unroll
      for (int l = 0; l < 8; ++l) x[k][l] = 0.0f;
    }
  }
  {
    float acc = 0.0f;
    #pragma unroll
    for (int k = 0; k < 1; ++k) {
      const bool valid = k * 32 + tid < 12;
      (void)valid;
      #pragma unroll
      for (int l = 0; l < 8; ++l) acc += x[k][l];
    }
    mean = kiln_warp_sum(acc) / 96.0f;
    acc = 0.0f;
    #pragma unroll
    for (int k = 0; k < 1; ++k) {
      const bool valid = k * 32 + tid < 12;
      (void)valid;
      #pragma unroll
      for (int l = 0; l < 8; ++l) { const float d = x[k][l] - mean; if (valid) acc += d * d; }
    }
    rstd = rsqrtf(kiln_warp_sum(acc) / 96.0f + 1e-05f);
  }
  #pragma unroll
  for (int k = 0; k < 1; ++k) {
    const int q = k * 32 + tid;
    if (q >= 12) break;
    float o7[8];
    #pragma unroll
    for (int l = 0; l < 8; ++l) {
      const int j = q * 8 + l;
      const float y = (x[k][l] - mean) * rstd;
      const float v7 = kiln_gelu_erf(y);  // g2
      o7[l] = v7;
    }
    kiln_stv(t7 + row * 96 + q * 8, o7);
  }
}
