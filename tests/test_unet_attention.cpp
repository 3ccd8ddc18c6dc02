// The attention block of a VQGAN / LDM-style UNet (tests/unet_attention.hpp): O^T = v @ P^T is
// the block's channels, so the planner takes the chain with the transposed P@V; the passes write
// the reshape of O^T that the projection conv reads as NCHW channels-last instead (a copy a conv
// on tensor cores is worth), which the attention kernel then writes through its strides. The
// whole block is three kernels: the QKV conv, the attention (q, k and v read at their thirds of
// the conv's channels-last result), the projection conv with the residual add.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "codegen/kernel_spec.hpp"
#include "codegen/nvrtc.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/attention_pattern.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/error.hpp"
#include "kiln/reference.hpp"
#include "tests/golden_file.hpp"
#include "tests/random_input.hpp"
#include "tests/unet_attention.hpp"

namespace kiln {
namespace {

constexpr int64_t kC = 64, kHeads = 2, kH = 4, kW = 6;

struct Planned {
  std::shared_ptr<const Graph> g;
  Plan plan;
  const FusionGroup* attention = nullptr;
};

Planned plan_block(DType dt, Layout filters = Layout::NHWC, int sm = 90) {
  Planned p;
  p.g = apply_engine_passes(
      std::make_shared<const Graph>(test::unet_attention(dt, kC, kHeads, kH, kW, filters)), true);
  PlanOptions po;
  po.sm = sm;
  p.plan = plan_fusion(*p.g, po);
  for (const FusionGroup& grp : p.plan.groups)
    if (grp.kind == GroupKind::Attention) p.attention = &grp;
  return p;
}

// The conv reading node `t`'s tensor as its input.
const Node* conv_reading(const Graph& g, int t) {
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Conv2d && n.inputs[0] == t) return &n;
  return nullptr;
}

TEST(UnetAttention, ThreeKernelsAndTheStridesOverTheQkvConv) {
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    Planned p = plan_block(dt);
    ASSERT_NE(p.attention, nullptr) << plan_to_string(*p.g, p.plan);
    int kernels = 0;
    for (const FusionGroup& grp : p.plan.groups) {
      EXPECT_TRUE(grp.kind == GroupKind::View || grp.kind == GroupKind::Contraction ||
                  grp.kind == GroupKind::Attention)
          << plan_to_string(*p.g, p.plan);
      kernels += grp.kind != GroupKind::View;
    }
    EXPECT_EQ(kernels, 3);
    const AttentionChain& ch = *p.attention->attention;
    const int64_t hw = kH * kW, d = kC / kHeads;
    EXPECT_EQ(ch.q, ch.k);  // the QKV conv's result, channels-last
    EXPECT_EQ(ch.q, ch.v);
    EXPECT_EQ(p.g->tensor(ch.q).desc.layout, Layout::NHWC);
    EXPECT_EQ(ch.q_offset, Dim(0));
    EXPECT_EQ(ch.k_offset, Dim(kC));
    EXPECT_EQ(ch.v_offset, Dim(2 * kC));
    // N, head, position: channel (which x heads + head) x D + d of pixel `position`
    const std::vector<Dim> qkv{Dim(3 * kC * hw), Dim(d), Dim(3 * kC)};
    EXPECT_EQ(ch.q_strides, qkv);
    EXPECT_EQ(ch.k_strides, qkv);
    EXPECT_EQ(ch.v_strides, qkv);
    EXPECT_FALSE(ch.k_rows);                                  // k [N, heads, D, HW]
    EXPECT_FALSE(ch.v_rows);                                  // v [N, heads, D, HW]
    const std::vector<Dim> o{Dim(kC * hw), Dim(d), Dim(kC)};  // O into [N, HW, C]
    EXPECT_EQ(ch.o_strides, o);
    // The projection conv reads that memory as channels-last [N, C, H, W] (views).
    bool nhwc_conv = false;
    for (const Node& n : p.g->nodes())
      if (n.op == OpKind::Conv2d && n.inputs[0] != p.g->find("x"))
        nhwc_conv = p.g->tensor(n.inputs[0]).desc.layout == Layout::NHWC;
    EXPECT_TRUE(nhwc_conv) << plan_to_string(*p.g, p.plan);
  }
}

