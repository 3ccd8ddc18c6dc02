// ---- pointwise_f16_add_gelu grid=((((((N*64)*7)*7)+8191)/8192)) block=256 args=4

// group: pointwise_f16_add_gelu
extern "C" __global__ void __launch_bounds__(256) pointwise_f16_add_gelu(const kiln_f16* __restrict__ t_0, const kiln_f16* __restrict__ t_1, kiln_f16* __restrict__ t_2, long long d0) {
  const long long n = d0;
  (void)n;
  const long long blk = static_cast<long long>(blockIdx.x) * 8192;
  if (blk + 8192 <= n) {
    const long long base0 = blk + 0 + threadIdx.x * 8;
    const long long base1 = blk + 2048 + threadIdx.x * 8;
    const long long base2 = blk + 4096 + threadIdx.x * 8;
    const long long base3 = blk + 6144 + threadIdx.x * 8;
    float a_0_0[8];
    kiln_ldv_stream(t_0 + base0, a_0_0);
    float b0_0[8];
    kiln_ldv(t_1 + (base0 % 64), b0_0);
    float a_0_1[8];
    kiln_ldv_stream(t_0 + base1, a_0_1);
    float b0_1[8];
    kiln_ldv(t_1 + (base1 % 64), b0_1);
    float a_0_2[8];
    kiln_ldv_stream(t_0 + base2, a_0_2);
    float b0_2[8];
    kiln_ldv(t_1 + (base2 % 64), b0_2);
    float a_0_3[8];
    kiln_ldv_stream(t_0 + base3, a_0_3);
    float b0_3[8];
    kiln_ldv(t_1 + (base3 % 64), b0_3);
    // vector 0 lane 0
    const float v_3_0_0 = (a_0_0[0] + b0_0[0]);  // bias
    const float v_2_0_0 = kiln_gelu_erf_fast(v_3_0_0);  // gelu
    // vector 0 lane 1
    const float v_3_0_1 = (a_0_0[1] + b0_0[1]);  // bias
    const float v_2_0_1 = kiln_gelu_erf_fast(v_3_0_1);  // gelu
    // vector 0 lane 2
    const float v_3_0_2 = (a_0_0[2] + b0_0[2]);  // bias
    const float v_2_0_2 = kiln_gelu_erf_fast(v_3_0_2);  // gelu
    // vector 0 lane 3
    const float v_3_0_3 = (a_0_0[3] + b0_0[3]);  // bias
    const float v_2_0_3 = kiln_gelu_erf_fast(v_3_0_3);  // gelu
    // vector 0 lane 4
    const float v_3_0_4 = (a_0_0[4] + b0_0[4]);  // bias
    const float v_2_0_4 = kiln_gelu_erf_fast(v_3_0_4);  // gelu
    // vector 0 lane 5
    const float v_3_0_5 = (a_0_0[5] + b0_0[5]);  // bias
    const float v_2_0_5 = kiln_gelu_erf_fast(v_3_0_5);  // gelu
    // vector 0 lane 6
    const float v_3_0_6 = (a_0_0[6] + b0_0[6]);  // bias
    const float v_2_0_6 = kiln_gelu_erf_fast(v_3_0_6);  // gelu
    // vector 0 lane 7
    const float v_3_0_7 = (a_0_0[7] + b0_0[7]);  // bias
    const float v_2_0_7 = kiln_gelu_erf_fast(v_3_0_7);  // gelu
    const float o_2_0[8] = {v_2_0_0, v_2_0_1, v_2_0_2, v_2_0_3, v_2_0_4, v_2_0_5, v_2_0_6, v_2_0_7};
    kiln_stv_stream(t_2 + base0, o_2_0);
    // vector 1 lane 0
    const float v_3_1_0 = (a_0_1[0] + b0_1[0]);  // bias
    const float v_2_1_0 = kiln_gelu_erf_fast(v_3_1_0);  // gelu
    // vector 1 lane 1
    const float v_3_1_1 = (a_0_1[1] + b0_1[1]);  // bias
    const float v_2_1_1 = kiln_gelu_erf_fast(v_3_1_1);  // gelu
    // vector 1 lane 2
    const float v_3_1_2 = (a_0_1[2] + b0_1[2]);  // bias
    const float v_2_1_2 = kiln_gelu_erf_fast(v_3_1_2);  // gelu
    // vector 1 lane 3
    const float v_3_1_3 = (a_0_1[3] + b0_1[3]);  // bias
    const float v_2_1_3 = kiln_gelu_erf_fast(v_3_1_3);  // gelu
    // vector 1 lane 4
    const float v_3_1_4 = (a_0_1[4] + b0_1[4]);  // bias
    const float v_2_1_4 = kiln_gelu_erf_fast(v_3_1_4);  // gelu
    // vector 1 lane 5
    const float v_3_1_5 = (a_0_1[5] + b0_1[5]);  // bias
    const float v_2_1_5 = kiln_gelu_erf_fast(v_3_1_5);  // gelu
    // vector 1 lane 6
    const float v_3_1_6 = (a_0_1[6] + b0_1[6]);  // bias
    const float v_2_1_6 = kiln_gelu_erf_fast(v_3_1_6);  // gelu
    // vector 1 lane 7
    const float v_3_1_7 = (a_0_1[7] + b0_1[7]);  // bias
    const float v_2_1_7 = kiln_gelu_erf_fast(v_3_1_7);  // gelu
    const float o_2_1[8] = {v_2_1_0, v_2_1_1, v_2_1_2, v_2_1_3, v_2_1_4, v_2_1_5, v_2_1_6, v_2_1_7};
    kiln_stv_stream(t_2 + base1, o_2_1);
    // vector 2 lane 0
    const float v_3_2_0 = (a_0_2[0] + b0_2[0]);  // bias
    const float v_2_2_0 = kiln_gelu_erf_fast(v_3_2_0);  // gelu
    // vector 2 lane 1
    const float v_3_2_1 = (a_0_2[1] + b0_2[1]);  // bias
    const float v_2_2_1 = kiln_gelu_erf_fast(v_3_2_1);  // gelu
    // vector 2 lane 2
    const float v_3_2_2 = (a_0_2[2] + b0_2[2]);  // bias
    const float v_2_2_2 = kiln_gelu_erf_fast(v_3_2_2);  // gelu
    // vector 2 lane 3
    const float v_3_2_3 = (a_0_2[3] + b0_2[3]);  // bias
    const float v_2_2_3 = kiln_gelu_erf_fast(v_3_2_3);  // gelu
    // vector 2 lane 4
    const float v_3_2_4 = (a_0_2[4] + b0_2[4]);  // bias
    const float v_2_2_4 = kiln_gelu_erf_fast(v_3_2_4);  // gelu
    // vector 2 lane 5
    const float v_3_2_5 = (a_0_2[5] + b0_2[5]);  // bias
    const float v_2_2_5 = kiln_gelu_erf_fast(v_3_2_5);  // gelu
    // vector 2 lane 6
    const float v_3_2_6 = (a_0_2[6] + b0_2[6]);  // bias
    const float v_2_2_6 = kiln_gelu_erf_fast(v_3_2_6);  // gelu
    // vector 2 lane 7
    const float v_3_2_7 = (a_0_2[7] + b0_2[7]);  // bias
    const float v_2_2_7 = kiln_gelu_erf_fast(v_3_2_7);  // gelu
    const float o_2_2[8] = {v_2_2_0, v_2_2_1, v_2_2_2, v_2_2_3, v_2_2_4, v_2_2_5, v_2_2_6, v_2_2_7};
    kiln_stv_stream(t_2 + base2, o_2_2);
    // vector 3 lane 0
    const float v_3_3_0 = (a_0_3[0] + b0_3[0]);  // bias
    const float v_2_3_0 = kiln_gelu_erf_fast(v_3_3_0);  // gelu
    // vector 3 lane 1
    const float v_3_3_1 = (a_0_3[1] + b0_3[1]);  // bias
    const float v_2_3_1 = kiln_gelu_erf_fast(v_3_3_1);  // gelu
    // vector 3 lane 2
    const float v_3_3_2 = (a_0_3[2] + b0_3[2]);  // bias
    const float v_2_3_2 = kiln_gelu_erf_fast(v_3_3_2);  // gelu
    // vector 3 lane 3
    const float v_3_3_3 = (a_0_3[3] + b0_3[3]);  // bias
    const float v_2_3_3 = kiln_gelu_erf_fast(v_3_3_3);  // gelu
    // vector 3 lane 4
    const float v_3_3_4 = (a_0_3[4] + b0_3[4]);  // bias
    const float v_2_3_4 = kiln_gelu_erf_fast(v_3_3_4);  // gelu
    // vector 3 lane 5
    const float v_3_3_5 = (a_0_3[5] + b0_3[5]);  // bias
    const float v_2_3_5 = kiln_gelu_erf_fast(v_3_3_5);  // gelu
    // vector 3 lane 6
    const float v_3_3_6 = (a_0_3[6] + b0_3[6]);  // bias
    const float v_2_3_6 = kiln_gelu_erf_fast(v_3_3_6);  // gelu
    // vector 3 lane 7
    const float v_3_3_7 = (a_0_3[7] + b0_3[7]);  // bias
    const float v_2_3_7 = kiln_gelu_erf_fast(v_3_3_7);  // gelu
    const float o_2_3[8] = {v_2_3_0, v_2_3_1, v_2_3_2, v_2_3_3, v_2_3_4, v_2_3_5, v_2_3_6, v_2_3_7};
    kiln_stv_stream(t_2 + base3, o_2_3);
    return;
  }
  for (int u = 0; u < 4; ++u) {
    const long long base = blk + u * 2048 + threadIdx.x * 8;
    for (int j = 0; j < 8; ++j) {
      const long long i = base + j;
      if (i >= n) break;
      const float l0_0 = kiln_ld(t_0 + i);
      const float l1_1 = kiln_ld(t_1 + (i % 64));
      const float v_3 = (l0_0 + l1_1);  // bias
      const float v_2 = kiln_gelu_erf_fast(v_3);  // gelu
      kiln_st(t_2 + i, v_2);
    }
  }
}
// ---- rownorm_bf16_r96_add_layernorm_gelu grid=(((N+3)/4)) block=128 args=3

