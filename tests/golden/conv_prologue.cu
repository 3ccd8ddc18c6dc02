// ---- conv_f16_nhwc_1x1_wg64x64x64_s3_pre_mul_bias_relu grid=((63*N+63)/64, 1) block=128
extern "C" __global__ void __launch_bounds__(128) conv_f16_nhwc_1x1_wg64x64x64_s3_pre_mul_bias_relu(const unsigned short* __restrict__ t_0, const unsigned short* __restrict__ t_1, long long s0, const unsigned short* __restrict__ t_2, const unsigned short* __restrict__ t_3, unsigned short* __restrict__ t_4) {
  extern __shared__ __align__(128) unsigned short kc_smem[];
  const long long kc_mt = blockIdx.x;
  const long long m0 = kc_mt * 64;
  const long long n0 = (long long)blockIdx.y * 64;
  const int tid = threadIdx.x;
  long long a_base[4];
  int a_ih[4], a_iw[4];
  long long a_img[4];
  #pragma unroll
  for (int p = 0; p < 4; ++p) {
    const long long m = m0 + (tid + p * 128) / 8;
    if (m < s0) {
      long long q = m;
      const int ow = (int)(q % 7LL); q /= 7LL;
      const int oh = (int)(q % 9LL); q /= 9LL;
      a_base[p] = q * 2016LL;
      a_img[p] = q;
      a_ih[p] = oh * 1 - 0;
      a_iw[p] = ow * 1 - 0;
    }
    else {
      a_base[p] = 0;
      a_img[p] = 0;
      a_ih[p] = -(1 << 29);
      a_iw[p] = -(1 << 29);
    }
  }
  auto load_a = [&](unsigned short* s, int kt) {
    #pragma unroll
    for (int p = 0; p < 4; ++p) {
      const int id = tid + p * 128;
      const int lm = id / 8, lk = (id % 8) * 8;
      const unsigned dst = kc_smem_u32(s + G::a_off(lm, lk));
      const int k = kt * 64 + lk;
      const int rs = k / 32, cc = k - rs * 32;
      const int r = rs / 1, sx = rs - r * 1;
      const int ih = a_ih[p] + r * 1, iw = a_iw[p] + sx * 1;
      const bool v = k < 32 && ih >= 0 && ih < 9LL && iw >= 0 && iw < 7LL;
      const unsigned short* src = v ? t_0 + a_base[p] + ih * 224LL + iw * 32LL + cc : t_0;
      kc_cp_async16(dst, src, v);
    }
  };
  auto xform_a = [&](unsigned short* s, int kt) {
    const int lk = (tid % 8) * 8;
    const int k = kt * 64 + lk;
    if (k >= 32) return;
    const int rs = k / 32, cc = k - rs * 32;
    const int r = rs / 1, sx = rs - r * 1;
    #pragma unroll
    for (int p = 0; p < 4; ++p) {
      const int lm = (tid + p * 128) / 8;
      const int ih = a_ih[p] + r * 1, iw = a_iw[p] + sx * 1;
      if (!(ih >= 0 && ih < 9LL && iw >= 0 && iw < 7LL)) continue;
      const unsigned addr = kc_smem_u32(s + G::a_off(lm, lk));
      const uint4 xin = kc_ld_shared_v4(addr);
      const long long img = a_img[p];
      const uint4 o_2 = kc_ld_x8(t_2 + img * 32LL + cc);
      float y[8];
      #pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float x = kc_f16_of_x8(xin, j);
        const float v_5 = (x * kc_f16_of_x8(o_2, j));  // mul_5
        y[j] = v_5;
      }
      kc_st_shared_v4(addr, kc_pack_f16(y[0], y[1]), kc_pack_f16(y[2], y[3]), kc_pack_f16(y[4], y[5]), kc_pack_f16(y[6], y[7]));
    }
  };
  auto load_b = [&](unsigned short* s, int kt) {
    #pragma unroll
    for (int p = 0; p < 4; ++p) {
      const int id = threadIdx.x + p * 128;
      const int cr = id / 8, cc = id % 8;
      const int lmn = cr, lk = cc * 8;
      const long long mn = n0 + lmn;
      const int k = kt * 64 + lk;
      const unsigned dst = kc_smem_u32(s + G::b_off(lmn, lk));
      const bool v = mn < 24 && k < 32;
      const unsigned short* src = v ? t_1 + 0 + mn * 32LL + (long long)(k) * 1 : t_1;
      kc_cp_async16(dst, src, v);
    }
  };
  float acc[G::MI][G::NI][4];
  const int ktiles = (int)((32 + 63) / 64);
  const int kt0 = 0, kt1 = ktiles;
  auto mma = [](const unsigned long long (&da)[4], const unsigned long long (&db)[4], float (&c)[1][G::NI][4]) { kc_wgmma4_n64(da, db, c); };
  G::mainloop(G::aligned(kc_smem), load_a, load_b, mma, kt0, kt1, acc, xform_a);
  const int warp = tid >> 5, lane = tid & 31;
  const int wm = warp >> 2, wn = 0, wr = (warp & 3) * 16;
  #pragma unroll
  for (int mi = 0; mi < G::MI; ++mi) {
    #pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int lrow = wm * 64 + wr + mi * 16 + hh * 8 + (lane >> 2);
      const long long row = m0 + lrow;
      if (row >= s0) continue;
      long long q = row;
      const long long ow = q % 7LL; q /= 7LL;
      const long long oh = q % 9LL; q /= 9LL;
      const long long n = q;
      #pragma unroll
      for (int ni = 0; ni < G::NI; ++ni) {
        const int lcol = wn * 64 + ni * 8 + (lane & 3) * 2;
        const long long col0 = n0 + lcol;
        if (col0 >= 24LL) continue;
        const unsigned a_3_0 = kc_ld_x2(t_3 + col0 * 1LL);
        float o_4[2];
        #pragma unroll
        for (int e = 0; e < 2; ++e) {
          const long long col = col0 + e;
          const float acc_v = acc[mi][ni][hh * 2 + e];
          const float v_6 = acc_v + kc_f16_of_x2(a_3_0, e);
          const float v_4 = fmaxf(v_6, 0.0f);
          o_4[e] = v_4;
        }
        *reinterpret_cast<unsigned*>(t_4 + n * 1512LL + col0 * 1LL + oh * 168LL + ow * 24LL) = kc_pack_f16(o_4[0], o_4[1]);
      }
    }
  }
}
// ---- conv_f16_nhwc_1x1_t64x64x32_s4_pre_batchnorm_relu_bias_relu_g4 grid=((30*N+63)/64, 1) block=128
extern "C" __global__ void __launch_bounds__(128) conv_f16_nhwc_1x1_t64x64x32_s4_pre_batchnorm_relu_bias_relu_g4(const unsigned short* __restrict__ t_0, const unsigned short* __restrict__ t_1, long long s0, const unsigned short* __restrict__ t_2, const unsigned short* __restrict__ t_3, const unsigned short* __restrict__ t_4, const unsigned short* __restrict__ t_5, const unsigned short* __restrict__ t_6, unsigned short* __restrict__ t_7) {
  extern __shared__ __align__(128) unsigned short kc_smem[];
  const long long kc_mt = blockIdx.x;
  const long long m0 = kc_mt * 64;
  const long long n0 = (long long)blockIdx.y * 64;
  const int tid = threadIdx.x;
  long long a_base[2];
  int a_ih[2], a_iw[2];
  long long a_img[2];
  #pragma unroll
  for (int p = 0; p < 2; ++p) {
    const long long m = m0 + (tid + p * 128) / 4;
    if (m < s0) {
      long long q = m;
      const int ow = (int)(q % 6LL); q /= 6LL;
      const int oh = (int)(q % 5LL); q /= 5LL;
      a_base[p] = q * 1680LL;
      a_img[p] = q;
      a_ih[p] = oh * 1 - 0;
      a_iw[p] = ow * 1 - 0;
    }
    else {
      a_base[p] = 0;
      a_img[p] = 0;
      a_ih[p] = -(1 << 29);
      a_iw[p] = -(1 << 29);
    }
  }
  auto load_a = [&](unsigned short* s, int kt) {
    #pragma unroll
    for (int p = 0; p < 2; ++p) {
      const int id = tid + p * 128;
      const int lm = id / 4, lk = (id % 4) * 8;
      const unsigned dst = kc_smem_u32(s + G::a_off(lm, lk));
      const int k = kt * 32 + lk;
      const int rs = k / 40, cc = k - rs * 40;
      const int r = rs / 1, sx = rs - r * 1;
      const int ih = a_ih[p] + r * 1, iw = a_iw[p] + sx * 1;
      const bool v = k < 40 && ih >= 0 && ih < 5LL && iw >= 0 && iw < 6LL;
      const unsigned short* src = v ? t_0 + a_base[p] + ih * 336LL + iw * 56LL + cc : t_0;
      kc_cp_async16(dst, src, v);
    }
  };
  auto xform_a = [&](unsigned short* s, int kt) {
    const int lk = (tid % 4) * 8;
    const int k = kt * 32 + lk;
    if (k >= 40) return;
    const int rs = k / 40, cc = k - rs * 40;
    const int r = rs / 1, sx = rs - r * 1;
    const uint4 o_2 = kc_ld_x8(t_2 + cc);
    const uint4 o_3 = kc_ld_x8(t_3 + cc);
    const uint4 o_4 = kc_ld_x8(t_4 + cc);
    const uint4 o_5 = kc_ld_x8(t_5 + cc);
    #pragma unroll
    for (int p = 0; p < 2; ++p) {
      const int lm = (tid + p * 128) / 4;
      const int ih = a_ih[p] + r * 1, iw = a_iw[p] + sx * 1;
      if (!(ih >= 0 && ih < 5LL && iw >= 0 && iw < 6LL)) continue;
      const unsigned addr = kc_smem_u32(s + G::a_off(lm, lk));
      const uint4 xin = kc_ld_shared_v4(addr);
      const long long img = a_img[p];
      float y[8];
      #pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float x = kc_f16_of_x8(xin, j);
        const float v_8 = ((x - kc_f16_of_x8(o_4, j)) * rsqrtf(kc_f16_of_x8(o_5, j) + 1e-05f) * kc_f16_of_x8(o_2, j) + kc_f16_of_x8(o_3, j));  // batchnorm_6
        const float v_9 = fmaxf(v_8, 0.0f);  // relu_7
        y[j] = v_9;
      }
      kc_st_shared_v4(addr, kc_pack_f16(y[0], y[1]), kc_pack_f16(y[2], y[3]), kc_pack_f16(y[4], y[5]), kc_pack_f16(y[6], y[7]));
    }
  };
  auto load_b = [&](unsigned short* s, int kt) {
    #pragma unroll
    for (int p = 0; p < 2; ++p) {
      const int id = threadIdx.x + p * 128;
      const int cr = id / 4, cc = id % 4;
      const int lmn = cr, lk = cc * 8;
      const long long mn = n0 + lmn;
      const int k = kt * 32 + lk;
      const unsigned dst = kc_smem_u32(s + G::b_off(lmn, lk));
      const bool v = mn < 32 && k < 40;
      const unsigned short* src = v ? t_1 + 0 + mn * 40LL + (long long)(k) * 1 : t_1;
      kc_cp_async16(dst, src, v);
    }
  };
  float acc[G::MI][G::NI][4];
  const int ktiles = (int)((40 + 31) / 32);
  const int kt0 = 0, kt1 = ktiles;
  G::mainloop(kc_smem, load_a, load_b, kt0, kt1, acc, xform_a);
  const int warp = tid >> 5, lane = tid & 31;
  const int wm = warp % G::WARPS_M, wn = warp / G::WARPS_M, wr = 0;
  #pragma unroll
  for (int mi = 0; mi < G::MI; ++mi) {
    #pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int lrow = wm * 32 + wr + mi * 16 + hh * 8 + (lane >> 2);
      const long long row = m0 + lrow;
      if (row >= s0) continue;
      long long q = row;
      const long long ow = q % 6LL; q /= 6LL;
      const long long oh = q % 5LL; q /= 5LL;
      const long long n = q;
      #pragma unroll
      for (int ni = 0; ni < G::NI; ++ni) {
        const int lcol = wn * 32 + ni * 8 + (lane & 3) * 2;
        const long long col0 = n0 + lcol;
        if (col0 >= 32LL) continue;
        const unsigned a_6_0 = kc_ld_x2(t_6 + col0 * 1LL);
        float o_7[2];
        #pragma unroll
        for (int e = 0; e < 2; ++e) {
          const long long col = col0 + e;
          const float acc_v = acc[mi][ni][hh * 2 + e];
          const float v_10 = acc_v + kc_f16_of_x2(a_6_0, e);
          const float v_7 = fmaxf(v_10, 0.0f);
          o_7[e] = v_7;
        }
        *reinterpret_cast<unsigned*>(t_7 + n * 960LL + col0 * 1LL + oh * 192LL + ow * 32LL) = kc_pack_f16(o_7[0], o_7[1]);
      }
    }
  }
}