// The strides address the values the CPU reference computes: q^T, k, v as the matmuls read them
// (over the QKV conv's result in channels-last memory) and O^T as written (into the row-major
// [N, HW, C] the projection reads); the passes keep the block's result exactly.
TEST(UnetAttention, ComposedStridesMatchTheReference) {
  const Graph plain = test::unet_attention(DType::F16, kC, kHeads, kH, kW);
  Planned p = plan_block(DType::F16);
  ASSERT_NE(p.attention, nullptr);
  const AttentionChain& ch = *p.attention->attention;
  const int64_t hw = kH * kW, d = kC / kHeads;
  Graph inspect = *p.g;
  inspect.output(Tensor{ch.q});
  inspect.output(Tensor{ch.o});
  const Node& m1 = p.g->nodes()[ch.qk];
  const Node& m2 = p.g->nodes()[ch.pv];
  for (int t : {m1.inputs[0], m1.inputs[1], m2.inputs[0], m2.outputs[0]}) inspect.output(Tensor{t});
  for (int64_t nv : {1, 3}) {
    SCOPED_TRACE(fmt::format("N={}", nv));
    std::map<std::string, HostTensor> in{
        {"x", test::random_input(DType::F16, {nv, kC, kH, kW}, Layout::NHWC, 11 + nv)}};
    std::map<std::string, HostTensor> ref = run_reference(inspect, in);
    auto value = [&](int t) { return ref.at(p.g->tensor(t).name).to_f64(); };
    // the conv's result in its memory order (channels-last), and O's (row-major [N, HW, C])
    const std::vector<double> qkv_logical = value(ch.q), o_mem = value(ch.o);
    std::vector<double> qkv_mem(qkv_logical.size());
    for (int64_t n = 0; n < nv; ++n)
      for (int64_t c = 0; c < 3 * kC; ++c)
        for (int64_t i = 0; i < hw; ++i)
          qkv_mem[(n * hw + i) * 3 * kC + c] = qkv_logical[(n * 3 * kC + c) * hw + i];
    // operand [N, heads, a, b] row-major against `mem` at off + n, head, row strides, with D at
    // dim `d_dim` (stride 1)
    auto check = [&](int t, const std::vector<double>& mem, const std::vector<Dim>& st,
                     const Dim& off, int d_dim) {
      SCOPED_TRACE(p.g->tensor(t).name);
      const std::vector<double> want = value(t);
      const int64_t a = d_dim == 3 ? hw : d, b = d_dim == 3 ? d : hw;
      int bad = 0;
      for (int64_t n = 0; n < nv; ++n)
        for (int64_t h = 0; h < kHeads; ++h)
          for (int64_t i = 0; i < a; ++i)
            for (int64_t j = 0; j < b; ++j) {
              const int64_t row = d_dim == 3 ? i : j, dd = d_dim == 3 ? j : i;
              const int64_t at =
                  off.value() + n * st[0].value() + h * st[1].value() + row * st[2].value() + dd;
              bad += !(want[((n * kHeads + h) * a + i) * b + j] == mem.at(at));
            }
      EXPECT_EQ(bad, 0);
    };
    check(m1.inputs[0], qkv_mem, ch.q_strides, ch.q_offset, 3);  // q^T [N, heads, HW, D]
    check(m1.inputs[1], qkv_mem, ch.k_strides, ch.k_offset, 2);  // k [N, heads, D, HW]
    check(m2.inputs[0], qkv_mem, ch.v_strides, ch.v_offset, 2);  // v [N, heads, D, HW]
    check(m2.outputs[0], o_mem, ch.o_strides, Dim(0), 2);        // O^T [N, heads, D, HW]
    std::map<std::string, HostTensor> a = run_reference(plain, in), c = run_reference(*p.g, in);
    ASSERT_EQ(a.size(), 1u);
    const std::vector<double> av = a.begin()->second.to_f64(), cv = c.at(a.begin()->first).to_f64();
    ASSERT_EQ(av.size(), cv.size());
    for (size_t i = 0; i < av.size(); ++i) ASSERT_EQ(av[i], cv[i]) << i;
  }
}

