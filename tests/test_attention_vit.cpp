// torchvision ViT's attention (tests/attention_vit.hpp): the planner takes the head split of the
// QKV projection (unsqueeze, transpose, squeeze, selects, reshapes, transposes: copies, their
// strides are symbolic in N) and the head merge into the one attention group, reading Q, K and V
// through composed strides and offsets over the projection and writing O through the merge's
// strides. The composed strides are checked against the CPU reference's operands, the passes
// against the original graph, the kernels with NVRTC for sm_80, sm_90 and sm_90a.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "codegen/kernel_spec.hpp"
#include "codegen/nvrtc.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/attention_pattern.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/error.hpp"
#include "kiln/reference.hpp"
#include "tests/attention_vit.hpp"
#include "tests/golden_file.hpp"
#include "tests/random_input.hpp"
#include "tests/test_paths.hpp"

namespace kiln {
namespace {

constexpr int64_t kHeads = 2, kD = 64, kTokens = 5;

struct Planned {
  std::shared_ptr<const Graph> g;
  Plan plan;
  const FusionGroup* attention = nullptr;
};

Planned plan_vit(DType dt) {
  Planned p;
  p.g = apply_engine_passes(
      std::make_shared<const Graph>(test::vit_attention(dt, kHeads, kD, kTokens)), true);
  PlanOptions po;
  po.sm = 90;
  p.plan = plan_fusion(*p.g, po);
  for (const FusionGroup& grp : p.plan.groups)
    if (grp.kind == GroupKind::Attention) p.attention = &grp;
  return p;
}

// One attention group; the projections are the only other kernels (every movement op is a view
// or inside the group).
TEST(AttentionVit, HeadSplitAndMergeJoinTheGroup) {
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    Planned p = plan_vit(dt);
    ASSERT_NE(p.attention, nullptr) << plan_to_string(*p.g, p.plan);
    int kernels = 0, attention = 0;
    for (const FusionGroup& grp : p.plan.groups) {
      EXPECT_TRUE(grp.kind == GroupKind::View || grp.kind == GroupKind::Contraction ||
                  grp.kind == GroupKind::Attention)
          << plan_to_string(*p.g, p.plan);
      kernels += grp.kind != GroupKind::View;
      attention += grp.kind == GroupKind::Attention;
    }
    EXPECT_EQ(kernels, 3);  // QKV projection, attention, output projection
    EXPECT_EQ(attention, 1);
    const AttentionChain& ch = *p.attention->attention;
    // the projection's moved transpose (lift_matmul_row_permutes) and its two reshapes,
    // transpose, squeeze, 3 x (slice, reshape, reshape, transpose, reshape), k^T's reshape,
    // transpose, reshape, the two muls and the heads merge's transpose
    EXPECT_EQ(ch.operand_views.size(), 3u + 2u + 15u + 3u + 2u + 1u);
    const Dim n("N"), e(kHeads * kD);
    EXPECT_EQ(ch.q, ch.k);  // all three read the projection (its 5-d view) ...
    EXPECT_EQ(ch.q, ch.v);
    EXPECT_EQ(ch.q_offset, Dim(0));  // ... at their thirds of the 3 * E channels
    EXPECT_EQ(ch.k_offset, e);
    EXPECT_EQ(ch.v_offset, Dim(2) * e);
    // N, head, token: the projection is [N, T, 3E] (its matmul reads the tokens unpermuted)
    const std::vector<Dim> qv{Dim(3) * e * Dim(kTokens), Dim(kD), Dim(3) * e};
    EXPECT_EQ(ch.q_strides, qv);
    EXPECT_EQ(ch.k_strides, qv);
    EXPECT_EQ(ch.v_strides, qv);
    EXPECT_FALSE(ch.k_rows);                       // k^T [N, H, D, T]
    const std::vector<Dim> ov{e, Dim(kD), e * n};  // O written as [T, N, H, D]
    EXPECT_EQ(ch.o_strides, ov);
    EXPECT_NEAR(ch.operand_scale, 1.0 / std::sqrt(static_cast<double>(kD)), 1e-3);
    EXPECT_EQ(p.g->tensor(ch.o).desc.shape, (Shape{Dim(kTokens), n, Dim(kHeads), Dim(kD)}));
  }
}

// The strides and offsets the planner composed address the same values the CPU reference (f64
// math) computes for Q, K^T, V and the merged heads, at two values of N; the engine's passes
// leave the graph's result unchanged.
TEST(AttentionVit, ComposedStridesMatchTheReference) {
  Planned p = plan_vit(DType::F16);
  ASSERT_NE(p.attention, nullptr);
  const AttentionChain& ch = *p.attention->attention;
  const Graph inspect = test::vit_attention(DType::F16, kHeads, kD, kTokens, true);
  const Graph plain = test::vit_attention(DType::F16, kHeads, kD, kTokens);
  auto name = [&](int t) { return p.g->tensor(t).name; };
  const TensorDesc& root = p.g->tensor(ch.q).desc;
  ASSERT_NE(root.layout, Layout::Strided);  // read row-major from the reference's values
  for (int64_t nv : {1, 3}) {
    SCOPED_TRACE(fmt::format("N={}", nv));
    std::map<std::string, HostTensor> in{
        {"x", test::random_input(DType::F16, {nv, kTokens, kHeads * kD}, Layout::NCHW, 7 + nv)}};
    std::map<std::string, HostTensor> ref = run_reference(inspect, in);
    // The root the kernel reads is the projection as the passes left it ([N, T, 3E]: the QKV
    // matmul reads the tokens unpermuted): its values from the planned graph.
    Graph planned = *p.g;
    planned.output(Tensor{ch.q});
    for (auto& [k, v] : run_reference(planned, in)) ref.emplace(k, std::move(v));
    const Bindings b{{"N", nv}};
    // Operand `t` (the reference's values, row-major over `shape`) against `src` read at
    // offset + sum(index * stride), D contiguous at dim `d_dim`, the row at the other of the last
    // two.
    auto check = [&](const std::string& t, const std::string& src, const std::vector<Dim>& st,
                     const Dim& off, size_t d_dim) {
      SCOPED_TRACE(t);
      ASSERT_TRUE(ref.count(t) && ref.count(src));
      const HostTensor& want = ref.at(t);
      const std::vector<double> w = want.to_f64(), s = ref.at(src).to_f64();
      const size_t r = want.shape.size();
      std::vector<int64_t> stride(r);
      for (size_t i = 0; i + 2 < r; ++i) stride[i] = st[i].eval(b);
      stride[d_dim] = 1;
      stride[d_dim == r - 1 ? r - 2 : r - 1] = st[r - 2].eval(b);
      int mismatches = 0;
      for (int64_t flat = 0; flat < want.numel(); ++flat) {
        int64_t rem = flat, at = off.eval(b);
        for (size_t i = r; i-- > 0;) {
          at += (rem % want.shape[i]) * stride[i];
          rem /= want.shape[i];
        }
        ASSERT_LT(at, static_cast<int64_t>(s.size()));
        mismatches += !(w[flat] == s[at]);  // a copy: exact, and NaN never equal
      }
      EXPECT_EQ(mismatches, 0);
    };
    const std::string u = name(ch.q);
    // q, k^T and v by their builder names (the muls' inputs and the second matmul's)
    const Node& m1 =
        inspect
            .nodes()[inspect.tensor(inspect.find(name(p.g->nodes()[ch.qk].outputs[0]))).producer];
    const Node& mq = inspect.nodes()[inspect.tensor(m1.inputs[0]).producer];
    const Node& mk = inspect.nodes()[inspect.tensor(m1.inputs[1]).producer];
    check(inspect.tensor(mq.inputs[0]).name, u, ch.q_strides, ch.q_offset, 3);
    check(inspect.tensor(mk.inputs[0]).name, u, ch.k_strides, ch.k_offset, 2);
    check(name(p.g->nodes()[ch.pv].inputs[1]), u, ch.v_strides, ch.v_offset, 3);
    check(name(p.g->nodes()[ch.pv].outputs[0]), name(ch.o), ch.o_strides, Dim(0), 3);
    // The passes keep the result: the planned graph's reference equals the original's.
    std::map<std::string, HostTensor> a = run_reference(plain, in), c = run_reference(*p.g, in);
    ASSERT_EQ(a.size(), 1u);
    const std::vector<double> av = a.begin()->second.to_f64(), cv = c.at(a.begin()->first).to_f64();
    ASSERT_EQ(av.size(), cv.size());
    for (size_t i = 0; i < av.size(); ++i) ASSERT_EQ(av[i], cv[i]) << i;
  }
}

// When the head split's tensors are read outside the chain (graph outputs here), its copies
// must exist, so the chain is not taken.
TEST(AttentionVit, SplitReadElsewhereIsNotTaken) {
  auto g = apply_engine_passes(
      std::make_shared<const Graph>(test::vit_attention(DType::F16, kHeads, kD, kTokens, true)),
      true);
  PlanOptions po;
  po.sm = 90;
  const Plan plan = plan_fusion(*g, po);
  for (const FusionGroup& grp : plan.groups) EXPECT_NE(grp.kind, GroupKind::Attention);
}

std::vector<KernelSpec> kernels_of(const Planned& p, int sm) {
  CodegenOptions co;
  co.sm = sm;
  return generate_kernels(*p.g, p.plan, co);
}

// Every kernel of the graph compiles with NVRTC for sm_80, sm_90 and sm_90a, f16 and bf16.
TEST(AttentionVit, EveryKernelCompiles) {
  int compiled = 0;
  for (DType dt : {DType::F16, DType::BF16})
    for (const char* arch : {"sm_80", "sm_90", "sm_90a"}) {
      Planned p = plan_vit(dt);
      for (const KernelSpec& k : kernels_of(p, arch[3] == '8' ? 80 : 90)) {
        try {
          EXPECT_FALSE(nvrtc_compile(k.source, k.name, arch).cubin.empty()) << k.name;
          ++compiled;
        } catch (const Error& e) {
          ADD_FAILURE() << arch << " " << k.name << ": " << e.what();
        }
      }
    }
  EXPECT_EQ(compiled, 2 * 3 * 3);  // three kernels each
}

// On sm_90a the wgmma kernel reads q, k and v by TMA maps that start at their thirds of the
// projection (the maps' base offsets), and compiles.
TEST(AttentionVit, WgmmaMapsStartAtTheThirds) {
  Planned p = plan_vit(DType::F16);
  CodegenOptions co;
  co.sm = 90;
  co.arch_specific = true;
  int found = 0;
  for (const KernelSpec& k : generate_kernels(*p.g, p.plan, co)) {
    if (k.name.rfind("attention_", 0) != 0) continue;
    ++found;
    EXPECT_NE(k.name.find("_wg"), std::string::npos) << k.name;  // not the mma.sync kernel
    std::vector<Dim> offsets;
    for (const KernelArg& a : k.args)
      if (a.kind == KernelArg::Kind::TensorMap) offsets.push_back(a.map_offset);
    const Dim e(kHeads * kD);
    EXPECT_EQ(offsets, (std::vector<Dim>{Dim(0), e, Dim(2) * e}));
    EXPECT_FALSE(nvrtc_compile(k.source, k.name, "sm_90a").cubin.empty());
  }
  EXPECT_EQ(found, 1);
}

// The attention kernel's generated part (offsets and strides over the projection) is pinned
// (UPDATE_GOLDEN=1 rewrites tests/golden/attention_vit.cu).
TEST(AttentionVit, GoldenSource) {
  Planned p = plan_vit(DType::F16);
  std::string text = plan_to_string(*p.g, p.plan);
  for (const KernelSpec& k : kernels_of(p, 90)) {
    if (k.name.rfind("attention_", 0) != 0) continue;
    const size_t at = k.source.find("struct KcScores");
    ASSERT_NE(at, std::string::npos) << k.name;
    text += fmt::format("// ---- {} grid=({}) block={} smem={} args={}\n", k.name, k.grid[0].str(),
                        k.block[0], k.smem_bytes, k.args.size());
    text += k.source.substr(at);
  }
  test::expect_golden("attention_vit.cu", text);
}

}  // namespace
}  // namespace kiln
