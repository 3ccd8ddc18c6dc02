// The grouped / depthwise conv kernel's layout (heuristics/grouped_conv_layout.hpp), a pure
// function: channels and pixels per thread, the input chunks and their vector width, the CTA's
// threads and filter bytes, on the layers of MobileNetV2, ResNeXt-50 and ConvNeXt and on odd
// shapes. Values by hand from the rules in grouped_conv_layout.cpp.
#include <gtest/gtest.h>

#include "heuristics/grouped_conv_layout.hpp"

using namespace kiln;

namespace {

GroupedConvShape shape(int64_t c, int64_t k, int64_t groups, int64_t r, int64_t ow,
                       int elem_bytes = 2) {
  GroupedConvShape s;
  s.c = c;
  s.k = k;
  s.groups = groups;
  s.r = r;
  s.s = r;
  s.ow = ow;
  s.elem_bytes = elem_bytes;
  return s;
}

}  // namespace

TEST(GroupedConvLayout, DepthwiseThreeByThree) {
  // MobileNetV2's 144-channel depthwise conv on 56x56: 8 channels (one 16-byte load) x 4
  // pixels per thread, a sliding window; 18 channel vectors -> 18 lanes along C, 14 along the
  // pixels.
  GroupedConvLayout L = grouped_conv_layout(shape(144, 144, 144, 3, 56));
  ASSERT_TRUE(L.ok) << L.why_not;
  EXPECT_TRUE(L.sliding);
  EXPECT_EQ(L.vec, 8);
  EXPECT_EQ(L.groups_per_thread, 8);
  EXPECT_EQ(L.vec_per_group, 1);
  EXPECT_EQ(L.span, 8);
  EXPECT_EQ(L.x_vec, 8);
  EXPECT_EQ(L.pixels, 4);
  EXPECT_EQ(L.threads_c, 18);
  EXPECT_EQ(L.threads_p, 14);
  EXPECT_EQ(L.threads, 252);
  EXPECT_EQ(L.smem_bytes, 9 * 18 * 8 * 4);
  EXPECT_EQ(L.iters, 1);  // no pixel count given
  // Batch 32: 25088 pixel groups of 4; 2 per thread keeps 896 CTAs (>= 4 per SM), 4 would not.
  GroupedConvShape b = shape(144, 144, 144, 3, 56);
  b.pixels_estimate = 32 * 56 * 56;
  EXPECT_EQ(grouped_conv_layout(b).iters, 2);
}

TEST(GroupedConvLayout, ResNeXtNarrowGroups) {
  // 32 groups of 4 channels: a thread's 8 channels span two groups, 8 input channels.
  GroupedConvLayout L = grouped_conv_layout(shape(128, 128, 32, 3, 56));
  ASSERT_TRUE(L.ok) << L.why_not;
  EXPECT_FALSE(L.sliding);
  EXPECT_EQ(L.vec, 8);
  EXPECT_EQ(L.groups_per_thread, 2);
  EXPECT_EQ(L.vec_per_group, 4);
  EXPECT_EQ(L.span, 8);
  EXPECT_EQ(L.chunk, 8);
  EXPECT_EQ(L.x_vec, 8);
  EXPECT_EQ(L.threads_c, 16);
  EXPECT_EQ(L.smem_bytes, 9 * 4 * 16 * 8 * 4);
}

TEST(GroupedConvLayout, ResNeXtWideGroupsOnSevenWideRows) {
  // SIMT (before sm_80): 32 groups of 32 channels on 7x7: chunks of 8 input channels, 7 pixels
  // (a whole row), and few lanes along C so that the filters fit 48 KB.
  GroupedConvShape s = shape(1024, 1024, 32, 3, 7);
  s.sm = 75;
  GroupedConvLayout L = grouped_conv_layout(s);
  ASSERT_TRUE(L.ok) << L.why_not;
  EXPECT_EQ(L.vec, 8);
  EXPECT_EQ(L.groups_per_thread, 1);
  EXPECT_EQ(L.span, 32);
  EXPECT_EQ(L.chunk, 8);
  EXPECT_EQ(L.pixels, 7);
  // At most 5 lanes fit; 5 (130 of 128 vectors) beats 4 lanes below the floor of 8.
  EXPECT_EQ(L.threads_c, 5);
  EXPECT_EQ(L.threads_p, 51);
  EXPECT_EQ(L.smem_bytes, 9 * 32 * 5 * 8 * 4);
}

