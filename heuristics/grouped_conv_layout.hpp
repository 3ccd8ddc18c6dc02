// The layout of the grouped / depthwise conv kernel (codegen/contraction/grouped.cpp): NHWC
// activations, 1 < groups, narrow groups (up to 64 input channels per group). Every thread owns
// `vec` consecutive output channels of `pixels` consecutive output pixels of one output row; a
// CTA is threads_c x threads_p threads (channel-fastest: neighbouring lanes read neighbouring
// 16-byte channel vectors of a pixel), and holds the filters of its threads_c * vec output
// channels in shared memory as f32. A pure function of the shape, tested on the CPU.
#pragma once

#include <cstdint>
#include <string>

#include "heuristics/depthwise_tile.hpp"

namespace kiln {

struct GroupedConvShape {
  int64_t c = 0, k = 0, groups = 1;  // input / output channels, groups
  int64_t r = 1, s = 1;              // filter rows / columns
  int64_t stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  int64_t oh = -1, ow = -1;  // output height / width when static, else -1
  int elem_bytes = 2;        // storage bytes per element (2: f16 / bf16, 4: f32)
  int smem_limit = 48 * 1024;
  // Output pixels (N x OH x OW, a symbolic batch estimated) and the SMs: how many pixel groups
  // a thread runs one after the other (the CTA's filters loaded once for all of them).
  int64_t pixels_estimate = 0;
  int sm_count = 132;
  int sm = 90;  // compute capability (mma.sync: 80 and newer)
};

struct GroupedConvLayout {
  bool ok = false;
  std::string why_not;  // when !ok: why the direct kernel stays
  // Depthwise (one channel per group, 16-bit, static output size): the input tile staged in
  // shared memory (heuristics/depthwise_tile.hpp); the fields below then stay unset.
  DepthwiseTile tile;
  int64_t cg = 0, kg = 0;  // input / output channels per group
  // Tensor cores (16-bit storage, sm_80+, 8 | cg, 8 | kg): implicit GEMM per group, one group's
  // mma_n output channels per CTA of mma_warps warps, each warp mma_mt m16 tiles of output
  // pixels (consecutive GEMM rows), k steps of mma_k input channels of one filter tap (16 where
  // 16 | cg, else 8); the CTA's filters in shared memory as 16-bit [tap][channel][cg + 8].
  // (mma_mt 1, 64-pixel CTAs, measured 3-7 % slower than 2 on ResNeXt's 7x7 layers at batch 32,
  // where 2 leaves 13 x 32 CTAs for 132 SMs.)
  bool mma = false;
  int mma_k = 0, mma_n = 0, mma_mt = 2, mma_warps = 4;
  int vec = 1;     // output channels per thread
  int pixels = 1;  // output pixels per thread (along the output row)
  // Groups a thread's channels span (vec > kg: several narrow groups), and how many output
  // channels of each group it owns.
  int groups_per_thread = 1, vec_per_group = 1;
  // Input channels a thread reads: span consecutive channels from (k0 / kg) * cg; read in chunks
  // of `chunk` channels (span itself where the thread spans several groups), loaded as vectors
  // of x_vec elements.
  int64_t span = 1;
  int chunk = 1, x_vec = 1;
  // Depthwise-like (one input channel per group): a filter row's weights stay in registers and
  // every input column of the thread's window is loaded once (a sliding window along the row).
  bool sliding = false;
  // The filter-row loop unrolled (small filters: every row's loads in flight at once).
  bool unroll_rows = false;
  int y_vec = 1;  // output channels per store (vec or a divisor of it)
  // threads_c lanes along C (a divisor of the channel vectors where one fits: no idle lanes),
  // threads_p = 256 / threads_c along the pixels, threads = their product.
  int threads_c = 1, threads_p = 1, threads = 256;
  int iters = 1;  // pixel groups per thread, one after the other
  // The CTA's filters: r * s * cg * threads_c * vec floats (SIMT), r * s * mma_n * (cg + 8)
  // 16-bit values (mma).
  int64_t smem_bytes = 0;
};

GroupedConvLayout grouped_conv_layout(const GroupedConvShape& s);

}  // namespace kiln