// group: layernorm over bf16[N, 96] (rows of 96)
extern "C" __global__ void __launch_bounds__(128) rownorm_bf16_r96_add_layernorm_gelu(const kiln_bf16* __restrict__ t_0, kiln_bf16* __restrict__ t_1, long long d0) {
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
      float a_0[8];
      kiln_ldv_stream(t_0 + row * 96 + q * 8, a_0);
      #pragma unroll
      for (int l = 0; l < 8; ++l) {
        const int j = q * 8 + l;
        const float v_2 = (a_0[l] + a_0[l]);  // twice
        x[k][l] = v_2;
      }
    } else {
      #pragma unroll
      for (int l = 0; l < 8; ++l) x[k][l] = 0.0f;
    }
  }
  {
    float acc = 0.0f, cnt = 0.0f;
    #pragma unroll
    for (int k = 0; k < 1; ++k) {
      const bool valid = k * 32 + tid < 12;
      (void)valid;
      #pragma unroll
      for (int l = 0; l < 8; ++l) if (valid) { acc += x[k][l]; cnt += 1.0f; }
    }
    kiln_welford st;
    st.n = cnt;
    st.mean = cnt > 0.0f ? acc / cnt : 0.0f;
    acc = 0.0f;
    #pragma unroll
    for (int k = 0; k < 1; ++k) {
      const bool valid = k * 32 + tid < 12;
      (void)valid;
      #pragma unroll
      for (int l = 0; l < 8; ++l) { const float d = x[k][l] - st.mean; if (valid) acc += d * d; }
    }
    st.m2 = acc;
    st = kiln_warp_welford(st);
    mean = st.mean;
    rstd = rsqrtf(st.m2 / 96.0f + 1e-05f);
  }
  #pragma unroll
  for (int k = 0; k < 1; ++k) {
    const int q = k * 32 + tid;
    if (q >= 12) break;
    float o_1[8];
    #pragma unroll
    for (int l = 0; l < 8; ++l) {
      const int j = q * 8 + l;
      const float y = (x[k][l] - mean) * rstd;
      const float v_1 = kiln_gelu_erf_fast(y);  // g2
      o_1[l] = v_1;
    }
    kiln_stv_stream(t_1 + row * 96 + q * 8, o_1);
  }
}
