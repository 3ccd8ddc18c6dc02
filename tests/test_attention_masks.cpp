// Masked, grouped-query and symbolic-shape attention: what the planner fuses into one Attention
// group (engine/planner/attention_pattern.hpp), the kernel's layout rule, the kernel names, and
// every kernel variant compiling with NVRTC for sm_80, sm_90 and sm_90a.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "codegen/kernel_spec.hpp"
#include "codegen/nvrtc.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/attention_pattern.hpp"
#include "engine/planner/plan.hpp"
#include "heuristics/attention_layout.hpp"
#include "heuristics/schedule.hpp"
#include "kiln/error.hpp"
#include "tests/attention_masks.hpp"
#include "tests/golden_file.hpp"
#include "tests/test_paths.hpp"

namespace kiln {
namespace {

using test::MaskCase;
using test::MaskKind;

struct Planned {
  std::shared_ptr<const Graph> g;
  Plan plan;
  const FusionGroup* attention = nullptr;
  int groups = 0;
};

Planned plan_of(const Graph& src, int sm = 90) {
  Planned p;
  p.g = apply_engine_passes(std::make_shared<const Graph>(src), true);
  PlanOptions po;
  po.sm = sm;
  p.plan = plan_fusion(*p.g, po);
  for (const FusionGroup& grp : p.plan.groups) {
    ++p.groups;
    if (grp.kind == GroupKind::Attention) p.attention = &grp;
  }
  return p;
}

std::vector<KernelSpec> kernels_of(const Planned& p, int sm) {
  CodegenOptions co;
  co.sm = sm;
  return generate_kernels(*p.g, p.plan, co);
}

// What the Engine builds on an H200 (sm_90a kernels allowed), under `schedule`.
std::vector<KernelSpec> hopper_kernels_of(const Planned& p, const std::string& schedule = "") {
  CodegenOptions co;
  co.sm = 90;
  co.arch_specific = true;
  co.schedule = parse_schedule_overrides(schedule);
  return generate_kernels(*p.g, p.plan, co);
}

// The one fused attention kernel of a plan's kernels.
const KernelSpec* attention_kernel(const std::vector<KernelSpec>& ks) {
  const KernelSpec* found = nullptr;
  for (const KernelSpec& k : ks)
    if (k.name.rfind("attention_", 0) == 0) {
      EXPECT_EQ(found, nullptr) << "two attention kernels: " << k.name;
      found = &k;
    }
  return found;
}

MaskCase key_padding(DType mdt = DType::F32) {
  MaskCase c;
  c.name = "keypad";
  c.mask = MaskKind::AddInput;
  c.mask_shape = {Dim("N"), Dim(1), Dim(1), Dim("S")};
  c.mask_dtype = mdt;
  return c;
}

// Every masked form is one Attention group holding the mask step, the only kernel of the graph.
TEST(AttentionMasks, EveryMaskFormIsOneGroup) {
  std::vector<MaskCase> cases;
  cases.push_back(key_padding());
  MaskCase c = key_padding(DType::F16);
  c.name = "keypad_f16_add_first";
  c.add_first = true;
  cases.push_back(c);
  c = key_padding(DType::BF16);
  c.name = "causal_shape";
  c.mask_shape = {Dim("S"), Dim("S")};
  cases.push_back(c);
  c.name = "full";
  c.mask_shape = {Dim("N"), Dim(2), Dim("S"), Dim("S")};
  cases.push_back(c);
  c = MaskCase{};
  c.name = "where_input";
  c.mask = MaskKind::WhereInput;
  c.mask_shape = {Dim("N"), Dim(1), Dim("S"), Dim("S")};
  c.fill = -3.4028234663852886e38;
  cases.push_back(c);
  for (const MaskCase& mc : cases) {
    SCOPED_TRACE(mc.name);
    Planned p = plan_of(test::mask_graph(mc));
    ASSERT_NE(p.attention, nullptr) << plan_to_string(*p.g, p.plan);
    EXPECT_EQ(p.groups, 1) << plan_to_string(*p.g, p.plan);
    EXPECT_EQ(p.attention->nodes.size(), 5u);  // matmul, mul, add / where, softmax, matmul
    const AttentionChain& ch = *p.attention->attention;
    ASSERT_EQ(ch.steps.size(), 2u);
    EXPECT_FALSE(ch.causal);
    const ScoreStep& m = ch.steps[mc.add_first ? 0 : 1];
    EXPECT_EQ(m.kind,
              mc.mask == MaskKind::AddInput ? ScoreStep::Kind::AddMask : ScoreStep::Kind::Where);
    EXPECT_EQ(m.tensor, p.g->find(mc.mask == MaskKind::AddInput ? "mask" : "cond"));
    ASSERT_EQ(m.strides.size(), 4u);
    // Broadcast dims read with stride 0; the key stride is 1.
    EXPECT_EQ(m.strides[3], Dim(1));
    if (mc.mask_shape.size() == 4 && mc.mask_shape[1] == Dim(1)) {
      EXPECT_EQ(m.strides[1], Dim(0));
    }
    if (mc.mask_shape.size() == 2) {
      EXPECT_EQ(m.strides[0], Dim(0));
    }
    if (mc.mask_shape.size() == 4 && mc.mask_shape[2] == Dim(1)) {
      EXPECT_EQ(m.strides[2], Dim(0));
    }
    std::vector<KernelSpec> ks = kernels_of(p, 90);
    ASSERT_EQ(ks.size(), 1u);
    const std::string suffix = mc.mask == MaskKind::AddInput ? "_maskadd" : "_maskbool";
    EXPECT_EQ(ks[0].name, fmt::format("attention_{}_d64_q64{}", dtype_name(mc.dt), suffix));
  }
}

// Causal masks (constant, trilu of all-true, masked_fill's inverted form, an additive triu of
// -inf) are recognised: the kernel computes them from indices and reads no mask.
TEST(AttentionMasks, CausalFormsNeedNoMaskTensor) {
  struct C {
    MaskKind kind;
    int64_t k;
    int64_t offset;
  };
  for (C cc : {C{MaskKind::WhereConst, 0, 0}, C{MaskKind::WhereConst, 2, 2},
               C{MaskKind::WhereTrilu, 0, 0}, C{MaskKind::WhereTrilu, -1, -1},
               C{MaskKind::MaskedFill, 0, 0}, C{MaskKind::AddCausal, 0, 0}}) {
    MaskCase c;
    c.name = fmt::format("causal{}_{}", static_cast<int>(cc.kind), cc.k);
    c.mask = cc.kind;
    c.sq = c.sk = Dim(77);
    c.causal_k = cc.k;
    SCOPED_TRACE(c.name);
    Planned p = plan_of(test::mask_graph(c));
    ASSERT_NE(p.attention, nullptr) << plan_to_string(*p.g, p.plan);
    const AttentionChain& ch = *p.attention->attention;
    EXPECT_TRUE(ch.causal);
    EXPECT_EQ(ch.causal_offset, cc.offset);
    for (const ScoreStep& s : ch.steps) EXPECT_EQ(s.tensor, -1);
    std::vector<KernelSpec> ks = kernels_of(p, 80);
    bool found = false;
    for (const KernelSpec& k : ks) found |= k.name == "attention_f16_d64_q64_causal_s77x77";
    EXPECT_TRUE(found);
  }
  // A fill that is not a large negative value is a real where: read, never skipped.
  MaskCase c;
  c.name = "small_fill";
  c.mask = MaskKind::WhereConst;
  c.sq = c.sk = Dim(40);
  c.fill = -1.0;
  Planned p = plan_of(test::mask_graph(c));
  ASSERT_NE(p.attention, nullptr) << plan_to_string(*p.g, p.plan);
  EXPECT_FALSE(p.attention->attention->causal);
  EXPECT_GE(p.attention->attention->steps.back().tensor, 0);
}

// Sliding windows (a band of the diagonal: window_k <= j - i <= causal_k) as a constant bool,
// an `and` of two trilus of all-true, and a sum of two additive trilus of -inf; a band without
// an upper edge is a window alone. The kernel computes them from indices and reads no mask.
TEST(AttentionMasks, SlidingWindowFormsNeedNoMaskTensor) {
  struct C {
    MaskKind kind;
    int64_t causal_k, window_k;
    bool causal;
  };
  for (C cc : {C{MaskKind::WindowConst, 0, -15, true}, C{MaskKind::WindowConst, 2, -3, true},
               C{MaskKind::WindowConst, 1000, -7, false}, C{MaskKind::WindowTrilu, 0, -31, true},
               C{MaskKind::WindowTrilu, -1, -8, true}, C{MaskKind::WindowAdd, 0, -20, true}}) {
    MaskCase c;
    c.name = fmt::format("window{}_{}_{}", static_cast<int>(cc.kind), cc.causal_k, cc.window_k);
    c.mask = cc.kind;
    c.sq = c.sk = Dim(77);
    c.causal_k = cc.causal_k;
    c.window_k = cc.window_k;
    SCOPED_TRACE(c.name);
    Planned p = plan_of(test::mask_graph(c));
    ASSERT_NE(p.attention, nullptr) << plan_to_string(*p.g, p.plan);
    EXPECT_EQ(p.groups, 1) << plan_to_string(*p.g, p.plan);
    const AttentionChain& ch = *p.attention->attention;
    EXPECT_EQ(ch.causal, cc.causal);
    if (cc.causal) {
      EXPECT_EQ(ch.causal_offset, cc.causal_k);
    }
    EXPECT_TRUE(ch.window);
    EXPECT_EQ(ch.window_offset, cc.window_k);
    for (const ScoreStep& s : ch.steps) EXPECT_EQ(s.tensor, -1);
    const std::string want =
        fmt::format("attention_f16_d64_q64{}_window_s77x77", cc.causal ? "_causal" : "");
    bool found = false;
    for (const KernelSpec& k : kernels_of(p, 80)) found |= k.name == want;
    EXPECT_TRUE(found) << want;
  }
  // Not a band: kept where either trilu keeps (an `or` of kept conditions) is read as a mask.
  Graph g("not_a_band");
  MaskCase c;
  c.sq = c.sk = Dim(40);
  Tensor q = g.input("q", DType::F16, {Dim(2), Dim(40), Dim(64)});
  Tensor k = g.input("k", DType::F16, {Dim(2), Dim(40), Dim(64)});
  Tensor v = g.input("v", DType::F16, {Dim(2), Dim(40), Dim(64)});
  Tensor all = g.expand(test::scalar(g, "yes", DType::Bool, 1.0), {Dim(40), Dim(40)});
  Tensor either = g.add_node1("or", {g.trilu(all, false, -5), g.trilu(all, true, 5)});
  Tensor sc = g.add_node1("matmul", {q, k}, {{"transpose_b", int64_t{1}}});
  sc = g.where(either, sc, test::scalar(g, "fill", DType::F16, -INFINITY));
  g.output(g.add_node1("matmul", {g.softmax(sc, -1), v}));
  Planned pl = plan_of(g);
  ASSERT_NE(pl.attention, nullptr) << plan_to_string(*pl.g, pl.plan);
  EXPECT_FALSE(pl.attention->attention->causal);
  EXPECT_FALSE(pl.attention->attention->window);
  EXPECT_GE(pl.attention->attention->steps.back().tensor, 0);
}

// K / V with fewer heads (a broadcast dim of size 1) are read with stride 0; a K batch dim that
// neither equals Q's nor is 1 is not attention.
TEST(AttentionMasks, GroupedQueryHeadsBroadcast) {
  MaskCase c;
  c.name = "gqa";
  c.q_batch = {Dim("N"), Dim(2), Dim(4)};
  c.kv_batch = {Dim("N"), Dim(2), Dim(1)};
  Planned p = plan_of(test::mask_graph(c));
  ASSERT_NE(p.attention, nullptr) << plan_to_string(*p.g, p.plan);
  const AttentionChain& ch = *p.attention->attention;
  EXPECT_EQ(ch.k_strides[2], Dim(0));
  EXPECT_EQ(ch.v_strides[2], Dim(0));
  EXPECT_FALSE(ch.q_strides[2] == Dim(0));
  EXPECT_TRUE(ch.kv_broadcast());
  EXPECT_EQ(kernels_of(p, 90).at(0).name, "attention_f16_d64_q64_gqa");
  c.kv_batch = {Dim("N"), Dim(1), Dim(1)};  // multi-query: one K / V head
  p = plan_of(test::mask_graph(c));
  ASSERT_NE(p.attention, nullptr);
  EXPECT_EQ(p.attention->attention->k_strides[1], Dim(0));
}

// Symbolic batch and lengths, query and key lengths that differ: strides are symbolic kernel
// parameters, so the fused kernel is chosen for static and symbolic shapes alike.
TEST(AttentionMasks, SymbolicLengthsThatDiffer) {
  MaskCase c = key_padding();
  c.sq = Dim("Sq");
  c.sk = Dim("Sk");
  c.mask_shape = {Dim("N"), Dim(1), Dim(1), Dim("Sk")};
  Planned p = plan_of(test::mask_graph(c));
  ASSERT_NE(p.attention, nullptr) << plan_to_string(*p.g, p.plan);
  const AttentionChain& ch = *p.attention->attention;
  EXPECT_FALSE(ch.q_strides[0].is_static());  // 2 * Sq * 64
  EXPECT_EQ(ch.q_strides[2], Dim(64));
  std::vector<KernelSpec> ks = kernels_of(p, 90);
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].name, "attention_f16_d64_q64_maskadd");
  EXPECT_EQ(ks[0].grid[0].str(), ((Dim("Sq") + Dim(63)) / Dim(64) * Dim("N") * Dim(2)).str());
}

