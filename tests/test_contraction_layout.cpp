// The tensor-core kernels' layout (heuristics/contraction_layout.hpp) on the CPU: the mainloop,
// loader, threads, pixel blocks, grid order, split-K and shared memory it decides for
// representative ResNet-50 convs, a transformer matmul, the RGB stem, a split-K case, sm_80 and
// sm_90, and the rules for the epilogue tile (residual prefetch, TMA store).
#include <gtest/gtest.h>

#include "heuristics/contraction_config.hpp"
#include "heuristics/contraction_layout.hpp"
#include "kiln/error.hpp"

using namespace kiln;

namespace {

using Mainloop = ContractionMainloop;

// A static-size NHWC conv at batch `n` as the heuristics and the layout see it (what
// contraction::problem_info and contraction::layout_shape derive from a graph).
struct Conv {
  int64_t n, c, k, hw, r, stride, pad;
  int64_t out() const { return (hw + 2 * pad - r) / stride + 1; }
};

ContractionProblemInfo conv_info(const Conv& cv, int sm = 90) {
  ContractionProblemInfo p;
  p.m = cv.n * cv.out() * cv.out();
  p.n = cv.k;
  p.k = cv.r * cv.r * cv.c;
  p.sm = sm;
  p.wgmma_ok = sm == 90;
  const bool gemm = cv.r == 1 && cv.stride == 1 && cv.pad == 0;
  p.tma_gemm = p.wgmma_ok && gemm && cv.c % 8 == 0;
  p.tma_spatial = p.wgmma_ok && !gemm && cv.c % 64 == 0;
  p.tma_im2col = p.tma_spatial;
  p.images = cv.n;
  p.oh = p.ow = cv.out();
  return p;
}

ContractionShape conv_shape(const Conv& cv) {
  ContractionShape s;
  s.where = "test conv";
  s.is_conv = true;
  s.n = cv.k;
  s.oh = s.ow = cv.out();
  s.c = cv.c;
  s.s = cv.r;
  s.wgmma = true;
  const bool gemm = cv.r == 1 && cv.stride == 1 && cv.pad == 0;
  s.tma_gemm = gemm && cv.c % 8 == 0;
  s.tma_spatial = cv.c % 64 == 0;
  s.tma_im2col = s.tma_spatial;
  s.pairs = true;
  return s;
}

}  // namespace

// ResNet-50 res2 1x1 256 -> 64 at N = 32: a plain GEMM by TMA (2-D boxes of GEMM rows), one
// producer thread beside the consumer warpgroups, a single N tile (no N-fast order).
TEST(ContractionLayout, ResNet1x1ConvIsATmaGemm) {
  const Conv cv{32, 256, 64, 56, 1, 1, 0};
  const ContractionConfig cfg = choose_contraction_config(conv_info(cv));
  ASSERT_TRUE(cfg.tma) << cfg.str();
  const ContractionLayout L = contraction_layout(conv_shape(cv), cfg, 90);
  EXPECT_EQ(L.mainloop, Mainloop::WgmmaTma);
  EXPECT_EQ(L.loader, TmaLoader::GemmRows);
  EXPECT_TRUE(L.arch_specific);
  EXPECT_EQ(L.threads, cfg.bm / 64 * 128 + 128);
  EXPECT_EQ(L.loader_threads, 128);
  EXPECT_EQ(L.epilogue_threads, cfg.bm / 64 * 128);
  EXPECT_FALSE(L.pixel_blocks);
  EXPECT_EQ(L.tiles_n, 1);
  EXPECT_FALSE(L.n_fast);
  EXPECT_TRUE(L.cols_exact);
  EXPECT_EQ(L.cfg.split_k, 1);
  EXPECT_FALSE(L.tile_in_smem());  // no residual, no 16-bit output given
  EXPECT_EQ(L.smem_bytes, cfg.smem_bytes());
}

