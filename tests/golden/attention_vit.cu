plan for 'vit_attention': 3 kernels and 1 view for 32 nodes
group 0 [contraction] contraction_f16_matmul
  nodes:   *matmul_1 (matmul)
  inputs:  x f16[N, 5, 128], w_in f16[128, 384], b_in f16[384]
  outputs: matmul_1 f16[N, 5, 384]
  why:     anchor: matmul_1 (contraction) -> contraction kernel
group 1 [attention] attention_f16_matmul_softmax_matmul
  nodes:   matmul_1.rows (transpose), reshape_2 (reshape), reshape_3 (reshape), transpose_4 (transpose), reshape_5 (reshape), slice_6 (slice), reshape_7 (reshape), reshape_8 (reshape), transpose_9 (transpose), reshape_10 (reshape), slice_11 (slice), reshape_12 (reshape), reshape_13 (reshape), transpose_14 (transpose), reshape_15 (reshape), slice_16 (slice), reshape_17 (reshape), reshape_18 (reshape), transpose_19 (transpose), reshape_20 (reshape), reshape_21 (reshape), transpose_22 (transpose), reshape_23 (reshape), mul_24 (mul), mul_25 (mul), *matmul_26 (matmul), softmax_27 (softmax), matmul_28 (matmul), transpose_29 (transpose)
  inputs:  matmul_1 f16[N, 5, 384], c f16[1]
  outputs: transpose_29 f16[5, N, 2, 64]
  why:     anchor: matmul_26 (contraction) -> attention kernel
  why:     attention: matmul_26 -> mul_25 -> reshape_10 -> transpose_9 -> reshape_8 -> reshape_7 -> slice_6 -> reshape_5 -> transpose_4 -> reshape_3 -> reshape_2 -> matmul_1.rows -> mul_24 -> reshape_23 -> transpose_22 -> reshape_21 -> reshape_15 -> transpose_14 -> reshape_13 -> reshape_12 -> slice_11 -> reshape_20 -> transpose_19 -> reshape_18 -> reshape_17 -> slice_16 -> transpose_29 -> softmax_27 -> matmul_28: scores and probabilities stay on chip (one kernel)
  why:     matmul_1 -> matmul_1.rows: matmul_1.rows is a movement op (copy kernel); matmul_1 is not its prologue: it is not elementwise (group 0)
group 2 [view] view_f16_reshape
  nodes:   reshape_30 (reshape)
  inputs:  transpose_29 f16[5, N, 2, 64]
  outputs: reshape_30 f16[5*N, 128]
  why:     view: reshape_30 (reshape) reads its input's memory in place, no kernel
  why:     transpose_29 -> reshape_30: transpose_29 is a movement op, materialized by its own copy kernel (group 1)
group 3 [contraction] contraction_f16_matmul
  nodes:   *matmul_31 (matmul)
  inputs:  reshape_30 f16[5*N, 128], w_out f16[128, 128], b_out f16[128]
  outputs: matmul_31 f16[5*N, 128]
  why:     anchor: matmul_31 (contraction) -> contraction kernel
  why:     reshape_30 -> matmul_31: reshape_30 is a view (no kernel), read in place (group 2)
// ---- attention_f16_d64_q64_s5x5 grid=(2*N) block=128 smem=46080 args=4
struct KcScores {
  static constexpr bool CAUSAL = false;
  static constexpr bool WINDOW = false;
  static constexpr bool NATURAL = false;
  int coff, wlo;
  __device__ __forceinline__ float operator()(float s, int row, int key) const {
    return s * 0.180298358f;
  }
};
typedef KcAttention<64, false, 4, 64, true, KcScores> KA;
static_assert(KA::SMEM_BYTES == 46080, "attention shared memory");
extern "C" __global__ void __launch_bounds__(KA::THREADS) attention_f16_d64_q64_s5x5(const unsigned short* __restrict__ t_0, unsigned short* __restrict__ t_1, long long s0, long long s1) {
  extern __shared__ __align__(128) unsigned short kc_smem[];
  const long long qt = (long long)blockIdx.x % 1LL;
  long long bz = (long long)blockIdx.x / 1LL;
  const long long b1 = bz % 2LL; bz /= 2LL;
  const long long b0 = bz % s0; bz /= s0;
  KcScores sc; sc.coff = 0; sc.wlo = 0;
  KA::run(kc_smem, t_0 + (0 + b1 * 64LL + b0 * 1920LL), 384LL, t_0 + (128LL + b1 * 64LL + b0 * 1920LL), 384LL, t_0 + (256LL + b1 * 64LL + b0 * 1920LL), 384LL, t_1 + (0 + b1 * 64LL + b0 * 128LL), s1, (int)5LL, (int)5LL, (int)(qt * 64), sc);
}