// Head dims: any multiple of 8 up to 256 is fused; others are the two matmuls.
TEST(AttentionMasks, HeadDims) {
  for (int64_t d : {8, 16, 40, 64, 80, 96, 128, 160, 200, 256, 12, 264, 4}) {
    MaskCase c;
    c.name = fmt::format("d{}", d);
    c.d = d;
    Planned p = plan_of(test::mask_graph(c));
    EXPECT_EQ(p.attention != nullptr, d % 8 == 0 && d <= 256) << d;
  }
  // Not taken: f32, below sm_80, the scores (or the masked scores) also a graph output.
  MaskCase c = key_padding();
  c.dt = DType::F32;
  EXPECT_EQ(plan_of(test::mask_graph(c)).attention, nullptr);
  EXPECT_EQ(plan_of(test::mask_graph(key_padding()), 75).attention, nullptr);
  Graph g = test::mask_graph(key_padding());
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Add) g.output(Tensor{n.outputs[0]});
  EXPECT_EQ(plan_of(g).attention, nullptr);
}

// The imported BERT / GPT-2 form with a symbolic S: the head splits stay transposes (copies,
// their strides are symbolic); the attention group takes them in and reads their inputs through
// permuted strides, and writes O through the heads merge's strides: no transpose is copied. The
// separate q, k, v projections are one (engine/passes/sibling_matmuls.cpp): each operand is also
// a slice of its row of 3 H D elements.
TEST(AttentionMasks, ImportedSymbolicAttentionReadsHeadSplitsInPlace) {
  for (DType dt : {DType::F16, DType::BF16}) {
    Planned p = plan_of(test::imported_attention(dt, 2, 32));
    ASSERT_NE(p.attention, nullptr) << plan_to_string(*p.g, p.plan);
    const AttentionChain& ch = *p.attention->attention;
    // the head splits' slices, reshapes and transposes, and the heads merge's transpose
    EXPECT_EQ(ch.operand_views.size(), 10u);
    EXPECT_EQ(p.attention->nodes.size(),
              10u + 5u);  // those 10, matmul, mul, add, softmax, matmul
    ASSERT_EQ(ch.steps.size(), 2u);
    EXPECT_EQ(ch.steps[1].kind, ScoreStep::Kind::AddMask);
    EXPECT_EQ(ch.steps[1].strides[1], Dim(0));  // one mask for every head
    EXPECT_EQ(ch.k_rows, false);                // k^T [N, H, D, S] read from [N, S, H, D]
    EXPECT_EQ(ch.k_strides.back(), Dim(192));   // a key row: the merged row, 3 H D elements on
    int transposes = 0;                         // copy kernels of transposes: none
    for (const FusionGroup& grp : p.plan.groups)
      for (int n : grp.nodes)
        transposes += grp.kind == GroupKind::Copy && p.g->nodes()[n].op == OpKind::Transpose;
    EXPECT_EQ(transposes, 0) << plan_to_string(*p.g, p.plan);
    EXPECT_EQ(ch.o_strides.back(), Dim(64));  // O written as [N, S, H, D]: a row H * D on
    for (const KernelSpec& k : kernels_of(p, 80)) {
      if (k.name.rfind("attention_", 0) != 0) continue;
      EXPECT_EQ(k.name, fmt::format("attention_{}_d32_q64_maskadd", dtype_name(dt)));
      EXPECT_FALSE(nvrtc_compile(k.source, k.name, "sm_80").cubin.empty());
    }
  }
}

