// The tiled depthwise conv kernel's layout (heuristics/depthwise_tile.hpp), a pure function:
// the picks on the depthwise layers of MobileNetV2, EfficientNet-B0 and ConvNeXt-T at batch 32,
// the invariants the kernel relies on over a sweep of shapes, and the refusals that keep the
// sliding-window kernel.
#include <gtest/gtest.h>

#include "heuristics/grouped_conv_layout.hpp"

using namespace kiln;

namespace {

GroupedConvShape dw(int64_t c, int64_t h, int64_t r, int64_t stride, int64_t dil = 1) {
  GroupedConvShape s;
  s.c = s.k = s.groups = c;
  s.r = s.s = r;
  s.stride_h = s.stride_w = stride;
  s.dil_h = s.dil_w = dil;
  s.oh = s.ow = (h + 2 * (dil * (r - 1) / 2) - dil * (r - 1) - 1) / stride + 1;
  s.pixels_estimate = 32 * s.oh * s.ow;
  return s;
}

}  // namespace

TEST(DepthwiseTile, MobileNetV2FirstLayer) {
  // 32 channels on 112x112: the CTA covers all 4 vectors (its input rows are contiguous), 28
  // rows of 2 x 8 pixels, 224 threads; 30 x 18 input pixels staged for 28 x 16 outputs.
  DepthwiseTile t = choose_depthwise_tile(dw(32, 112, 3, 1));
  ASSERT_TRUE(t.ok) << t.why_not;
  EXPECT_EQ(t.nv, 4);
  EXPECT_EQ(t.pixels, 8);
  EXPECT_EQ(t.tile_h, 28);
  EXPECT_EQ(t.tile_w, 16);
  EXPECT_EQ(t.threads, 224);
  EXPECT_EQ(t.in_h, 30);
  EXPECT_EQ(t.in_w, 18);
  EXPECT_EQ(t.tiles_h, 4);
  EXPECT_EQ(t.tiles_w, 7);
  // Rows 4 vectors apart modulo 8 (a quarter warp reads two rows of one column).
  EXPECT_EQ(t.pitch % 8, 4);
  EXPECT_EQ(t.smem_bytes, 9 * 32 * 4 + 30 * t.pitch * 16);
}

TEST(DepthwiseTile, ConvNeXtSevenBySeven) {
  // 96 channels on 56x56, 7x7: 7 pixels per thread (8 rows x 4 groups of 7 = whole 28-column
  // halves), 128 threads (the 7x8 accumulators and the 7x8 filter row need ~140 registers).
  DepthwiseTile t = choose_depthwise_tile(dw(96, 56, 7, 1));
  ASSERT_TRUE(t.ok) << t.why_not;
  EXPECT_EQ(t.nv, 4);
  EXPECT_EQ(t.pixels, 7);
  EXPECT_EQ(t.tile_h, 8);
  EXPECT_EQ(t.tile_w, 28);
  EXPECT_EQ(t.threads, 128);
  EXPECT_EQ(t.in_h, 14);
  EXPECT_EQ(t.in_w, 34);
}

TEST(DepthwiseTile, InvariantsOverTheZooShapes) {
  for (int64_t c : {16, 32, 96, 144, 192, 240, 384, 576, 672, 768, 960, 1152})
    for (int64_t h : {7, 14, 28, 56, 112})
      for (int64_t r : {3, 5, 7, 9})
        for (int64_t stride : {1, 2})
          for (int64_t dil : {1, 2}) {
            SCOPED_TRACE(testing::Message() << c << " ch " << h << "x" << h << " " << r << "x" << r
                                            << " s" << stride << " d" << dil);
            const GroupedConvShape s = dw(c, h, r, stride, dil);
            if (s.oh < 1) continue;
            const DepthwiseTile t = choose_depthwise_tile(s);
            if (!t.ok) {
              // Only the largest halos fail to fit (9x9 at dilation 2 on many channels).
              EXPECT_GE(r * dil, 9) << t.why_not;
              continue;
            }
            EXPECT_EQ(c / 8 % t.nv, 0);
            EXPECT_EQ(t.threads, t.nv * t.tile_h * t.col_groups);
            EXPECT_LE(t.threads, 256);
            EXPECT_EQ(t.tile_w, t.col_groups * t.pixels);
            EXPECT_LE(t.pixels, 8);
            EXPECT_EQ(t.in_h, (t.tile_h - 1) * stride + (r - 1) * dil + 1);
            EXPECT_EQ(t.in_w, (t.tile_w - 1) * stride + (r - 1) * dil + 1);
            EXPECT_GE(t.pitch, t.in_w * t.nv);
            EXPECT_LT(t.pitch, t.in_w * t.nv + 8);
            EXPECT_EQ(t.smem_bytes, r * r * t.nv * 32 + int64_t{t.in_h} * t.pitch * 16);
            EXPECT_LE(t.smem_bytes, 48 * 1024);
            EXPECT_EQ(t.tiles_h, (s.oh + t.tile_h - 1) / t.tile_h);
            EXPECT_EQ(t.tiles_w, (s.ow + t.tile_w - 1) / t.tile_w);
            // No tile is more than twice the output it covers.
            EXPECT_LE(t.tile_h, s.oh);
            EXPECT_LE(t.tile_w, s.ow + t.pixels - 1);
          }
}

TEST(DepthwiseTile, RefusalsKeepTheSlidingKernel) {
  GroupedConvShape s = dw(32, 56, 3, 1);
  s.elem_bytes = 4;
  EXPECT_FALSE(choose_depthwise_tile(s).ok);  // f32
  s = dw(32, 56, 3, 1);
  s.sm = 75;
  EXPECT_FALSE(choose_depthwise_tile(s).ok);  // no cp.async
  s = dw(32, 56, 3, 1);
  s.k = 64;
  EXPECT_FALSE(choose_depthwise_tile(s).ok);                 // a channel multiplier
  EXPECT_FALSE(choose_depthwise_tile(dw(28, 56, 3, 1)).ok);  // 28 channels: no 16-byte vectors
  s = dw(32, 56, 3, 1);
  s.ow = -1;
  EXPECT_FALSE(choose_depthwise_tile(s).ok);  // a symbolic width
  // The grouped layout takes the tile where it exists, else the sliding window.
  EXPECT_TRUE(grouped_conv_layout(dw(32, 56, 3, 1)).tile.ok);
  s.ow = -1;
  GroupedConvLayout L = grouped_conv_layout(s);
  ASSERT_TRUE(L.ok);
  EXPECT_FALSE(L.tile.ok);
  EXPECT_TRUE(L.sliding);
}