// res3 3x3 128 @ 28: im2col-mode TMA over GEMM rows is the rule; the spatial form (the
// autotune alternative) takes pixel blocks of one image, 8 x 16 where the output is wide enough,
// and holds no epilogue tile.
TEST(ContractionLayout, ResNet3x3ConvIm2colOrPixelBlocks) {
  const Conv cv{32, 128, 128, 28, 3, 1, 1};
  const ContractionConfig rule = choose_contraction_config(conv_info(cv));
  ASSERT_TRUE(rule.tma && rule.im2col) << rule.str();
  const ContractionLayout L = contraction_layout(conv_shape(cv), rule, 90);
  EXPECT_EQ(L.loader, TmaLoader::Im2col);
  EXPECT_FALSE(L.pixel_blocks);
  EXPECT_TRUE(L.tile_eligible);  // its M tiles are GEMM rows: the epilogue tile is possible

  const ContractionLayout S = contraction_layout(conv_shape(cv), wgmma_tma_tile(128, 128, 4), 90);
  EXPECT_EQ(S.loader, TmaLoader::PixelBlocks);
  EXPECT_TRUE(S.pixel_blocks);
  EXPECT_EQ(S.pixel_rows, 8);
  EXPECT_EQ(S.pixel_cols, 16);
  EXPECT_EQ(S.pixel_tiles_h, 4);  // 28 rows in blocks of 8
  EXPECT_EQ(S.pixel_tiles_w, 2);  // 28 columns in blocks of 16
  EXPECT_FALSE(S.tile_eligible);  // pixel blocks are not rows of the output tensor
  // A 64-row tile is an 8 x 8 block.
  const ContractionLayout S64 = contraction_layout(conv_shape(cv), wgmma_tma_tile(64, 128, 4), 90);
  EXPECT_EQ(S64.pixel_rows, 8);
  EXPECT_EQ(S64.pixel_cols, 8);
  // A stride-2 3x3 conv with C not a multiple of 64 cannot take TMA: a user error naming it.
  Conv odd{32, 96, 128, 56, 3, 2, 1};
  ContractionShape so = conv_shape(odd);
  try {
    contraction_layout(so, wgmma_tma_tile(128, 128, 4), 90);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::User);
    EXPECT_NE(std::string(e.what()).find("test conv"), std::string::npos) << e.what();
  }
}

// The RGB stem (7x7 stride 2 over 4 padded channels and 8 filter columns): row-folded TMA, one
// output row of 128 pixels per CTA, 4 chunks per filter row, its own shared-memory layout.
TEST(ContractionLayout, StemIsRowFolded) {
  ContractionProblemInfo p;
  p.m = 32 * 112 * 112;
  p.n = 64;
  p.k = 7 * 8 * 4;
  p.wgmma_ok = true;
  p.tma_rowfold = true;
  p.images = 32;
  p.oh = p.ow = 112;
  const ContractionConfig cfg = choose_contraction_config(p);
  ASSERT_TRUE(cfg.rowfold) << cfg.str();
  ContractionShape s;
  s.where = "stem";
  s.is_conv = true;
  s.n = 64;
  s.oh = s.ow = 112;
  s.c = 4;
  s.s = 8;
  s.wgmma = s.tma_rowfold = true;
  s.pairs = true;
  s.tile_output = 9;  // not a GEMM-row kernel: no tile
  const ContractionLayout L = contraction_layout(s, cfg, 90);
  EXPECT_EQ(L.mainloop, Mainloop::WgmmaTma);
  EXPECT_EQ(L.loader, TmaLoader::RowFold);
  EXPECT_TRUE(L.pixel_blocks);
  EXPECT_EQ(cfg.bm, 128);
  EXPECT_EQ(L.pixel_rows, 1);
  EXPECT_EQ(L.pixel_cols, 128);
  EXPECT_EQ(L.pixel_tiles_h, 112);
  EXPECT_EQ(L.pixel_tiles_w, 1);
  EXPECT_EQ(L.rowfold_chunks, 4);
  EXPECT_EQ(L.rowfold_sub_rows, 136);  // 128 + 3 chunks, in whole 8-row groups
  // KcWgmmaWs<128, 64, 4, .., 4, 128>: A 2 slots x 136 rows x 8 (2176, padded to 2560) + B 4096
  // elements per stage, 4 stages, alignment slack and 8 barriers.
  ASSERT_EQ(cfg.bn, 64);
  ASSERT_EQ(cfg.stages, 4);
  EXPECT_EQ(L.smem_bytes, (2560 + 4096) * 4 * 2 + 1024 + 64);
  EXPECT_EQ(L.tma_store, -1);
  EXPECT_EQ(rowfold_pixel_tile(56, 128), (std::pair<int, int>{2, 64}));
}