// The generated part of three attention kernels (the score functor, the layout, the body) is
// pinned: the imported symbolic form (an f16 mask read with broadcast strides, head splits read
// in place), causal from a trilu, a bool where over grouped-query heads (UPDATE_GOLDEN=1
// rewrites the file).
TEST(AttentionMasks, GoldenSource) {
  MaskCase causal;
  causal.name = "causal";
  causal.mask = MaskKind::WhereTrilu;
  causal.sq = causal.sk = Dim(100);
  causal.d = 40;
  MaskCase gqa;
  gqa.name = "where_gqa";
  gqa.dt = DType::BF16;
  gqa.d = 256;
  gqa.mask = MaskKind::WhereInput;
  gqa.q_batch = {Dim("N"), Dim(2), Dim(4)};
  gqa.kv_batch = {Dim("N"), Dim(2), Dim(1)};
  gqa.sq = Dim("Sq");
  gqa.sk = Dim("Sk");
  gqa.mask_shape = {Dim("N"), Dim(1), Dim(1), Dim(1), Dim("Sk")};
  gqa.fill = -1e9;
  std::string text;
  for (const Graph& g : {test::imported_attention(DType::F16, 2, 32), test::mask_graph(causal),
                         test::mask_graph(gqa)}) {
    Planned p = plan_of(g);
    for (const KernelSpec& k : kernels_of(p, 90)) {
      if (k.name.rfind("attention_", 0) != 0) continue;
      const size_t at = k.source.find("struct KcScores");
      ASSERT_NE(at, std::string::npos) << k.name;
      text += fmt::format("// ---- {} grid=({}) block={} smem={} args={}\n", k.name,
                          k.grid[0].str(), k.block[0], k.smem_bytes, k.args.size());
      text += k.source.substr(at);
    }
  }
  test::expect_golden("attention_masks.cu", text);
}