// With NCHW filters (the f32 import's layout) the convs stay NCHW: the reshape of O^T stays a
// view and no copy is added for them.
TEST(UnetAttention, NchwFiltersKeepTheView) {
  Planned p = plan_block(DType::F16, Layout::NCHW);
  int copies = 0;
  for (const FusionGroup& grp : p.plan.groups) copies += grp.kind == GroupKind::Copy;
  const Graph plain = test::unet_attention(DType::F16, kC, kHeads, kH, kW, Layout::NCHW);
  const Plan before = plan_fusion(plain, PlanOptions{});
  int copies_before = 0;
  for (const FusionGroup& grp : before.groups) copies_before += grp.kind == GroupKind::Copy;
  EXPECT_LE(copies, copies_before) << plan_to_string(*p.g, p.plan);
  for (const Node& n : p.g->nodes())
    if (n.op == OpKind::Conv2d)
      EXPECT_EQ(p.g->tensor(n.inputs[0]).desc.layout, Layout::NCHW) << n.name;
}

// In f32 both conv layouts run on SIMT kernels: the reshape of O^T stays a view (no copy is
// added for the projection conv).
TEST(UnetAttention, F32KeepsTheView) {
  Planned p = plan_block(DType::F32);
  EXPECT_EQ(p.attention, nullptr);
  for (const Node& n : p.g->nodes())
    if (n.op == OpKind::Conv2d && n.inputs[0] != p.g->find("x"))
      EXPECT_EQ(p.g->tensor(n.inputs[0]).desc.layout, Layout::NCHW) << n.name;
}

// Every kernel compiles with NVRTC for sm_80, sm_90 and sm_90a, f16 and bf16.
TEST(UnetAttention, EveryKernelCompiles) {
  int compiled = 0, attention = 0;
  for (DType dt : {DType::F16, DType::BF16})
    for (const char* arch : {"sm_80", "sm_90", "sm_90a"}) {
      const int sm = arch[3] == '8' ? 80 : 90;
      Planned p = plan_block(dt, Layout::NHWC, sm);
      CodegenOptions co;
      co.sm = sm;
      co.arch_specific = std::string(arch) == "sm_90a";
      for (const KernelSpec& k : generate_kernels(*p.g, p.plan, co)) {
        attention += k.name.rfind("attention_", 0) == 0;
        try {
          EXPECT_FALSE(nvrtc_compile(k.source, k.name, arch).cubin.empty()) << k.name;
          ++compiled;
        } catch (const Error& e) {
          ADD_FAILURE() << arch << " " << k.name << ": " << e.what();
        }
      }
    }
  EXPECT_EQ(compiled, 2 * 3 * 3);
  EXPECT_EQ(attention, 2 * 3);
}

// The plan (the channels-last rewrite of O^T, the attention group taking the head split) and the
// attention kernel's generated part (strides and offsets over the QKV conv's result, O^T's
// strides into the projection's input) are pinned (UPDATE_GOLDEN=1 rewrites
// tests/golden/attention_unet.cu).
TEST(UnetAttention, GoldenPlanAndSource) {
  Planned p = plan_block(DType::F16);
  std::string text = plan_to_string(*p.g, p.plan);
  CodegenOptions co;
  co.sm = 90;
  for (const KernelSpec& k : generate_kernels(*p.g, p.plan, co)) {
    if (k.name.rfind("attention_", 0) != 0) continue;
    const size_t at = k.source.find("struct KcScores");
    ASSERT_NE(at, std::string::npos) << k.name;
    text += fmt::format("// ---- {} grid=({}) block={} smem={} args={}\n", k.name, k.grid[0].str(),
                        k.block[0], k.smem_bytes, k.args.size());
    text += k.source.substr(at);
  }
  test::expect_golden("attention_unet.cu", text);
}

}  // namespace
}  // namespace kiln