// A transformer MLP matmul (tokens x 768 @ 768 x 3072, symbolic tokens): TMA over GEMM rows, B
// N-major; 12 N tiles run M-fast; a batched matmul's grid.z is its batch (split-K dropped).
TEST(ContractionLayout, TransformerMatmul) {
  ContractionProblemInfo p;
  p.m = 2048;
  p.m_is_estimate = true;
  p.n = 3072;
  p.k = 768;
  p.dtype = DType::BF16;
  p.wgmma_ok = p.tma_gemm = true;
  const ContractionConfig cfg = choose_contraction_config(p);
  ASSERT_TRUE(cfg.tma) << cfg.str();
  ContractionShape s;
  s.where = "mlp";
  s.n = 3072;
  s.wgmma = s.tma_gemm = true;
  s.pairs = true;
  const ContractionLayout L = contraction_layout(s, cfg, 90);
  EXPECT_EQ(L.loader, TmaLoader::GemmRows);
  EXPECT_EQ(L.tiles_n, 3072 / cfg.bn);
  EXPECT_FALSE(L.n_fast);
  EXPECT_TRUE(L.tile_eligible);
  // N = 768 in 128-wide tiles: 6 of them, N fastest in a 1-D grid.
  s.n = 768;
  const ContractionLayout L2 = contraction_layout(s, wgmma_tma_tile(128, 128, 4), 90);
  EXPECT_EQ(L2.tiles_n, 6);
  EXPECT_TRUE(L2.n_fast);
  // A symbolic N: M-fast, a column check, no epilogue tile.
  s.n = -1;
  const ContractionLayout L3 = contraction_layout(s, wgmma_tma_tile(128, 128, 4), 90);
  EXPECT_EQ(L3.tiles_n, 0);
  EXPECT_FALSE(L3.n_fast);
  EXPECT_FALSE(L3.cols_exact);
  EXPECT_FALSE(L3.tile_eligible);
  // Batched (attention's q @ k^T): the all-threads cp.async wgmma kernel, unsplit.
  ContractionShape b;
  b.where = "qk";
  b.batched = true;
  b.n = 197;
  b.wgmma = true;
  const ContractionLayout LB = contraction_layout(b, wgmma_tile(128, 256, 3, 4), 90);
  EXPECT_EQ(LB.mainloop, Mainloop::WgmmaCpAsync);
  EXPECT_EQ(LB.loader, TmaLoader::None);
  EXPECT_EQ(LB.cfg.split_k, 1);
  EXPECT_EQ(LB.loader_threads, LB.threads);
  EXPECT_FALSE(LB.cols_exact);
}

// Split-K: res5 3x3 512 at N = 32 gets split; the layout keeps the count (grid.z), as mma.sync
// on sm_80 does for the same problem; a warp-specialized config with split-K is an internal error.
TEST(ContractionLayout, SplitK) {
  ContractionProblemInfo p;
  p.m = 1568;
  p.n = 512;
  p.k = 4608;
  p.wgmma_ok = true;
  const ContractionConfig cfg = choose_contraction_config(p);
  ASSERT_GT(cfg.split_k, 1) << cfg.str();
  ContractionShape s;
  s.where = "res5";
  s.is_conv = true;
  s.n = 512;
  s.oh = s.ow = 7;
  s.c = 480;
  s.s = 3;
  s.wgmma = true;
  s.pairs = true;
  const ContractionLayout L = contraction_layout(s, cfg, 90);
  EXPECT_EQ(L.mainloop, Mainloop::WgmmaCpAsync);
  EXPECT_EQ(L.cfg.split_k, cfg.split_k);
  EXPECT_FALSE(L.tile_eligible);
  ContractionConfig m = choose_mma_config(p);
  m.split_k = 3;
  const ContractionLayout LM = contraction_layout(s, m, 80);
  EXPECT_EQ(LM.mainloop, Mainloop::MmaSync);
  EXPECT_EQ(LM.cfg.split_k, 3);
  EXPECT_EQ(LM.smem_bytes, m.smem_bytes());
  ContractionConfig ws = wgmma_tile(128, 128, 4, 2);
  ws.ws = true;
  EXPECT_THROW(contraction_layout(s, ws, 90), Error);
}