// torch's SDPA is_causal export: the scalar muls of q and k^T fold into the scores, the
// computed where(eq(trilu(expand(1)), 0), -inf, 0) is recognised as causal over a symbolic S.
TEST(AttentionMasks, SdpaCausalExport) {
  Planned p = plan_of(test::sdpa_causal(DType::F16, 64));
  ASSERT_NE(p.attention, nullptr) << plan_to_string(*p.g, p.plan);
  const AttentionChain& ch = *p.attention->attention;
  EXPECT_TRUE(ch.causal);
  EXPECT_EQ(ch.causal_offset, 0);
  EXPECT_NEAR(ch.operand_scale, 0.125, 1e-3);  // two f16 roundings of sqrt(1/8)
  EXPECT_EQ(ch.operand_views.size(), 3u);      // q's mul, k^T's mul and transpose
  // The mask's own producers (expand, trilu, eq + where over [S, S]) join the group: nothing
  // computes the mask the kernel never reads.
  EXPECT_EQ(p.groups, 1) << plan_to_string(*p.g, p.plan);
  EXPECT_EQ(ch.band_nodes.size(), 4u);
  std::vector<KernelSpec> ks = kernels_of(p, 90);
  bool found = false;
  for (const KernelSpec& k : ks)
    if (k.name == "attention_f16_d64_q64_causal") {
      found = true;
      EXPECT_FALSE(nvrtc_compile(k.source, k.name, "sm_90a").cubin.empty());
    }
  EXPECT_TRUE(found);
}

TEST(AttentionLayout, QueryRowsKeyBlocksAndSharedMemory) {
  for (int64_t d = 8; d <= 256; d += 8) {
    AttentionLayout l = choose_attention_layout(d);
    SCOPED_TRACE(d);
    EXPECT_EQ(l.padded_dim % 16, 0);
    EXPECT_GE(l.padded_dim, d);
    EXPECT_LT(l.padded_dim - d, 16);
    EXPECT_EQ(l.query_rows, 16 * l.warps);
    EXPECT_EQ(l.key_rows, l.padded_dim <= 128 ? 64 : 32);
    EXPECT_EQ(l.q_in_registers, l.padded_dim <= 128);
    EXPECT_EQ(l.smem_bytes, (l.query_rows + 4 * l.key_rows) * (l.padded_dim + 8) * 2);
    EXPECT_LE(l.smem_bytes, 163 * 1024);  // sm_80's opt-in limit
  }
  EXPECT_EQ(choose_attention_layout(128).smem_bytes, 87040);  // unchanged from the 32..128 kernel
  EXPECT_EQ(choose_attention_layout(256).smem_bytes, 101376);
  EXPECT_EQ(choose_attention_layout(40).padded_dim, 48);
}

