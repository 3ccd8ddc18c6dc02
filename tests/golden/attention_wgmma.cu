// ---- attention_f16_d64_wg128x128_causal_s300x300 grid=(6*N) block=384 smem=115816 args=8
struct KcScores {
  static constexpr bool CAUSAL = true;
  static constexpr bool WINDOW = false;
  static constexpr bool NATURAL = false;
  int coff, wlo;
  __device__ __forceinline__ float operator()(float s, int row, int key) const {
    return s * 0.180336878f;
  }
};
struct KcAttnMma {
  __device__ static __forceinline__ void s(const unsigned long long (&da)[4], const unsigned long long (&db)[4], float (&acc)[1][16][4]) { kc_wgmma4_n128(da, db, acc); }
  __device__ static __forceinline__ void o(const unsigned (&pa)[4][4], const unsigned long long (&db)[4], float (&acc)[1][8][4]) { kc_wgmma_rs4_n64(pa, db, acc); }
};
typedef KcAttentionWg<64, false, 128, 3, 4, 4, 4, KcScores, KcAttnMma, false> KA;
static_assert(KA::SMEM_BYTES == 115816 && KA::THREADS == 384, "attention layout");
extern "C" __global__ void __launch_bounds__(KA::THREADS, 1) attention_f16_d64_wg128x128_causal_s300x300(const unsigned short* __restrict__ t_0, const __grid_constant__ KcTmaDesc kc_tmap1, const unsigned short* __restrict__ t_1, const __grid_constant__ KcTmaDesc kc_tmap3, const unsigned short* __restrict__ t_2, const __grid_constant__ KcTmaDesc kc_tmap5, unsigned short* __restrict__ t_3, long long s0) {
  extern __shared__ __align__(1024) unsigned short kc_smem[];
  const long long qt = (long long)blockIdx.x % 3LL;
  long long bz = (long long)blockIdx.x / 3LL;
  const long long b1 = bz % 2LL; bz /= 2LL;
  const long long b0 = bz % s0; bz /= s0;
  KcScores sc; sc.coff = 0; sc.wlo = 0;
  const int kc_qb[3] = {(int)b1, (int)b0, 0}, kc_kb[3] = {(int)b1, (int)b0, 0}, kc_vb[3] = {(int)b1, (int)b0, 0};
  KA::run(kc_smem, &kc_tmap1, &kc_tmap3, &kc_tmap5, kc_qb, kc_kb, kc_vb, t_3 + (0 + b1 * 19200LL + b0 * 38400LL), 64LL, (int)300LL, (int)300LL, (int)(qt * 128), sc);
}
// ---- attention_bf16_d128_wg128x128_maskbool_gqa grid=(8*((Sq+127)/128)*N) block=384 smem=164936 args=15
struct KcScores {
  static constexpr bool CAUSAL = false;
  static constexpr bool WINDOW = false;
  static constexpr bool NATURAL = true;
  int coff, wlo;
  const unsigned char* m1; long long m1_rs, m1_ks;
  __device__ __forceinline__ float operator()(float s, int row, int key) const {
    s *= 0.0883789062f;
    s = (m1[(long long)row * m1_rs + (long long)key * m1_ks] != 0) == true ? s : -998244352.0f;
    return s;
  }
};
struct KcAttnMma {
  __device__ static __forceinline__ void s(const unsigned long long (&da)[4], const unsigned long long (&db)[4], float (&acc)[1][16][4]) { kc_wgmma4_n128(da, db, acc); }
  __device__ static __forceinline__ void o(const unsigned (&pa)[4][4], const unsigned long long (&db)[4], float (&acc)[1][16][4]) { kc_wgmma_rs4_n128(pa, db, acc); }
};
typedef KcAttentionWg<128, true, 128, 2, 5, 4, 4, KcScores, KcAttnMma, false> KA;
static_assert(KA::SMEM_BYTES == 164936 && KA::THREADS == 384, "attention layout");
extern "C" __global__ void __launch_bounds__(KA::THREADS, 1) attention_bf16_d128_wg128x128_maskbool_gqa(const unsigned short* __restrict__ t_0, const __grid_constant__ KcTmaDesc kc_tmap1, const unsigned short* __restrict__ t_1, const __grid_constant__ KcTmaDesc kc_tmap3, const unsigned short* __restrict__ t_2, const __grid_constant__ KcTmaDesc kc_tmap5, unsigned short* __restrict__ t_3, long long s0, long long s1, long long s2, long long s3, const unsigned char* __restrict__ t_4, long long s4, long long s5, long long s6) {
  extern __shared__ __align__(1024) unsigned short kc_smem[];
  const long long qt = (long long)blockIdx.x % s2;
  long long bz = (long long)blockIdx.x / s2;
  const long long b2 = bz % 4LL; bz /= 4LL;
  const long long b1 = bz % 2LL; bz /= 2LL;
  const long long b0 = bz % s3; bz /= s3;
  KcScores sc; sc.coff = 0; sc.wlo = 0;
  sc.m1 = t_4 + (0 + b0 * s1); sc.m1_rs = 0LL; sc.m1_ks = 1LL;
  const int kc_qb[3] = {(int)b2, (int)b1, (int)b0}, kc_kb[3] = {(int)b1, (int)b0, 0}, kc_vb[3] = {(int)b1, (int)b0, 0};
  KA::run(kc_smem, &kc_tmap1, &kc_tmap3, &kc_tmap5, kc_qb, kc_kb, kc_vb, t_3 + (0 + b2 * s4 + b1 * s5 + b0 * s6), 128LL, (int)s0, (int)s1, (int)(qt * 128), sc);
}
