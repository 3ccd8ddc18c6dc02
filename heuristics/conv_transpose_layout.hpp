// The conv_transpose2d layout: how the direct (gather-form) kernel of codegen/contraction/
// conv_transpose.cpp walks its outputs: the element order (channel-fastest for channels-last
// outputs, so that a warp stores contiguous channels), how many output channels one thread
// accumulates (each input value loaded once for all of them), the CTA size, and each axis's tap
// walk (only the filter taps whose (o + pad - r * dilation) is a multiple of the stride). A pure
// function, tested on the CPU (tests/test_conv_transpose.cpp).
#pragma once

#include <cstdint>

namespace kiln {

// A conv_transpose2d as the layout sees it (codegen fills it from the group).
struct ConvTransposeShape {
  int64_t kg = 1;        // output channels per group
  int64_t cg = 1;        // input channels per group
  int64_t r = 1, s = 1;  // filter rows, columns
  int64_t stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  bool channels_last = false;  // the output is NHWC
  int64_t outputs = -1;        // output elements; -1: symbolic
};

// One axis's taps for output coordinate o: with ph = (o + pad) mod stride, a tap r contributes
// iff ph is a multiple of `gcd` and r = r0 + i * step, r0 = ((ph / gcd) * inverse) mod step
// (the solutions of r * dilation = ph mod stride); its input coordinate is
// (o + pad - r * dilation) / stride.
struct ConvTransposeTaps {
  int64_t gcd = 1;      // gcd(dilation, stride)
  int64_t step = 1;     // stride / gcd
  int64_t inverse = 0;  // of dilation / gcd modulo step (0 when step is 1)
};
ConvTransposeTaps conv_transpose_taps(int64_t stride, int64_t dilation);

struct ConvTransposeLayout {
  bool channel_fastest = false;  // consecutive threads take consecutive output channels
  int channels_per_thread = 1;   // output channels one thread accumulates (divides kg)
  int threads = 256;             // per CTA
  ConvTransposeTaps taps_h, taps_w;
};
ConvTransposeLayout choose_conv_transpose_layout(const ConvTransposeShape& s);

}  // namespace kiln