// Every variant (dtypes, head dims, masks, causal, GQA, symbolic) compiles with NVRTC for sm_80,
// sm_90 and sm_90a.
TEST(AttentionMasks, EveryVariantCompiles) {
  std::vector<MaskCase> cases;
  for (int64_t d : {8, 40, 64, 80, 96, 128, 160, 256}) {
    MaskCase c = key_padding(d == 40 ? DType::F16 : DType::F32);
    c.name = fmt::format("keypad_d{}", d);
    c.d = d;
    c.dt = d % 16 == 0 ? DType::BF16 : DType::F16;
    cases.push_back(c);
  }
  MaskCase c;
  c.name = "causal";
  c.mask = MaskKind::WhereTrilu;
  c.sq = c.sk = Dim(100);
  cases.push_back(c);
  c = MaskCase{};
  c.name = "where_gqa";
  c.mask = MaskKind::WhereInput;
  c.mask_shape = {Dim("N"), Dim(1), Dim(1), Dim("Sk")};
  c.q_batch = {Dim("N"), Dim(2), Dim(4)};
  c.kv_batch = {Dim("N"), Dim(2), Dim(1)};
  c.sq = Dim("Sq");
  c.sk = Dim("Sk");
  c.mask_shape = {Dim("N"), Dim(1), Dim(1), Dim(1), Dim("Sk")};
  c.dt = DType::BF16;
  c.fill = -1e9;  // an integral literal: "-998244352.0f"
  cases.push_back(c);
  c = MaskCase{};
  c.name = "plain_d256";
  c.d = 256;
  cases.push_back(c);
  c = MaskCase{};
  c.name = "window_d128";
  c.mask = MaskKind::WindowTrilu;
  c.d = 128;
  c.sq = c.sk = Dim(300);
  c.window_k = -63;
  cases.push_back(c);
  int compiled = 0;
  for (const MaskCase& mc : cases) {
    SCOPED_TRACE(mc.name);
    Planned p = plan_of(test::mask_graph(mc));
    ASSERT_NE(p.attention, nullptr) << plan_to_string(*p.g, p.plan);
    for (const char* arch : {"sm_80", "sm_90", "sm_90a"}) {
      for (const KernelSpec& k : kernels_of(p, arch[3] == '8' ? 80 : 90)) {
        if (k.name.rfind("attention_", 0) != 0) continue;
        try {
          EXPECT_FALSE(nvrtc_compile(k.source, k.name, arch).cubin.empty()) << k.name;
          ++compiled;
        } catch (const Error& e) {
          ADD_FAILURE() << arch << " " << k.name << ": " << e.what();
        }
      }
    }
  }
  EXPECT_EQ(compiled, 3 * static_cast<int>(cases.size()));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(AttentionLayout, WgmmaRule) {
  using K = AttentionKernel;
  EXPECT_EQ(choose_attention_kernel(90, true, 64, true, 4, 0), K::Wgmma);
  EXPECT_EQ(choose_attention_kernel(90, true, 128, true, 2, 0), K::Wgmma);
  EXPECT_EQ(choose_attention_kernel(90, true, 128, true, 5, 1), K::Wgmma);
  EXPECT_EQ(choose_attention_kernel(90, true, 128, true, 4, 2), K::MmaSync);   // forced
  EXPECT_EQ(choose_attention_kernel(90, false, 128, true, 4, 0), K::MmaSync);  // plain sm_90
  EXPECT_EQ(choose_attention_kernel(80, true, 64, true, 4, 0), K::MmaSync);
  EXPECT_EQ(choose_attention_kernel(89, true, 64, true, 4, 0), K::MmaSync);
  EXPECT_EQ(choose_attention_kernel(90, true, 128, false, 4, 0), K::MmaSync);  // unaligned rows
  EXPECT_EQ(choose_attention_kernel(90, true, 128, true, 6, 0), K::MmaSync);   // TMA: 5 dims
  for (int64_t d = 8; d <= 264; d += 8) {
    SCOPED_TRACE(d);
    const bool wg = d >= 64 && d <= 256;
    EXPECT_EQ(choose_attention_kernel(90, true, d, true, 4, 0) == K::Wgmma, wg);
    EXPECT_EQ(attention_wgmma_head_dim(d), wg);
  }
  EXPECT_FALSE(attention_wgmma_head_dim(100));  // rows of 200 bytes: no multiple of 8
  for (int64_t d = 64; d <= 256; d += 8) {
    const AttentionWgmmaLayout l = choose_attention_wgmma_layout(d);
    SCOPED_TRACE(d);
    EXPECT_EQ(l.padded_dim % 64, 0);
    EXPECT_GE(l.padded_dim, d);
    EXPECT_LT(l.padded_dim - d, 64);
    EXPECT_EQ(l.query_rows, 64 * l.consumers);
    EXPECT_EQ(l.threads, 128 * (l.consumers + 1));
    EXPECT_EQ(l.key_rows, l.padded_dim <= 128 ? 128 : 64);
    EXPECT_GE(l.stages, 2);
    const int tiles = (l.query_rows + 2 * l.stages * l.key_rows) * l.padded_dim * 2;
    EXPECT_EQ(l.smem_bytes, tiles + 1024 + 8 * (4 * l.stages + 1));
    EXPECT_LE(tiles, kWgmmaThreeStageTileBytes);
    EXPECT_LE(l.smem_bytes, 227 * 1024);  // sm_90's opt-in limit
  }
  EXPECT_EQ(choose_attention_wgmma_layout(64).smem_bytes, 115816);  // 3 stages
  EXPECT_EQ(choose_attention_wgmma_layout(96).smem_bytes, 164936);  // as 128: 2 stages
  EXPECT_EQ(choose_attention_wgmma_layout(128).smem_bytes, 164936);
  EXPECT_EQ(choose_attention_wgmma_layout(192).stages, 3);  // 64-key tiles
  EXPECT_EQ(choose_attention_wgmma_layout(192).smem_bytes, 197736);
  EXPECT_EQ(choose_attention_wgmma_layout(256).stages, 2);
  EXPECT_EQ(choose_attention_wgmma_layout(256).smem_bytes, 197704);
}

std::vector<MaskCase> wgmma_cases() {
  std::vector<MaskCase> cases;
  for (DType dt : {DType::F16, DType::BF16})
    for (int64_t d : {64, 128}) {
      MaskCase c;
      c.dt = dt;
      c.d = d;
      c.name = fmt::format("plain_{}_d{}", dtype_name(dt), d);
      cases.push_back(c);
      c.name = fmt::format("causal_{}_d{}", dtype_name(dt), d);
      c.mask = MaskKind::WhereTrilu;
      c.sq = c.sk = Dim(300);
      cases.push_back(c);
      MaskCase k = key_padding(dt == DType::F16 ? DType::F16 : DType::F32);
      k.dt = dt;
      k.d = d;
      k.name = fmt::format("keypad_{}_d{}", dtype_name(dt), d);
      cases.push_back(k);
    }
  // Head dims padded to whole slabs (80, 96, 160) and the 64-key tiles of 192 and 256.
  for (int64_t d : {80, 96, 160, 192, 256}) {
    MaskCase c;
    c.d = d;
    c.dt = d % 64 ? DType::F16 : DType::BF16;
    c.name = fmt::format("plain_d{}", d);
    cases.push_back(c);
    c.name = fmt::format("causal_d{}", d);
    c.mask = MaskKind::WhereTrilu;
    c.sq = c.sk = Dim(300);
    cases.push_back(c);
  }
  MaskCase c;
  c.name = "window_add_d64";  // the golden takes cases[1] and the one before last
  c.mask = MaskKind::WindowAdd;
  c.sq = c.sk = Dim(600);
  c.window_k = -255;
  cases.push_back(c);
  c = MaskCase{};
  c.name = "where_gqa_sq_sk";
  c.d = 128;
  c.dt = DType::BF16;
  c.mask = MaskKind::WhereInput;
  c.q_batch = {Dim("N"), Dim(2), Dim(4)};
  c.kv_batch = {Dim("N"), Dim(2), Dim(1)};
  c.sq = Dim("Sq");
  c.sk = Dim("Sk");
  c.mask_shape = {Dim("N"), Dim(1), Dim(1), Dim(1), Dim("Sk")};
  c.fill = -1e9;
  cases.push_back(c);
  c = MaskCase{};
  c.name = "mqa_causal_const";
  c.mask = MaskKind::MaskedFill;
  c.q_batch = {Dim("N"), Dim(4)};
  c.kv_batch = {Dim("N"), Dim(1)};
  c.sq = c.sk = Dim(77);
  cases.push_back(c);
  return cases;
}

// Head dims 64 to 256 on sm_90a take the wgmma kernel (a 384-thread CTA of 128 query rows,
// launch bounds with one block, TMA maps of Q, K, V), which compiles for sm_90a in every variant;
// attention.wgmma=2 and sm_90 without arch-specific kernels give the mma.sync kernel, and so do
// other head dims.
TEST(AttentionMasks, WgmmaVariantsCompile) {
  int compiled = 0;
  for (const MaskCase& mc : wgmma_cases()) {
    SCOPED_TRACE(mc.name);
    Planned p = plan_of(test::mask_graph(mc));
    ASSERT_NE(p.attention, nullptr) << plan_to_string(*p.g, p.plan);
    std::vector<KernelSpec> ks = hopper_kernels_of(p);
    const KernelSpec* k = attention_kernel(ks);
    ASSERT_NE(k, nullptr);
    const AttentionWgmmaLayout lay = choose_attention_wgmma_layout(mc.d);
    EXPECT_NE(k->name.find(fmt::format("_d{}_wg128x{}", mc.d, lay.key_rows)), std::string::npos)
        << k->name;
    EXPECT_EQ(k->arch, "sm_90a");
    EXPECT_EQ(k->block[0], 384);
    EXPECT_EQ(k->smem_bytes, choose_attention_wgmma_layout(mc.d).smem_bytes);
    EXPECT_NE(k->source.find("__launch_bounds__(KA::THREADS, 1)"), std::string::npos);
    // Maps of Q, K, V in that order: {D, rows, the batch dims the operand does not broadcast},
    // boxes of 64 head columns x 128 rows, 128-byte swizzle.
    int kv_dims = 0;
    for (const Dim& b : mc.kv_batch) kv_dims += !(b == Dim(1));
    const std::vector<size_t> ranks = {2 + mc.q_batch.size(), 2 + size_t(kv_dims),
                                       2 + size_t(kv_dims)};
    size_t maps = 0;
    for (const KernelArg& a : k->args) {
      if (a.kind != KernelArg::Kind::TensorMap) continue;
      ASSERT_LT(maps, 3u);
      EXPECT_EQ(a.map_dims.size(), ranks[maps]) << "map " << maps;
      EXPECT_EQ(a.map_strides.size() + 1, a.map_dims.size());
      EXPECT_EQ(a.map_dims[0], Dim(mc.d));
      EXPECT_EQ(a.map_dims[1], maps == 0 ? mc.sq : mc.sk);
      ASSERT_GE(a.map_box.size(), 2u);
      EXPECT_EQ(a.map_box[0], 64);
      EXPECT_EQ(a.map_box[1], maps == 0 ? 128 : lay.key_rows);
      EXPECT_EQ(a.map_swizzle, 128);
      ++maps;
    }
    EXPECT_EQ(maps, 3u);
    try {
      EXPECT_FALSE(nvrtc_compile(k->source, k->name, "sm_90a").cubin.empty()) << k->name;
      ++compiled;
    } catch (const Error& e) {
      ADD_FAILURE() << k->name << ": " << e.what();
    }
    std::vector<KernelSpec> forced = hopper_kernels_of(p, "attention.wgmma=2");
    const KernelSpec* m = attention_kernel(forced);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->name.find("_wg"), std::string::npos) << m->name;
    EXPECT_TRUE(m->arch.empty());
    std::vector<KernelSpec> sm90 = kernels_of(p, 90);
    const KernelSpec* plain = attention_kernel(sm90);
    ASSERT_NE(plain, nullptr);
    EXPECT_EQ(plain->name, m->name);
  }
  EXPECT_EQ(compiled, static_cast<int>(wgmma_cases().size()));
  MaskCase d40;  // below one slab: the mma.sync kernel
  d40.d = 40;
  Planned p = plan_of(test::mask_graph(d40));
  std::vector<KernelSpec> ks = hopper_kernels_of(p);
  const KernelSpec* k = attention_kernel(ks);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->name.find("_wg"), std::string::npos) << k->name;
}

