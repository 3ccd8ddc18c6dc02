// ---- attention_varlen_f16_d64_q64_causal_gqa grid=(Bp1+T/64, 8) block=128 smem=46080 args=10
struct KcScores {
  static constexpr bool CAUSAL = true;
  static constexpr bool WINDOW = false;
  static constexpr bool NATURAL = false;
  int coff, wlo;
  __device__ __forceinline__ float operator()(float s, int row, int key) const {
    return s * 0.18033688f;
  }
};
typedef KcAttention<64, false, 4, 64, true, KcScores> KA;
static_assert(KA::SMEM_BYTES == 46080, "attention shared memory");
extern "C" __global__ void __launch_bounds__(KA::THREADS) attention_varlen_f16_d64_q64_causal_gqa(const unsigned short* __restrict__ t_0, const unsigned short* __restrict__ t_1, const unsigned short* __restrict__ t_2, unsigned short* __restrict__ t_3, const int* __restrict__ t_4, const int* __restrict__ t_5, long long s0, long long s1, long long s2, unsigned* __restrict__ kc_err) {
  extern __shared__ __align__(128) unsigned short kc_smem[];
  kc_varlen_check(t_4, t_5, (int)s2, s0, s1, kc_err);
  KcVarlenBlock blk;
  if (!kc_varlen_block<KA::BQ>(t_4, t_5, (int)s2, s0, s1, blockIdx.x, blk)) return;
  const long long h = blockIdx.y, kh = h / 4;
  KcScores sc;
  sc.coff = blk.lk - blk.lq + 0;
  sc.wlo = blk.lk - blk.lq - 0;
  KA::run(kc_smem, t_0 + (blk.q0 * 512LL + h * 64LL), 512LL, t_1 + (blk.k0 * 128LL + kh * 64LL), 128LL, t_2 + (blk.k0 * 128LL + kh * 64LL), 128LL, t_3 + (blk.q0 * 512LL + h * 64LL), 512LL, blk.lq, blk.lk, blk.qb, sc);
}
// ---- attention_varlen_bf16_d128_q64_right_window grid=(Bp1+T/64, 4) block=128 smem=87040 args=10
struct KcScores {
  static constexpr bool CAUSAL = true;
  static constexpr bool WINDOW = true;
  static constexpr bool NATURAL = false;
  int coff, wlo;
  __device__ __forceinline__ float operator()(float s, int row, int key) const {
    return s * 0.144269504f;
  }
};
typedef KcAttention<128, true, 4, 64, true, KcScores> KA;
static_assert(KA::SMEM_BYTES == 87040, "attention shared memory");
extern "C" __global__ void __launch_bounds__(KA::THREADS) attention_varlen_bf16_d128_q64_right_window(const unsigned short* __restrict__ t_0, const unsigned short* __restrict__ t_1, const unsigned short* __restrict__ t_2, unsigned short* __restrict__ t_3, const int* __restrict__ t_4, const int* __restrict__ t_5, long long s0, long long s1, long long s2, unsigned* __restrict__ kc_err) {
  extern __shared__ __align__(128) unsigned short kc_smem[];
  kc_varlen_check(t_4, t_5, (int)s2, s0, s1, kc_err);
  KcVarlenBlock blk;
  if (!kc_varlen_block<KA::BQ>(t_4, t_5, (int)s2, s0, s1, blockIdx.x, blk)) return;
  const long long h = blockIdx.y, kh = h / 1;
  KcScores sc;
  sc.coff = blk.lk - blk.lq + 16;
  sc.wlo = blk.lk - blk.lq - 16;
  KA::run(kc_smem, t_0 + (blk.q0 * 512LL + h * 128LL), 512LL, t_1 + (blk.k0 * 512LL + kh * 128LL), 512LL, t_2 + (blk.k0 * 512LL + kh * 128LL), 512LL, t_3 + (blk.q0 * 512LL + h * 128LL), 512LL, blk.lq, blk.lk, blk.qb, sc);
}
