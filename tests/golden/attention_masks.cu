// ---- attention_f16_d32_q64_maskadd grid=(2*((S+63)/64)*N) block=128 smem=25600 args=9
struct KcScores {
  static constexpr bool CAUSAL = false;
  static constexpr bool WINDOW = false;
  static constexpr bool NATURAL = true;
  int coff, wlo;
  const unsigned short* m1; long long m1_rs, m1_ks;
  __device__ __forceinline__ float operator()(float s, int row, int key) const {
    s *= 0.176757812f;
    s += kc_ld_f16(&m1[(long long)row * m1_rs + (long long)key * m1_ks]);
    if (s <= -65520.f) s = -KILN_INF;
    return s;
  }
};
typedef KcAttention<32, false, 4, 64, true, KcScores> KA;
static_assert(KA::SMEM_BYTES == 25600, "attention shared memory");
extern "C" __global__ void __launch_bounds__(KA::THREADS) attention_f16_d32_q64_maskadd(const unsigned short* __restrict__ t_0, unsigned short* __restrict__ t_1, long long s0, long long s1, long long s2, const unsigned short* __restrict__ t_2, long long s3, long long s4, long long s5) {
  extern __shared__ __align__(128) unsigned short kc_smem[];
  const long long qt = (long long)blockIdx.x % s1;
  long long bz = (long long)blockIdx.x / s1;
  const long long b1 = bz % 2LL; bz /= 2LL;
  const long long b0 = bz % s2; bz /= s2;
  KcScores sc; sc.coff = 0; sc.wlo = 0;
  sc.m1 = t_2 + (0 + b0 * s3); sc.m1_rs = s0; sc.m1_ks = 1LL;
  KA::run(kc_smem, t_0 + (0 + b1 * 32LL + b0 * s4), 192LL, t_0 + (64LL + b1 * 32LL + b0 * s4), 192LL, t_0 + (128LL + b1 * 32LL + b0 * s4), 192LL, t_1 + (0 + b1 * 32LL + b0 * s5), 64LL, (int)s0, (int)s0, (int)(qt * 64), sc);
}
// ---- attention_f16_d40_q64_causal_s100x100 grid=(4*N) block=128 smem=35840 args=5
struct KcScores {
  static constexpr bool CAUSAL = true;
  static constexpr bool WINDOW = false;
  static constexpr bool NATURAL = false;
  int coff, wlo;
  __device__ __forceinline__ float operator()(float s, int row, int key) const {
    return s * 0.228062749f;
  }
};
typedef KcAttention<40, false, 4, 64, true, KcScores> KA;
static_assert(KA::SMEM_BYTES == 35840, "attention shared memory");
extern "C" __global__ void __launch_bounds__(KA::THREADS) attention_f16_d40_q64_causal_s100x100(const unsigned short* __restrict__ t_0, const unsigned short* __restrict__ t_1, const unsigned short* __restrict__ t_2, unsigned short* __restrict__ t_3, long long s0) {
  extern __shared__ __align__(128) unsigned short kc_smem[];
  const long long qt = (long long)blockIdx.x % 2LL;
  long long bz = (long long)blockIdx.x / 2LL;
  const long long b1 = bz % 2LL; bz /= 2LL;
  const long long b0 = bz % s0; bz /= s0;
  KcScores sc; sc.coff = 0; sc.wlo = 0;
  KA::run(kc_smem, t_0 + (0 + b1 * 4000LL + b0 * 8000LL), 40LL, t_1 + (0 + b1 * 4000LL + b0 * 8000LL), 40LL, t_2 + (0 + b1 * 4000LL + b0 * 8000LL), 40LL, t_3 + (0 + b1 * 4000LL + b0 * 8000LL), 40LL, (int)100LL, (int)100LL, (int)(qt * 64), sc);
}
// ---- attention_bf16_d256_q64_maskbool_gqa grid=(8*((Sq+63)/64)*N) block=128 smem=101376 args=14
struct KcScores {
  static constexpr bool CAUSAL = false;
  static constexpr bool WINDOW = false;
  static constexpr bool NATURAL = true;
  int coff, wlo;
  const unsigned char* m1; long long m1_rs, m1_ks;
  __device__ __forceinline__ float operator()(float s, int row, int key) const {
    s *= 0.0625f;
    s = (m1[(long long)row * m1_rs + (long long)key * m1_ks] != 0) == true ? s : -998244352.0f;
    return s;
  }
};
typedef KcAttention<256, true, 4, 32, false, KcScores> KA;
static_assert(KA::SMEM_BYTES == 101376, "attention shared memory");
extern "C" __global__ void __launch_bounds__(KA::THREADS) attention_bf16_d256_q64_maskbool_gqa(const unsigned short* __restrict__ t_0, const unsigned short* __restrict__ t_1, const unsigned short* __restrict__ t_2, unsigned short* __restrict__ t_3, long long s0, long long s1, long long s2, long long s3, const unsigned char* __restrict__ t_4, long long s4, long long s5, long long s6, long long s7, long long s8) {
  extern __shared__ __align__(128) unsigned short kc_smem[];
  const long long qt = (long long)blockIdx.x % s2;
  long long bz = (long long)blockIdx.x / s2;
  const long long b2 = bz % 4LL; bz /= 4LL;
  const long long b1 = bz % 2LL; bz /= 2LL;
  const long long b0 = bz % s3; bz /= s3;
  KcScores sc; sc.coff = 0; sc.wlo = 0;
  sc.m1 = t_4 + (0 + b0 * s1); sc.m1_rs = 0LL; sc.m1_ks = 1LL;
  KA::run(kc_smem, t_0 + (0 + b2 * s4 + b1 * s5 + b0 * s7), 256LL, t_1 + (0 + b1 * s6 + b0 * s8), 256LL, t_2 + (0 + b1 * s6 + b0 * s8), 256LL, t_3 + (0 + b2 * s4 + b1 * s5 + b0 * s7), 256LL, (int)s0, (int)s1, (int)(qt * 64), sc);
}
