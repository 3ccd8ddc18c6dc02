constant subgraphs folded (11 nodes): clamp_17, exp_18, matmul_22, relu_23, matmul_24, gather_25, reshape_26, transpose_27, sigmoid_28, mul_29, reshape_30; per-batch scales moved onto the matmul's left operand: matmul_20; l2 normalizations as row norms: div_8, div_14; transposes read as transposed matmul operands: transpose_19 -> matmul_20.of_scaled_a; views (no copy kernel): reshape_1 (reshape), transpose_2 (transpose read row by row), reshape_4 (reshape), reshape_10 (reshape), reshape_16 (reshape), transpose_34 (transpose of a matmul result), reshape_35 (reshape); strided views (no copy kernel): slice_3 (slice), slice_9 (slice), slice_15 (slice) before planning
plan for 'swin_v2_attention': 5 kernels and 10 views for 21 nodes
group 0 [contraction] contraction_f16_matmul
  nodes:   *matmul_0 (matmul)
  inputs:  x f16[N, 49, 96], w_qkv f16[96, 288], b_qkv f16[288]
  outputs: matmul_0 f16[N, 49, 288]
  why:     anchor: matmul_0 (contraction) -> contraction kernel
group 1 [view] view_f16_reshape
  nodes:   reshape_1 (reshape)
  inputs:  matmul_0 f16[N, 49, 288]
  outputs: reshape_1 f16[N, 49, 3, 3, 32]
  why:     view: reshape_1 (reshape) reads its input's memory in place, no kernel
  why:     matmul_0 -> reshape_1: reshape_1 is a view of matmul_0's result (no kernel) (group 0)
group 2 [view] view_f16_transpose
  nodes:   transpose_2 (transpose)
  inputs:  reshape_1 f16[N, 49, 3, 3, 32]
  outputs: transpose_2 f16[3, N, 3, 49, 32] strides[96, 14112, 32, 288, 1]
  why:     view: transpose_2 (transpose) reads its input's memory in place, no kernel
  why:     reshape_1 -> transpose_2: reshape_1 is a view (no kernel), read in place (group 1)
group 3 [view] view_f16_slice
  nodes:   slice_3 (slice)
  inputs:  transpose_2 f16[3, N, 3, 49, 32] strides[96, 14112, 32, 288, 1]
  outputs: slice_3 f16[1, N, 3, 49, 32] strides[96, 14112, 32, 288, 1]
  why:     view: slice_3 (slice) reads its input's memory in place, no kernel
  why:     transpose_2 -> slice_3: transpose_2 is a view (no kernel), read in place (group 2)
group 4 [view] view_f16_reshape
  nodes:   reshape_4 (reshape)
  inputs:  slice_3 f16[1, N, 3, 49, 32] strides[96, 14112, 32, 288, 1]
  outputs: reshape_4 f16[N, 3, 49, 32] strides[14112, 32, 288, 1]
  why:     view: reshape_4 (reshape) reads its input's memory in place, no kernel
  why:     slice_3 -> reshape_4: slice_3 is a view (no kernel), read in place (group 3)
group 5 [rownorm] rownorm_f16_rmsnorm_mul
  nodes:   *div_8.l2norm (rmsnorm), div_8.l2 (mul), matmul_20.scaled_a (mul)
  inputs:  reshape_4 f16[N, 3, 49, 32] strides[14112, 32, 288, 1], div_8.l2_factor f32[], exp_18_folded f16[3, 1, 1]
  outputs: matmul_20.scaled_a f16[N, 3, 49, 32]
  why:     anchor: div_8.l2norm (normalization) -> rownorm kernel
  why:     epilogue: div_8.l2 (mul) fused on div_8.l2norm's output
  why:     epilogue: matmul_20.scaled_a (mul) fused on div_8.l2norm's output
  why:     reshape_4 -> div_8.l2norm: reshape_4 is a view (no kernel), read in place (group 4)
group 6 [view] view_f16_slice
  nodes:   slice_9 (slice)
  inputs:  transpose_2 f16[3, N, 3, 49, 32] strides[96, 14112, 32, 288, 1]
  outputs: slice_9 f16[1, N, 3, 49, 32] strides[96, 14112, 32, 288, 1]
  why:     view: slice_9 (slice) reads its input's memory in place, no kernel
  why:     transpose_2 -> slice_9: transpose_2 is a view (no kernel), read in place (group 2)
group 7 [view] view_f16_reshape
  nodes:   reshape_10 (reshape)
  inputs:  slice_9 f16[1, N, 3, 49, 32] strides[96, 14112, 32, 288, 1]
  outputs: reshape_10 f16[N, 3, 49, 32] strides[14112, 32, 288, 1]
  why:     view: reshape_10 (reshape) reads its input's memory in place, no kernel
  why:     slice_9 -> reshape_10: slice_9 is a view (no kernel), read in place (group 6)
group 8 [rownorm] rownorm_f16_rmsnorm
  nodes:   *div_14.l2norm (rmsnorm)
  inputs:  reshape_10 f16[N, 3, 49, 32] strides[14112, 32, 288, 1]
  outputs: div_14.l2norm f16[N, 3, 49, 32]
  why:     anchor: div_14.l2norm (normalization) -> rownorm kernel
  why:     reshape_10 -> div_14.l2norm: reshape_10 is a view (no kernel), read in place (group 7)
