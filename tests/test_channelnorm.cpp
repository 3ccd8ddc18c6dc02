// ChannelNorm schedule choice (codegen/emit_channelnorm.cpp): the split path (statistics + apply
// kernels) for NHWC inputs with static channels and spatial size, the sm_90 cluster path and the
// per-group kernel through channelnorm.algo or where the split one does not fit; every kernel
// compiles with NVRTC.
// Numerics run in tests/gpu/test_ops_gpu.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "codegen/nvrtc.hpp"
#include "engine/ir/graph_key.hpp"
#include "engine/planner/plan.hpp"
#include "heuristics/channelnorm_layout.hpp"
#include "heuristics/schedule.hpp"
#include "kiln/error.hpp"
#include "kiln/graph.hpp"

namespace kiln {
namespace {

Tensor cst(Graph& g, const std::string& name, DType t, Shape s) {
  TensorDesc d;
  d.dtype = t;
  d.shape = std::move(s);
  return g.constant_random(name, d, "uniform", 0.5, 1.5, 3);
}

std::vector<KernelSpec> kernels(const Graph& g, int sm, const std::string& schedule = "") {
  CodegenOptions co;
  co.sm = sm;
  co.schedule = parse_schedule_overrides(schedule);
  return generate_kernels(g, plan_fusion(g), co);
}
KernelSpec only_kernel(const Graph& g, int sm, const std::string& schedule = "") {
  std::vector<KernelSpec> ks = kernels(g, sm, schedule);
  EXPECT_EQ(ks.size(), 1u);
  return ks.at(0);
}

void expect_compiles(const KernelSpec& k, int sm) {
  try {
    NvrtcResult r = nvrtc_compile(k.source, k.name, fmt::format("sm_{}", sm));
    EXPECT_FALSE(r.cubin.empty()) << k.name;
  } catch (const Error& e) {
    ADD_FAILURE() << k.name << ": " << e.what();
  }
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
int counters_args(const KernelSpec& k) {
  int n = 0;
  for (const KernelArg& a : k.args) n += a.kind == KernelArg::Kind::Counters;
  return n;
}

TEST(ChannelNorm, SplitScheduleChoice) {
  // The benchmark shape: 40 vectors per pixel, 320 threads (8 pixels a row), eight vectors each:
  // 40 KB chunks, four per CTA, 16 CTAs per sample.
  ChannelNormSplit s = choose_channelnorm_split(320, 32, 64 * 64, 8, 1, false, 90);
  ASSERT_TRUE(s.ok);
  EXPECT_EQ(s.threads, 320);
  EXPECT_EQ(s.vecs, 8);
  EXPECT_EQ(s.iters, 4);
  EXPECT_EQ(s.ctas, 16);
  EXPECT_EQ(s.ctas_per_sm, 2);  // 96 registers x 320 threads
  EXPECT_FALSE(s.tail);
  EXPECT_EQ(s.workspace_floats, 16 * 32 * 2 + 2 * 32);
  ChannelNormSplit o = choose_channelnorm_split(
      320, 32, 64 * 64, 8, 1, false, 90,
      parse_schedule_overrides("channelnorm.vecs=4,channelnorm.threads=200,channelnorm.iters=1"));
  ASSERT_TRUE(o.ok);
  EXPECT_EQ(o.threads, 160);  // rounded down to whole warps of whole pixel rows
  EXPECT_EQ(o.vecs, 4);
  EXPECT_EQ(o.iters, 1);
  EXPECT_EQ(o.ctas, 256);
  EXPECT_EQ(choose_channelnorm_split(320, 32, 64 * 64, 8, 1, false, 90,
                                     parse_schedule_overrides("channelnorm.vecs=4"))
                .ctas_per_sm,
            2);  // 72 registers (at four per CTA the launch bounds make it spill)
  // No residency limit: any image size, the CTA count grows with it.
  ChannelNormSplit big = choose_channelnorm_split(320, 32, 256 * 256, 8, 1, false, 90);
  ASSERT_TRUE(big.ok);
  EXPECT_EQ(big.ctas, 256);
  // Two register-held inputs (a prologue add): four vectors each.
  EXPECT_EQ(choose_channelnorm_split(320, 32, 64 * 64, 8, 2, true, 90).vecs, 4);
  // Tiny samples: one CTA, no idle warps beyond the unit; channels not a multiple of the vector
  // (threads * 8 a multiple of 12); elements not a multiple of the vector: no.
  ChannelNormSplit tiny = choose_channelnorm_split(320, 32, 2, 8, 1, false, 80);
  ASSERT_TRUE(tiny.ok);
  EXPECT_EQ(tiny.threads, 160);
  EXPECT_EQ(tiny.vecs, 1);
  EXPECT_EQ(tiny.ctas, 1);
  ChannelNormSplit odd = choose_channelnorm_split(12, 4, 24 * 40, 8, 2, true, 90);
  ASSERT_TRUE(odd.ok);
  EXPECT_EQ(odd.threads * 8 % 12, 0);
  EXPECT_FALSE(choose_channelnorm_split(12, 4, 35, 8, 1, false, 90).ok);
  EXPECT_FALSE(choose_channelnorm_split(320, 32, 64 * 64, 8, 1, false, 75).ok);
}

// The layout as a pure function of the problem: the form the rule takes and its geometry.
ChannelNormProblem gn_problem(int64_t batch, int64_t c, int64_t groups, int64_t s) {
  ChannelNormProblem p;
  p.batch = batch;
  p.channels = c;
  p.groups = groups;
  p.spatial = s;
  p.elem_bytes = 2;
  p.vec = 8;
  p.dense = true;
  p.vector_inputs = 1;
  return p;
}

TEST(ChannelNorm, LayoutClusterGeometry) {
  // The benchmark shape with a dynamic batch: clusters of 8 CTAs per (n, 80 channels), each CTA
  // 512 pixels x 10 vectors per pixel in 32 rows, the whole slice in shared memory.
  const ChannelNormTarget h200;
  ChannelNormLayout l = choose_channelnorm_layout(gn_problem(-1, 320, 32, 64 * 64), h200);
  ASSERT_EQ(l.form, ChannelNormForm::Cluster);
  const ChannelNormCluster& c = l.cluster;
  EXPECT_FALSE(c.one_wave);
  EXPECT_EQ(c.cluster, 8);
  EXPECT_EQ(c.block_channels, 80);  // 160 bytes per pixel: whole sectors
  EXPECT_EQ(c.blocks, 4);
  EXPECT_EQ(c.block_groups, 8);
  EXPECT_EQ(c.vecs_per_pixel, 10);
  EXPECT_EQ(c.lane_groups, 2);  // 8 lanes of 10-channel groups span at most two
  EXPECT_EQ(c.pixels, 512);
  EXPECT_EQ(c.rows, 32);
  EXPECT_EQ(c.threads, 320);
  EXPECT_EQ(c.iters, 16);
  EXPECT_EQ(c.smem_iters, 16);
  EXPECT_EQ(c.copy_groups, 4);
  EXPECT_EQ(c.copy_group_iters, 4);
  EXPECT_EQ(c.ctas_per_sm, 2);
  EXPECT_EQ(c.data_bytes, 512 * 80 * 2);
  EXPECT_EQ(c.smem_bytes, 512 * 80 * 2 + 2 * 320 * 2 * 4);
  // Instancenorm (one channel per group): each lane its own group.
  EXPECT_EQ(choose_channelnorm_layout(gn_problem(-1, 64, 64, 6 * 6), h200).cluster.lane_groups, 8);
  // The overrides: channels per cluster, CTAs per cluster; a slice budget no cluster size meets
  // leaves the cluster form to the next one (split).
  ChannelNormLayout o = choose_channelnorm_layout(
      gn_problem(-1, 320, 32, 64 * 64), h200,
      parse_schedule_overrides("channelnorm.cb=40,channelnorm.cluster=4"));
  ASSERT_EQ(o.form, ChannelNormForm::Cluster);
  EXPECT_EQ(o.cluster.block_channels, 40);
  EXPECT_EQ(o.cluster.vecs_per_pixel, 5);
  EXPECT_EQ(o.cluster.cluster, 4);
  EXPECT_EQ(o.cluster.pixels, 1024);
  EXPECT_EQ(choose_channelnorm_layout(gn_problem(-1, 320, 32, 64 * 64), h200,
                                      parse_schedule_overrides("channelnorm.slice_kb=40"))
                .form,
            ChannelNormForm::Split);
}

TEST(ChannelNorm, LayoutOneWave) {
  const ChannelNormTarget h200;
  // A known batch of 16: 512 CTAs of the cluster-of-8 form would run in 2.13 waves; clusters of
  // two, one 640-thread CTA per SM, half of the 32 iterations in shared memory.
  ChannelNormLayout l = choose_channelnorm_layout(gn_problem(16, 320, 32, 64 * 64), h200);
  ASSERT_EQ(l.form, ChannelNormForm::ClusterOneWave);
  EXPECT_TRUE(l.cluster.one_wave);
  EXPECT_EQ(l.cluster.cluster, 2);
  EXPECT_EQ(l.cluster.threads, 640);
  EXPECT_EQ(l.cluster.rows, 64);
  EXPECT_EQ(l.cluster.iters, 32);
  EXPECT_EQ(l.cluster.smem_iters, 16);
  EXPECT_EQ(l.cluster.ctas_per_sm, 1);
  EXPECT_EQ(l.cluster.data_bytes, 16 * 640 * 16);
  // Not where the re-read half would take more than half the L2, nor on fewer SMs than the
  // clusters' CTAs, nor for a small batch (one wave already), nor under channelnorm.onewave=2.
  ChannelNormTarget small_l2 = h200;
  small_l2.l2_bytes = int64_t{32} << 20;
  EXPECT_EQ(choose_channelnorm_layout(gn_problem(16, 320, 32, 64 * 64), small_l2).form,
            ChannelNormForm::Cluster);
  ChannelNormTarget few_sms = h200;
  few_sms.sm_count = 100;
  EXPECT_EQ(choose_channelnorm_layout(gn_problem(16, 320, 32, 64 * 64), few_sms).form,
            ChannelNormForm::Cluster);
  EXPECT_EQ(choose_channelnorm_layout(gn_problem(2, 320, 32, 64 * 64), h200).form,
            ChannelNormForm::Cluster);
  EXPECT_EQ(choose_channelnorm_layout(gn_problem(16, 320, 32, 64 * 64), h200,
                                      parse_schedule_overrides("channelnorm.onewave=2"))
                .form,
            ChannelNormForm::Cluster);
  // Forced on: any batch, the dynamic one included.
  EXPECT_EQ(choose_channelnorm_layout(gn_problem(-1, 320, 32, 64 * 64), h200,
                                      parse_schedule_overrides("channelnorm.onewave=1"))
                .form,
            ChannelNormForm::ClusterOneWave);
}

TEST(ChannelNorm, LayoutFormOrder) {
  const ChannelNormTarget h200;
  ChannelNormTarget a100 = h200;
  a100.sm = 80;
  const ChannelNormProblem p = gn_problem(-1, 320, 32, 64 * 64);
  // sm_90: cluster; sm_80: split (no clusters); split and per-group by channelnorm.algo.
  EXPECT_EQ(choose_channelnorm_layout(p, h200).form, ChannelNormForm::Cluster);
  ChannelNormLayout s = choose_channelnorm_layout(p, a100);
  ASSERT_EQ(s.form, ChannelNormForm::Split);
  EXPECT_EQ(s.split.threads, 320);
  EXPECT_EQ(s.split.ctas, 16);
  EXPECT_EQ(
      choose_channelnorm_layout(p, h200, parse_schedule_overrides("channelnorm.algo=split")).form,
      ChannelNormForm::Split);
  ChannelNormLayout pg =
      choose_channelnorm_layout(p, h200, parse_schedule_overrides("channelnorm.algo=pergroup"));
  EXPECT_EQ(pg.form, ChannelNormForm::PerGroup);
  EXPECT_EQ(pg.pergroup_threads, 512);  // groups of 40960 elements
  // A prologue: never the cluster form; the split one where it fits.
  ChannelNormProblem pro = p;
  pro.prologue = true;
  EXPECT_EQ(choose_channelnorm_layout(pro, h200).form, ChannelNormForm::Split);
  // channelnorm.algo=cluster falls back to the forms after it only: per-group.
  EXPECT_EQ(
      choose_channelnorm_layout(pro, h200, parse_schedule_overrides("channelnorm.algo=cluster"))
          .form,
      ChannelNormForm::PerGroup);
  // Not dense channels-last (NCHW, a symbolic spatial size): per-group, small groups at 128
  // threads.
  ChannelNormProblem nchw = gn_problem(-1, 64, 8, 8 * 8);
  nchw.dense = false;
  ChannelNormLayout n = choose_channelnorm_layout(nchw, h200);
  EXPECT_EQ(n.form, ChannelNormForm::PerGroup);
  EXPECT_EQ(n.pergroup_threads, 128);
  nchw.spatial = -1;
  EXPECT_EQ(choose_channelnorm_layout(nchw, h200).pergroup_threads, 512);
  // Channels not a multiple of the vector: no cluster; a sample whose elements are not a
  // multiple of it: no split either.
  EXPECT_EQ(choose_channelnorm_layout(gn_problem(-1, 12, 4, 24 * 40), h200).form,
            ChannelNormForm::Split);
  EXPECT_EQ(choose_channelnorm_layout(gn_problem(-1, 12, 4, 35), h200).form,
            ChannelNormForm::PerGroup);
}

TEST(ChannelNorm, SplitPathForNhwcGroupnorm) {
  Graph g("gn");
  Tensor x = g.input("x", DType::F16, {"N", 320, 64, 64}, Layout::NHWC);
  Tensor y = g.groupnorm(x, 32, cst(g, "s", DType::F16, {320}), cst(g, "b", DType::F16, {320}));
  g.output(g.silu(y));
  // The rule on sm_90: the cluster path (measured faster); on sm_80 the split path.
  EXPECT_TRUE(has(only_kernel(g, 90).name, "_cluster8")) << only_kernel(g, 90).name;
  for (int sm : {80, 90}) {
    // Two kernels, statistics then apply, sharing the workspace; the statistics kernel's last
    // CTA per sample finalizes (one self-resetting counter per sample).
    std::vector<KernelSpec> ks = kernels(g, sm, sm == 90 ? "channelnorm.algo=split" : "");
    ASSERT_EQ(ks.size(), 2u);
    EXPECT_EQ(ks[0].name, "channelnorm_f16_g32_split_stats_groupnorm_silu");
    EXPECT_EQ(ks[1].name, "channelnorm_f16_g32_split_apply_groupnorm_silu");
    for (const KernelSpec& k : ks) {
      EXPECT_EQ(k.block[0], 320);
      EXPECT_EQ(k.smem_bytes, 0);
      EXPECT_EQ(k.grid[0].eval({{"N", 16}}), 16 * 16);
      EXPECT_EQ(k.args[4].kind, KernelArg::Kind::Scratch);
      EXPECT_EQ(k.args[4].value.eval({{"N", 16}}), 16 * (16 * 32 * 2 + 2 * 32) * 4);
      EXPECT_TRUE(has(k.source, "kiln_cn_ld16_hint"));
      expect_compiles(k, sm);
    }
    EXPECT_EQ(counters_args(ks[0]), 1);
    EXPECT_EQ(ks[0].args.back().value.eval({{"N", 16}}), 16);
    EXPECT_EQ(counters_args(ks[1]), 0);
    EXPECT_TRUE(has(ks[0].source, "evict_last"));
    EXPECT_TRUE(has(ks[1].source, "kiln_cn_stv_hint"));
    // Statistics read the input once; apply reads it and writes the output.
    EXPECT_EQ(ks[0].bytes_moved.eval({{"N", 16}}), int64_t{16} * 320 * 64 * 64 * 2);
    EXPECT_GT(ks[1].bytes_moved.eval({{"N", 16}}), int64_t{2} * 16 * 320 * 64 * 64 * 2);
    // The L2 policies always: the statistics kernel keeps the input in L2 for the apply kernel,
    // which reads it with evict_first and stores with the same policy.
    EXPECT_TRUE(has(ks[0].source, "pol = kiln_cn_policy_evict_last()"));
    EXPECT_TRUE(has(ks[1].source, "pol = kiln_cn_policy_evict_first()"));
    EXPECT_FALSE(has(ks[1].source.substr(ks[1].source.find("extern \"C\"")), "kiln_stv("));
  }
  // channelnorm.algo reaches the other two.
  EXPECT_TRUE(has(only_kernel(g, 90, "channelnorm.algo=cluster").name, "_cluster8"));
  EXPECT_TRUE(has(only_kernel(g, 90, "channelnorm.algo=pergroup").name, "_pergroup"));
  EXPECT_TRUE(has(only_kernel(g, 80, "channelnorm.algo=cluster").name, "_pergroup"));
}

TEST(ChannelNorm, ClusterPathForNhwcGroupnorm) {
  Graph g("gn");
  Tensor x = g.input("x", DType::F16, {"N", 320, 64, 64}, Layout::NHWC);
  Tensor y = g.groupnorm(x, 32, cst(g, "s", DType::F16, {320}), cst(g, "b", DType::F16, {320}));
  g.output(g.silu(y));
  KernelSpec k = only_kernel(g, 90, "channelnorm.algo=cluster");
  EXPECT_NE(k.name.find("_g32_cluster8"), std::string::npos) << k.name;
  EXPECT_NE(k.source.find("__cluster_dims__(8, 1, 1)"), std::string::npos);
  EXPECT_EQ(k.block[0], 320);  // 10 vectors per pixel x 32 pixel rows
  // 512 pixels x 80 channels x 2 bytes, plus 320 x 2 f32 partials (two groups per thread) of d and
  // d^2.
  EXPECT_EQ(k.smem_bytes, 512 * 80 * 2 + 2 * 320 * 2 * 4);
  // The slice in four commit groups, the statistics in one pass over shifted values, one
  // cluster barrier before the stores.
  EXPECT_NE(k.source.find("kiln_cn_cp_wait<3>()"), std::string::npos);
  EXPECT_NE(k.source.find("v[l] - x0[l]"), std::string::npos);
  EXPECT_EQ(k.source.find("kiln_cn_cluster_sync();", k.source.find("kiln_cn_cluster_sync();") + 1),
            std::string::npos);
  EXPECT_FALSE(k.grid[0].is_static());
  EXPECT_EQ(k.grid[0].eval({{"N", 16}}), 16 * 4 * 8);
  expect_compiles(k, 90);
  // Not sm_90: the per-group kernel.
  KernelSpec k80 = only_kernel(g, 80, "channelnorm.algo=cluster");
  EXPECT_NE(k80.name.find("_g32_pergroup"), std::string::npos) << k80.name;
  expect_compiles(k80, 80);
}

// One wave: where the cluster rule's grid needs several waves of resident clusters and the
// batch is known, clusters of two CTAs (one per SM, 640 threads) keep half of each 2048-pixel
// slice in shared memory and read the other half again from L2 (docs/PERFORMANCE.md).
TEST(ChannelNorm, OneWaveClusterForALargeKnownBatch) {
  auto build = [](Dim n, DType dt, Shape hw) {
    Graph g("gn");
    Shape s{n, 320};
    s.insert(s.end(), hw.begin(), hw.end());
    Tensor x = g.input("x", dt, s, Layout::NHWC);
    Tensor y = g.groupnorm(x, 32, cst(g, "s", dt, {320}), cst(g, "b", dt, {320}));
    g.output(g.silu(y));
    return g;
  };
  Graph big = build(16, DType::F16, {64, 64});
  KernelSpec k = only_kernel(big, 90);
  EXPECT_EQ(k.name, "channelnorm_f16_g32_cluster2_onewave_groupnorm_silu");
  EXPECT_TRUE(has(k.source, "__cluster_dims__(2, 1, 1) __launch_bounds__(640, 1)"));
  EXPECT_EQ(k.block[0], 640);
  EXPECT_EQ(k.grid[0].eval({}), 16 * 4 * 2);  // 128 CTAs: one per SM of a 132-SM H200
  // Iterations 0..15 (64 pixel rows each) in shared memory, 16..31 from L2, plus the partials.
  EXPECT_EQ(k.smem_bytes, 16 * 640 * 16 + 2 * 640 * 2 * 4);
  // The L2 rows' statistics after the copies have landed; their stores before the shared
  // rows', four loads ahead of four stores.
  const size_t l2_stats = k.source.find("iterations 16..31: from global memory now");
  ASSERT_NE(l2_stats, std::string::npos);
  EXPECT_GT(l2_stats, k.source.find("kiln_cn_cp_wait<0>();"));
  const size_t l2_stores = k.source.find("for (int i0 = 16; i0 < 32; i0 += 4) {");
  ASSERT_NE(l2_stores, std::string::npos);
  EXPECT_LT(l2_stores, k.source.find("for (int i = 0; i < 16; ++i) {", l2_stores));
  EXPECT_TRUE(has(k.source, "kiln_unpack16(r[k], t_0, v);"));
  expect_compiles(k, 90);
  // Off by override; a batch not known at compile time; a GPU of fewer SMs; an L2 too small
  // for the re-read half: the cluster rule.
  EXPECT_EQ(only_kernel(big, 90, "channelnorm.onewave=2").name,
            "channelnorm_f16_g32_cluster8_groupnorm_silu");
  Graph dynamic = build("N", DType::F16, {64, 64});
  EXPECT_EQ(only_kernel(dynamic, 90).name, "channelnorm_f16_g32_cluster8_groupnorm_silu");
  // The Engine's hot-shape specialization binds the batch: then the one-wave form.
  EXPECT_EQ(only_kernel(specialize_graph(dynamic, {{"N", 16}}), 90).name,
            "channelnorm_f16_g32_cluster2_onewave_groupnorm_silu");
  for (int which : {0, 1}) {
    CodegenOptions co;
    co.sm = 90;
    if (which)
      co.l2_bytes = int64_t{32} << 20;
    else
      co.sm_count = 100;
    std::vector<KernelSpec> ks = generate_kernels(big, plan_fusion(big), co);
    ASSERT_EQ(ks.size(), 1u);
    EXPECT_EQ(ks[0].name, "channelnorm_f16_g32_cluster8_groupnorm_silu") << which;
  }
  // A small batch is one wave already: the cluster rule.
  EXPECT_EQ(only_kernel(build(2, DType::F16, {64, 64}), 90).name,
            "channelnorm_f16_g32_cluster8_groupnorm_silu");
  // Forced on a dynamic batch, a partial last pixel row (100 pixels per CTA, 64 per row) and
  // every dtype: it compiles, the guarded rows included.
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    KernelSpec f = only_kernel(build("N", dt, {10, 20}), 90, "channelnorm.onewave=1");
    EXPECT_TRUE(has(f.name, "_cluster2_onewave")) << f.name;
    EXPECT_TRUE(has(f.source, "if (p < 100 && i + k < 2)")) << f.name;
    expect_compiles(f, 90);
  }
  {  // two vectors per pixel row (64 channels): at most 640 threads, the registers' budget
    Graph g("gn64");
    Tensor x = g.input("x", DType::F16, {"N", 64, 64, 64}, Layout::NHWC);
    g.output(
        g.silu(g.groupnorm(x, 32, cst(g, "s", DType::F16, {64}), cst(g, "b", DType::F16, {64}))));
    KernelSpec f = only_kernel(g, 90, "channelnorm.onewave=1");
    EXPECT_TRUE(has(f.name, "_cluster2_onewave")) << f.name;
    EXPECT_LE(f.block[0], 640);
    expect_compiles(f, 90);
  }
  // Not sm_90 (no clusters): the split path.
  std::vector<KernelSpec> k80 = kernels(big, 80);
  ASSERT_EQ(k80.size(), 2u);
  EXPECT_TRUE(has(k80[0].name, "_split_stats")) << k80[0].name;
}

TEST(ChannelNorm, FallbackShapes) {
  {  // NCHW
    Graph g("gn");
    Tensor x = g.input("x", DType::F16, {"N", 320, 64, 64});
    g.output(g.groupnorm(x, 32));
    EXPECT_NE(only_kernel(g, 90).name.find("_pergroup"), std::string::npos);
  }
  {  // channels not a multiple of the vector
    Graph g("in");
    Tensor x = g.input("x", DType::BF16, {3, 7, 5, 3}, Layout::NHWC);
    g.output(g.instancenorm(x));
    EXPECT_NE(only_kernel(g, 90).name.find("_pergroup"), std::string::npos);
  }
  {  // symbolic spatial size
    Graph g("gn");
    Tensor x = g.input("x", DType::F16, {2, 64, "H", 8}, Layout::NHWC);
    g.output(g.groupnorm(x, 8));
    EXPECT_NE(only_kernel(g, 90).name.find("_pergroup"), std::string::npos);
  }
  {  // a prologue: split, and not cluster
    Graph g("gn");
    Tensor x = g.input("x", DType::F16, {2, 64, 8, 8}, Layout::NHWC);
    g.output(g.groupnorm(g.add_node1("relu", {x}), 8));
    KernelSpec k = only_kernel(g, 90, "channelnorm.algo=cluster");
    EXPECT_NE(k.name.find("_pergroup"), std::string::npos) << k.name;
    expect_compiles(k, 90);
    EXPECT_EQ(kernels(g, 90).size(), 2u);
    EXPECT_EQ(kernels(g, 80).size(), 2u);
  }
  {  // a large image: split (no residency limit), the slice too large for the cluster path
    Graph g("gn");
    Tensor x = g.input("x", DType::F16, {1, 320, 256, 256}, Layout::NHWC);
    g.output(g.groupnorm(x, 32));
    EXPECT_NE(kernels(g, 90).at(0).name.find("_split_stats"), std::string::npos);
    EXPECT_EQ(kernels(g, 90).at(0).grid[0].eval({}), 256);
    EXPECT_NE(only_kernel(g, 90, "channelnorm.algo=cluster").name.find("_pergroup"),
              std::string::npos);
  }
}

TEST(ChannelNorm, ClusterPathVariantsCompile) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    {  // instancenorm, small image: smaller clusters or one CTA
      Graph g("in");
      Tensor x = g.input("x", dt, {"N", 64, 6, 6}, Layout::NHWC);
      g.output(g.add_node1("relu", {g.instancenorm(x)}));
      KernelSpec k = only_kernel(g, 90, "channelnorm.algo=cluster");
      EXPECT_NE(k.name.find("_cluster"), std::string::npos) << k.name;
      expect_compiles(k, 90);
    }
    {  // residual epilogue reading the input, two outputs, f32 scale/bias, odd pixel count
      Graph g("gn");
      Tensor x = g.input("x", dt, {2, 96, 15, 9}, Layout::NHWC);
      Tensor y = g.groupnorm(x, 3, cst(g, "s", DType::F32, {96}), cst(g, "b", DType::F32, {96}));
      g.output(y);
      g.output(g.add_node1("add", {y, x}));
      KernelSpec k = only_kernel(g, 90, "channelnorm.algo=cluster");
      EXPECT_NE(k.name.find("_cluster"), std::string::npos) << k.name;
      expect_compiles(k, 90);
    }
  }
}