TEST(GroupedConvLayout, TensorCoresFromEightChannelsPerGroup) {
  // sm_90, 16-bit: 32 channels per group -> k16 steps, the group's 32 outputs per CTA.
  GroupedConvLayout w = grouped_conv_layout(shape(1024, 1024, 32, 3, 7));
  ASSERT_TRUE(w.ok);
  EXPECT_TRUE(w.mma);
  EXPECT_EQ(w.mma_k, 16);
  EXPECT_EQ(w.mma_n, 32);
  EXPECT_EQ(w.threads, 128);
  EXPECT_EQ(w.smem_bytes, 9 * 32 * 40 * 2);
  EXPECT_EQ(w.mma_mt, 2);
  EXPECT_TRUE(w.unroll_rows);
  // RegNetY's 16-wide groups, 8-wide ones (k8 steps), 48 (24 outputs per CTA).
  GroupedConvLayout r = grouped_conv_layout(shape(320, 320, 20, 3, 14));
  EXPECT_TRUE(r.mma);
  EXPECT_EQ(r.mma_k, 16);
  EXPECT_EQ(r.mma_n, 16);
  GroupedConvLayout e = grouped_conv_layout(shape(256, 256, 32, 3, 28));
  EXPECT_TRUE(e.mma);
  EXPECT_EQ(e.mma_k, 8);
  EXPECT_EQ(e.mma_n, 8);
  EXPECT_EQ(grouped_conv_layout(shape(96, 96, 2, 3, 7)).mma_n, 24);
  // f32, 4-wide groups, or 4 outputs per group: the SIMT kernel.
  EXPECT_FALSE(grouped_conv_layout(shape(1024, 1024, 32, 3, 7, 4)).mma);
  EXPECT_FALSE(grouped_conv_layout(shape(128, 128, 32, 3, 56)).mma);
  EXPECT_FALSE(grouped_conv_layout(shape(64, 16, 4, 3, 10)).mma);
}

TEST(GroupedConvLayout, ConvNeXtSevenBySevenF32) {
  // f32: 4 channels per 16-byte vector; a 7-wide filter prefers 8 pixels (ties on 56).
  GroupedConvLayout L = grouped_conv_layout(shape(96, 96, 96, 7, 56, 4));
  ASSERT_TRUE(L.ok) << L.why_not;
  EXPECT_EQ(L.vec, 4);
  EXPECT_EQ(L.x_vec, 4);
  EXPECT_EQ(L.pixels, 8);
  EXPECT_EQ(L.threads_c, 24);
  EXPECT_EQ(L.threads_p, 10);
  EXPECT_EQ(L.smem_bytes, 49 * 24 * 4 * 4);
}

TEST(GroupedConvLayout, OddChannelCountsAndMultipliers) {
  // 36 depthwise channels: 4 per thread (36 % 8 != 0).
  GroupedConvLayout a = grouped_conv_layout(shape(36, 36, 36, 3, 10));
  ASSERT_TRUE(a.ok);
  EXPECT_EQ(a.vec, 4);
  EXPECT_EQ(a.x_vec, 4);
  // Channel multiplier 2: 8 output channels read 4 input channels.
  GroupedConvLayout m = grouped_conv_layout(shape(16, 32, 16, 3, 10));
  ASSERT_TRUE(m.ok);
  EXPECT_TRUE(m.sliding);
  EXPECT_EQ(m.vec, 8);
  EXPECT_EQ(m.groups_per_thread, 4);
  EXPECT_EQ(m.vec_per_group, 2);
  EXPECT_EQ(m.span, 4);
  EXPECT_EQ(m.x_vec, 4);
  // 16 input channels per group of 4 outputs: 8 outputs would hold 16 x 8 weights per tap, so
  // 4 (inside one group), the group's 16 inputs as one chunk.
  GroupedConvLayout w = grouped_conv_layout(shape(64, 16, 4, 3, 10));
  ASSERT_TRUE(w.ok);
  EXPECT_EQ(w.vec, 4);
  EXPECT_EQ(w.groups_per_thread, 1);
  EXPECT_EQ(w.chunk, 16);
  EXPECT_EQ(w.x_vec, 8);
  // 6 channels per group: pairs of outputs, chunks of all 6 inputs, 2-element loads.
  GroupedConvLayout six = grouped_conv_layout(shape(36, 36, 6, 3, 10));
  ASSERT_TRUE(six.ok);
  EXPECT_EQ(six.vec, 2);
  EXPECT_EQ(six.chunk, 6);
  EXPECT_EQ(six.x_vec, 2);
}

TEST(GroupedConvLayout, SymbolicWidthAndRefusals) {
  GroupedConvLayout s = grouped_conv_layout(shape(64, 64, 64, 3, -1));
  ASSERT_TRUE(s.ok);
  EXPECT_EQ(s.pixels, 4);
  // Wide groups (128 channels) stay on the direct kernel; so does a dense conv.
  EXPECT_FALSE(grouped_conv_layout(shape(256, 256, 2, 3, 14)).ok);
  EXPECT_FALSE(grouped_conv_layout(shape(64, 64, 1, 3, 14)).ok);
}