// sm_80 gets mma.sync (every thread loads, no sm_90a code), sm_90 wgmma; a wgmma config is
// refused for an sm_80 target. The cp.async warp-specialized kernel stores synchronously where
// an operand needs element gathers.
TEST(ContractionLayout, Sm80AndSm90) {
  const Conv cv{32, 480, 512, 14, 3, 1, 1};  // C % 64 != 0: no TMA
  const ContractionConfig c80 = choose_contraction_config(conv_info(cv, 80));
  ASSERT_EQ(c80.kind, ContractionConfig::Kind::Mma) << c80.str();
  ContractionShape s = conv_shape(cv);
  const ContractionLayout L80 = contraction_layout(s, c80, 80);
  EXPECT_EQ(L80.mainloop, Mainloop::MmaSync);
  EXPECT_FALSE(L80.arch_specific);
  EXPECT_EQ(L80.threads, (c80.bm / c80.wm) * (c80.bn / c80.wn) * 32);
  EXPECT_EQ(L80.loader_threads, L80.threads);
  EXPECT_EQ(L80.smem_bytes, c80.smem_bytes());
  const ContractionConfig c90 = choose_contraction_config(conv_info(cv, 90));
  ASSERT_EQ(c90.kind, ContractionConfig::Kind::Wgmma) << c90.str();
  const ContractionLayout L90 = contraction_layout(s, c90, 90);
  EXPECT_TRUE(L90.arch_specific);
  EXPECT_NE(L90.mainloop, Mainloop::MmaSync);
  EXPECT_THROW(contraction_layout(s, c90, 80), Error);

  ContractionConfig ws = wgmma_tile(128, 128, 4);
  ws.ws = true;
  const ContractionLayout LW = contraction_layout(s, ws, 90);
  EXPECT_EQ(LW.mainloop, Mainloop::WgmmaWarpSpecialized);
  EXPECT_EQ(LW.loader_threads, 128);
  EXPECT_EQ(LW.threads, 384);
  EXPECT_FALSE(LW.sync_stores);
  s.a_async = false;  // the C = 3 stem's scalar gather
  EXPECT_TRUE(contraction_layout(s, ws, 90).sync_stores);
}

// The epilogue tile: a TMA kernel over GEMM rows prefetches the residual's tile and stores the
// 16-bit output's by TMA where the tile fits beside the stages without costing a CTA per SM, the
// outputs store pairs and N is a static multiple of 8; KILN_SCHEDULE switches each off.
TEST(ContractionLayout, PrefetchAndTmaStoreFitRules) {
  const Conv cv{32, 256, 256, 14, 1, 1, 0};
  ContractionShape s = conv_shape(cv);
  s.residual = 5;
  s.tile_output = 7;
  const ContractionConfig c = wgmma_tma_tile(128, 128, 4);
  const ContractionLayout L = contraction_layout(s, c, 90);
  EXPECT_TRUE(L.tile_eligible);
  EXPECT_EQ(L.residual, 5);
  EXPECT_EQ(L.tma_store, 7);
  EXPECT_EQ(L.stage_bytes, 132096);  // 4 x 32 KB stages + 64 bytes of barriers, in whole KB
  EXPECT_EQ(L.tile_bytes, 128 * 128 * 2);
  EXPECT_EQ(L.smem_bytes, 1024 + 132096 + 32768 + 8);
  EXPECT_EQ(ctas_per_sm(L.smem_bytes), ctas_per_sm(c.smem_bytes()));

  ContractionShape off = s;
  off.prefetch_allowed = false;
  const ContractionLayout LP = contraction_layout(off, c, 90);
  EXPECT_EQ(LP.residual, -1);
  EXPECT_EQ(LP.tma_store, 7);
  EXPECT_EQ(LP.smem_bytes, L.smem_bytes);
  off.tma_store_allowed = false;
  const ContractionLayout LN = contraction_layout(off, c, 90);
  EXPECT_FALSE(LN.tile_in_smem());
  EXPECT_EQ(LN.smem_bytes, c.smem_bytes());

  // 128 x 64 at 4 stages fits two CTAs per SM; with the tile only one: no tile.
  const ContractionLayout LS = contraction_layout(s, wgmma_tma_tile(128, 64, 4), 90);
  EXPECT_TRUE(LS.tile_eligible);
  EXPECT_FALSE(LS.tile_in_smem());
  EXPECT_EQ(ctas_per_sm(wgmma_tma_tile(128, 64, 4).smem_bytes()), 2);
  // 128 x 256 at 4 stages leaves no room for a 64 KB tile.
  EXPECT_FALSE(contraction_layout(s, wgmma_tma_tile(128, 256, 4), 90).tile_in_smem());
  EXPECT_TRUE(contraction_layout(s, wgmma_tma_tile(128, 256, 3), 90).tile_in_smem());
  // Outputs that cannot store pairs, or N not a multiple of 8: no tile.
  ContractionShape np = s;
  np.pairs = false;
  EXPECT_FALSE(contraction_layout(np, c, 90).tile_in_smem());
  ContractionShape n196 = s;
  n196.n = 196;
  EXPECT_FALSE(contraction_layout(n196, c, 90).tile_eligible);
}