group 9 [view] view_f16_slice
  nodes:   slice_15 (slice)
  inputs:  transpose_2 f16[3, N, 3, 49, 32] strides[96, 14112, 32, 288, 1]
  outputs: slice_15 f16[1, N, 3, 49, 32] strides[96, 14112, 32, 288, 1]
  why:     view: slice_15 (slice) reads its input's memory in place, no kernel
  why:     transpose_2 -> slice_15: transpose_2 is a view (no kernel), read in place (group 2)
group 10 [view] view_f16_reshape
  nodes:   reshape_16 (reshape)
  inputs:  slice_15 f16[1, N, 3, 49, 32] strides[96, 14112, 32, 288, 1]
  outputs: reshape_16 f16[N, 3, 49, 32] strides[14112, 32, 288, 1]
  why:     view: reshape_16 (reshape) reads its input's memory in place, no kernel
  why:     slice_15 -> reshape_16: slice_15 is a view (no kernel), read in place (group 9)
group 11 [attention] attention_f16_matmul_add_softmax_matmul
  nodes:   div_14.l2 (mul), *matmul_20.of_scaled_a (matmul), add_31 (add), softmax_32 (softmax), matmul_33 (matmul)
  inputs:  div_14.l2norm f16[N, 3, 49, 32], div_14.l2_factor f32[], matmul_20.scaled_a f16[N, 3, 49, 32], reshape_30_folded f16[1, 3, 49, 49], reshape_16 f16[N, 3, 49, 32] strides[14112, 32, 288, 1]
  outputs: matmul_33 f16[N, 3, 49, 32] strides[4704, 32, 96, 1]
  why:     anchor: matmul_20.of_scaled_a (contraction) -> attention kernel
  why:     attention: matmul_20.of_scaled_a -> div_14.l2 -> add_31 -> softmax_32 -> matmul_33: scores and probabilities stay on chip (one kernel)
  why:     div_14.l2norm -> div_14.l2: div_14.l2 needs an operand computed by a later kernel (group 8)
  why:     matmul_20.scaled_a -> matmul_20.of_scaled_a: matmul_20.of_scaled_a is a contraction anchor, matmul_20.scaled_a cannot be its prologue (group 5)
  why:     reshape_16 -> matmul_33: reshape_16 is a view (no kernel), read in place (group 10)
group 12 [view] view_f16_transpose
  nodes:   transpose_34 (transpose)
  inputs:  matmul_33 f16[N, 3, 49, 32] strides[4704, 32, 96, 1]
  outputs: transpose_34 f16[N, 49, 3, 32]
  why:     view: transpose_34 (transpose) reads its input's memory in place, no kernel
  why:     matmul_33 -> transpose_34: transpose_34 is a view of matmul_33's result (no kernel) (group 11)
group 13 [view] view_f16_reshape
  nodes:   reshape_35 (reshape)
  inputs:  transpose_34 f16[N, 49, 3, 32]
  outputs: reshape_35 f16[N, 49, 96]
  why:     view: reshape_35 (reshape) reads its input's memory in place, no kernel
  why:     transpose_34 -> reshape_35: transpose_34 is a view (no kernel), read in place (group 12)
group 14 [contraction] contraction_f16_matmul
  nodes:   *matmul_36 (matmul)
  inputs:  reshape_35 f16[N, 49, 96], w_proj f16[96, 96], b_proj f16[96]
  outputs: matmul_36 f16[N, 49, 96]
  why:     anchor: matmul_36 (contraction) -> contraction kernel
  why:     reshape_35 -> matmul_36: reshape_35 is a view (no kernel), read in place (group 13)
// ---- attention_f16_d32_q64_maskadd_s49x49
struct KcScores {
  static constexpr bool CAUSAL = false;
  static constexpr bool WINDOW = false;
  static constexpr bool NATURAL = true;
  int coff, wlo;
  const unsigned short* m0; long long m0_rs, m0_ks;
  __device__ __forceinline__ float operator()(float s, int row, int key) const {
    s *= 0.176776692f;
    s += kc_ld_f16(&m0[(long long)row * m0_rs + (long long)key * m0_ks]);
    if (s <= -65520.f) s = -KILN_INF;
    return s;
  }
};
typedef KcAttention<32, false, 4, 64, true, KcScores> KA;
static_assert(KA::SMEM_BYTES == 25600, "attention shared memory");
extern "C" __global__ void __launch_bounds__(KA::THREADS) attention_f16_d32_q64_maskadd_s49x49(const unsigned short* __restrict__ t_0, const unsigned short* __restrict__ t_1, const unsigned short* __restrict__ t_2, unsigned short* __restrict__ t_3, long long s0, const unsigned short* __restrict__ t_4) {
  extern __shared__ __align__(128) unsigned short kc_smem[];
  const long long qt = (long long)blockIdx.x % 1LL;
  long long bz = (long long)blockIdx.x / 1LL;
  const long long b1 = bz % 3LL; bz /= 3LL;
  const long long b0 = bz % s0; bz /= s0;
  KcScores sc; sc.coff = 0; sc.wlo = 0;
  sc.m0 = t_4 + (0 + b1 * 2401LL); sc.m0_rs = 49LL; sc.m0_ks = 1LL;
  KA::run(kc_smem, t_0 + (0 + b1 * 1568LL + b0 * 4704LL), 32LL, t_1 + (0 + b1 * 1568LL + b0 * 4704LL), 32LL, t_2 + (0 + b1 * 32LL + b0 * 14112LL), 288LL, t_3 + (0 + b1 * 32LL + b0 * 4704LL), 96LL, (int)49LL, (int)49LL, (int)(qt * 64), sc);
}