// Every split variant compiles for sm_80 and sm_90: dtypes, groupnorm / instancenorm, with and
// without a prologue (and prologue outputs), an epilogue reading the input, one CTA or several
// per sample, a partial last chunk, channels not a multiple of the vector, symbolic N.
TEST(ChannelNorm, SplitPathVariantsCompile) {
  struct Variant {
    std::string what;
    std::function<void(Graph&, DType)> build;
    bool several_ctas;
  };
  const std::vector<Variant> variants = {
      {"groupnorm silu, N symbolic, 9x7 (2 CTAs, partial)",
       [](Graph& g, DType dt) {
         Tensor x = g.input("x", dt, {"N", 320, 9, 7}, Layout::NHWC);
         g.output(g.silu(g.groupnorm(x, 32, cst(g, "s", dt, {320}), cst(g, "b", dt, {320}))));
       },
       true},
      {"groupnorm, 1x2 image (1 CTA)",
       [](Graph& g, DType dt) {
         Tensor x = g.input("x", dt, {"N", 320, 1, 2}, Layout::NHWC);
         g.output(g.groupnorm(x, 32, cst(g, "s", DType::F32, {320}), cst(g, "b", dt, {320})));
       },
       false},
      {"instancenorm, prologue (mul per channel, also an output), relu",
       [](Graph& g, DType dt) {
         Tensor x = g.input("x", dt, {2, 24, 33, 17}, Layout::NHWC);
         Tensor p = g.mul(x, cst(g, "c", dt, {24, 1, 1}));
         g.output(g.relu(g.instancenorm(p)));
         g.output(p);
       },
       true},
      {"groupnorm of add (two dense inputs), residual epilogue, 12 channels",
       [](Graph& g, DType dt) {
         Tensor x = g.input("x", dt, {"N", 12, 24, 40}, Layout::NHWC);
         Tensor r = g.input("r", dt, {"N", 12, 24, 40}, Layout::NHWC);
         Tensor y = g.groupnorm(g.add_node1("add", {x, r}), 4);
         g.output(g.add_node1("add", {y, x}));
       },
       true},
  };
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (const Variant& v : variants) {
      Graph g("cn");
      v.build(g, dt);
      for (int sm : {80, 90}) {
        // The rules (mostly one CTA per sample at these sizes), and one vector per thread
        // (several CTAs per sample, the last partial).
        for (const char* spec : {"channelnorm.algo=split",
                                 "channelnorm.algo=split,channelnorm.vecs=1,channelnorm.iters=3"}) {
          std::vector<KernelSpec> ks = kernels(g, sm, spec);
          ASSERT_EQ(ks.size(), 2u);
          SCOPED_TRACE(
              fmt::format("{} {} sm_{} '{}': {}", v.what, dtype_name(dt), sm, spec, ks[0].name));
          EXPECT_TRUE(has(ks[0].name, "_split_stats"));
          EXPECT_TRUE(has(ks[1].name, "_split_apply"));
          if (has(spec, "vecs=1")) EXPECT_EQ(counters_args(ks[0]), v.several_ctas ? 1 : 0);
          for (const KernelSpec& k : ks) expect_compiles(k, sm);
        }
      }
    }
}

}  // namespace
}  // namespace kiln