// The generated part of two wgmma attention kernels is pinned (UPDATE_GOLDEN=1 rewrites it):
// causal f16 at D 64 over a static length, a bool where over grouped-query heads at D 128 with
// symbolic lengths that differ.
TEST(AttentionMasks, WgmmaGoldenSource) {
  std::vector<MaskCase> cases = wgmma_cases();
  std::string text;
  for (const MaskCase& mc : {cases[1], cases[cases.size() - 2]}) {
    Planned p = plan_of(test::mask_graph(mc));
    std::vector<KernelSpec> ks = hopper_kernels_of(p);
    const KernelSpec* k = attention_kernel(ks);
    ASSERT_NE(k, nullptr);
    const size_t at = k->source.find("struct KcScores");
    ASSERT_NE(at, std::string::npos) << k->name;
    text += fmt::format("// ---- {} grid=({}) block={} smem={} args={}\n", k->name,
                        k->grid[0].str(), k->block[0], k->smem_bytes, k->args.size());
    text += k->source.substr(at);
  }
  test::expect_golden("attention_wgmma.cu", text);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Flash-decoding's rule: split only static query lengths of one query block whose CTAs fill
// less than a wave, into the split count with the fewest waves x blocks per split (the smallest
// on a tie), each split at least kMinSplitBlocks key blocks; a symbolic key length is taken as
// kSplitKeyEstimate keys; KILN_SCHEDULE attention.splits forces a count (1: none).
TEST(AttentionLayout, DecodeSplitRule) {
  const AttentionLayout l = choose_attention_layout(128);
  auto split = [&](int64_t q, int64_t batch, int64_t k, int sm = 90, int force = 0,
                   const AttentionLayout* lay = nullptr) {
    AttentionSplitProblem p;
    p.q_len = q;
    p.batch = batch;
    p.k_len = k;
    p.sm = sm;
    p.sm_count = 132;
    p.force = force;
    return choose_attention_split(lay ? *lay : l, p);
  };
  EXPECT_EQ(split(1, 32, 32768), 64);  // 8 splits: 256 CTAs, one wave of 2 x 132
  EXPECT_EQ(split(16, 32, 32768), 64);
  EXPECT_EQ(split(64, 32, 32768), 64);
  EXPECT_EQ(split(65, 32, 32768), 0);          // two query blocks: prefill, not split
  EXPECT_EQ(split(0, 32, 32768), 0);           // a symbolic query length
  EXPECT_EQ(split(1, 264, 32768), 0);          // a wave of query CTAs already
  EXPECT_EQ(split(1, 130, 32768), 256);        // 260 CTAs: one wave
  EXPECT_EQ(split(1, 200, 32768), 57);         // 200 of 264 slots busy: fine splits fill the waves
  EXPECT_EQ(split(1, 250, 32768), 0);          // 250 of 264: no split count saves a wave of time
  EXPECT_EQ(split(1, 4, 1000), 4);             // 16 blocks: 4 splits of the minimum 4
  EXPECT_EQ(split(1, 4, 255), 0);              // 4 blocks: one split's minimum
  EXPECT_EQ(split(1, 32, 0), 16);              // symbolic keys: 8192 estimated, 1024 keys a split
  EXPECT_EQ(split(1, 32, 32768, 90, 1), 0);    // attention.splits=1
  EXPECT_EQ(split(1, 32, 32768, 90, 4), 128);  // attention.splits=4
  EXPECT_EQ(split(1, 264, 32768, 90, 2), 256);
  EXPECT_EQ(split(1, 32, 32768, 86), 128);  // one 87 KB CTA an sm_86 SM: 4 splits a wave
  const AttentionLayout wide = choose_attention_layout(256);
  EXPECT_EQ(split(1, 32, 32768, 90, 0, &wide), 128);  // 32-key blocks, 8 splits
  EXPECT_GE(split(1, 1, 1 << 20), kMinSplitBlocks);
  using K = AttentionKernel;
  EXPECT_EQ(choose_attention_kernel(90, true, 128, true, 4, 0, true), K::MmaSync);
  EXPECT_EQ(choose_attention_kernel(90, true, 128, true, 4, 0, false), K::Wgmma);
}

MaskCase decode_case(const std::string& name, DType dt, int64_t d, Dim sq, Dim sk) {
  MaskCase c;
  c.name = name;
  c.dt = dt;
  c.d = d;
  c.q_batch = c.kv_batch = {Dim("N"), Dim(32)};
  c.sq = sq;
  c.sk = sk;
  return c;
}

// The split kernel: its name, grid (splits in y, from the bound key length when symbolic), the
// workspace and counters it asks the executor for, the rule picking it over wgmma on sm_90a, and
// every variant compiling with NVRTC for sm_80, sm_90 and sm_90a.
TEST(AttentionMasks, DecodeSplitKernels) {
  const Bindings b{{"N", 1}, {"Sk", 33000}};
  {
    Planned p = plan_of(test::mask_graph(decode_case("d", DType::F16, 128, Dim(1), Dim(32768))));
    ASSERT_NE(p.attention, nullptr);
    std::vector<KernelSpec> ks = kernels_of(p, 90);
    const KernelSpec* k = attention_kernel(ks);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->name, "attention_f16_d128_q64_split8_s1x32768");
    EXPECT_EQ(k->grid[0].eval(b), 32);
    EXPECT_EQ(k->grid[1], Dim(8));
    int scratch = 0, counters = 0;
    for (const KernelArg& a : k->args) {
      if (a.kind == KernelArg::Kind::Scratch) {
        ++scratch;
        EXPECT_EQ(a.value.eval(b),
                  int64_t{32} * 8 * 1 * (128 + 2) * 4);  // one row of KA::ROW floats
      }
      if (a.kind == KernelArg::Kind::Counters) {
        ++counters;
        EXPECT_EQ(a.value.eval(b), 32);
      }
    }
    EXPECT_EQ(scratch, 1);
    EXPECT_EQ(counters, 1);
    EXPECT_NE(k->source.find("KA::run_split("), std::string::npos);
    const std::vector<KernelSpec> hs = hopper_kernels_of(p);
    const KernelSpec* h = attention_kernel(hs);
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->name, k->name);  // sm_90a: the split mma.sync kernel, not wgmma
    const std::vector<KernelSpec> nss = hopper_kernels_of(p, "attention.splits=1");
    const KernelSpec* ns = attention_kernel(nss);
    ASSERT_NE(ns, nullptr);
    EXPECT_EQ(ns->name.find("_split"), std::string::npos) << ns->name;
    EXPECT_EQ(ns->grid[1], Dim(1));
  }
  {
    Planned p = plan_of(test::mask_graph(decode_case("s", DType::BF16, 128, Dim(4), Dim("Sk"))));
    std::vector<KernelSpec> ks = kernels_of(p, 90);
    const KernelSpec* k = attention_kernel(ks);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->name, "attention_bf16_d128_q64_splitby1024");
    EXPECT_EQ(k->grid[1].eval(b), 33);  // ceil(33000 / 1024)
    EXPECT_EQ(k->grid[1].eval({{"N", 1}, {"Sk", 50}}), 1);
  }
  std::vector<MaskCase> cases;
  cases.push_back(decode_case("plain", DType::F16, 128, Dim(1), Dim(32768)));
  MaskCase c = decode_case("causal_offset", DType::BF16, 64, Dim(4), Dim(4133));
  c.mask = MaskKind::WhereTrilu;
  c.causal_k = 4133 - 4;
  cases.push_back(c);
  c = decode_case("keypad_symbolic", DType::F16, 64, Dim(16), Dim("Sk"));
  c.mask = MaskKind::AddInput;
  c.mask_shape = {Dim("N"), Dim(1), Dim(1), Dim("Sk")};
  cases.push_back(c);
  c = decode_case("where_gqa_d256", DType::BF16, 256, Dim(16), Dim(9000));
  c.q_batch = {Dim("N"), Dim(8), Dim(4)};
  c.kv_batch = {Dim("N"), Dim(8), Dim(1)};
  c.mask = MaskKind::WhereInput;
  c.mask_shape = {Dim("N"), Dim(1), Dim(1), Dim(16), Dim(9000)};
  cases.push_back(c);
  cases.push_back(decode_case("plain_d40", DType::F16, 40, Dim(2), Dim(5000)));
  int compiled = 0;
  for (const MaskCase& mc : cases) {
    SCOPED_TRACE(mc.name);
    Planned p = plan_of(test::mask_graph(mc));
    ASSERT_NE(p.attention, nullptr) << plan_to_string(*p.g, p.plan);
    for (const char* arch : {"sm_80", "sm_90", "sm_90a"}) {
      std::vector<KernelSpec> ks =
          arch[5] == 'a' ? hopper_kernels_of(p) : kernels_of(p, arch[3] == '8' ? 80 : 90);
      const KernelSpec* k = attention_kernel(ks);
      ASSERT_NE(k, nullptr);
      EXPECT_NE(k->name.find("_split"), std::string::npos) << k->name;
      try {
        EXPECT_FALSE(nvrtc_compile(k->source, k->name, arch).cubin.empty()) << k->name;
        ++compiled;
      } catch (const Error& e) {
        ADD_FAILURE() << arch << " " << k->name << ": " << e.what();
      }
    }
  }
  EXPECT_EQ(compiled, 3 * static_cast<int>(cases.size()));
}

}  // namespace
}  // namespace kiln
