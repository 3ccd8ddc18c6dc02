// ---- pointwise_f16_add_gelu grid=((1088*N+2047)/2048+N) block=256 args=4

// group: pointwise_f16_add_gelu
extern "C" __global__ void __launch_bounds__(256) pointwise_f16_add_gelu(const kiln_f16* __restrict__ t_0, const kiln_f16* __restrict__ t_1, kiln_f16* __restrict__ t_2, long long d0) {
  const long long n = d0;
  (void)n;
  const long long blk = static_cast<long long>(blockIdx.x) * 2048;
  if (blk + 2048 <= n) {
    const long long base0 = blk + 0 + threadIdx.x * 8;
    float a_0_0[8];
    kiln_ldv_plain(t_0 + base0, a_0_0);
    float b0_0[8];
    kiln_ldv(t_1 + (base0 % 64), b0_0);
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
    kiln_stv(t_2 + base0, o_2_0);
    return;
  }
  for (int u = 0; u < 1; ++u) {
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
// ---- rownorm_bf16_r96_add_layernorm_gelu grid=((N+31)/32) block=128 args=3

// group: layernorm over bf16[N, 96] (rows of 96)
extern "C" __global__ void __launch_bounds__(128) rownorm_bf16_r96_add_layernorm_gelu(const kiln_bf16* __restrict__ t_0, kiln_bf16* __restrict__ t_1, long long d0) {
  const long long row = static_cast<long long>(blockIdx.x) * 32 + (threadIdx.x >> 2);
  if (row >= d0) return;
  const int tid = threadIdx.x & 3;
  float mean = 0.0f, rstd = 1.0f, inv_sum = 1.0f, row_max = 0.0f;
  (void)mean; (void)rstd; (void)inv_sum; (void)row_max;
  float x[3][8];
  #pragma unroll
  for (int k = 0; k < 3; ++k) {
    const int q = k * 4 + tid;
    if (true) {  // the row is covered exactly
      float a_0[8];
      kiln_ldv_plain(t_0 + row * 96 + q * 8, a_0);
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
    for (int k = 0; k < 3; ++k) {
      const bool valid = true;
      (void)valid;
      #pragma unroll
      for (int l = 0; l < 8; ++l) if (valid) { acc += x[k][l]; cnt += 1.0f; }
    }
    kiln_welford st;
    st.n = cnt;
    st.mean = cnt > 0.0f ? acc / cnt : 0.0f;
    acc = 0.0f;
    #pragma unroll
    for (int k = 0; k < 3; ++k) {
      const bool valid = true;
      (void)valid;
      #pragma unroll
      for (int l = 0; l < 8; ++l) { const float d = x[k][l] - st.mean; if (valid) acc += d * d; }
    }
    st.m2 = acc;
    kiln_block_welford_equal<4>(st.mean, st.m2, 24.0f, nullptr);
    mean = st.mean;
    rstd = rsqrtf(st.m2 / 96.0f + 1e-05f);
  }
  #pragma unroll
  for (int k = 0; k < 3; ++k) {
    const int q = k * 4 + tid;
    float o_1[8];
    #pragma unroll
    for (int l = 0; l < 8; ++l) {
      const int j = q * 8 + l;
      const float y = (x[k][l] - mean) * rstd;
      const float v_1 = kiln_gelu_erf_fast(y);  // g2
      o_1[l] = v_1;
    }
    kiln_stv(t_1 + row * 96 + q * 8, o_1);
  }
}
