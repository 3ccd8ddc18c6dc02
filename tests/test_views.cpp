// Movement views (engine/fold_views.cpp): which reshapes and transposes the Engine reads in place,
// what the planner and the arena make of them, that the rewritten graph computes the same values
// (CPU reference on fresh random inputs, before and after), and that its kernels compile.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "codegen/kernel_spec.hpp"
#include "engine/ir/op_table.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/attention_pattern.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/engine.hpp"
#include "kiln/graph.hpp"
#include "kiln/reference.hpp"
#include "runtime/memory_plan.hpp"
#include "tests/attention_graph.hpp"
#include "tests/random_input.hpp"

namespace kiln {
namespace {

using test::random_input;

int count_kind(const Plan& p, GroupKind k) {
  return static_cast<int>(std::count_if(p.groups.begin(), p.groups.end(),
                                        [&](const FusionGroup& g) { return g.kind == k; }));
}

const Node& nth_op(const Graph& g, OpKind k, int nth) {
  for (const Node& n : g.nodes())
    if (n.op == k && nth-- == 0) return n;
  throw std::runtime_error(std::string("no such node of op ") + op_name(k));
}

CompiledGraph compile_for(const Graph& g, const char* arch) {
  EngineOptions o;
  o.arch = arch;
  o.load_kernels = false;
  o.disk_cache = false;
  return Engine(o).compile(g);
}

// The passes' graph computes what the original computes (the reference reads the Strided
// descs of the views as laid out).
void expect_same_values(const Graph& before, const Graph& after, int64_t n, int64_t t, int64_t c) {
  std::map<std::string, HostTensor> in{
      {"x", random_input(DType::F32, {n, t, c}, Layout::NCHW, 17)}};
  auto want = run_reference(before, in);
  auto got = run_reference(after, in);
  for (auto& [name, w] : want) {
    std::vector<double> a = got.at(name).to_f64(), b = w.to_f64();
    ASSERT_EQ(a.size(), b.size()) << name;
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(a[i], b[i], 1e-9 * (1 + std::abs(b[i]))) << name << " [" << i << "]";
  }
}

TEST(Views, AttentionNeedsNoCopyKernel) {
  for (bool kt_direct : {false, true})
    for (bool out_root : {false, true}) {
      SCOPED_TRACE(fmt::format("kt_direct {} out_root {}", kt_direct, out_root));
      auto g = std::make_shared<const Graph>(
          test::attention_graph(DType::F32, 7, 2, 16, out_root, kt_direct));
      std::string note;
      auto f = apply_engine_passes(g, true, &note);
      ASSERT_NE(f.get(), g.get());
      EXPECT_NE(note.find("transposes read as transposed matmul operands"), std::string::npos)
          << note;
      Plan p = plan_fusion(*f);
      EXPECT_EQ(count_kind(p, GroupKind::Copy), 0) << plan_to_string(*f, p);
      // reshape + transpose per q, k, v, the merge's transpose + reshape (k^T: the transpose of k
      // absorbed by the matmul, or the direct one turned into k's head split).
      EXPECT_EQ(count_kind(p, GroupKind::View), 8) << plan_to_string(*f, p);
      EXPECT_EQ(plan_to_string(*f, p).find("copy kernel"), std::string::npos);

      // q @ k^T reads k's heads K-major; its operands are strided views of the projections.
      const Node& qk = nth_op(*f, OpKind::Matmul, 3);
      EXPECT_EQ(qk.attr_int("transpose_b"), 1);
      for (int in : {qk.inputs[0], qk.inputs[1]}) {
        const TensorInfo& ti = f->tensor(in);
        EXPECT_GE(ti.view_of, 0) << ti.name;
        EXPECT_EQ(ti.desc.layout, Layout::Strided) << ti.name;
        EXPECT_EQ(ti.desc.strides, (std::vector<int64_t>{7 * 32, 16, 32, 1})) << ti.name;
        EXPECT_EQ(f->tensor(ti.view_of).view_of, -1) << "a root is never a view";
      }
      // att @ v stores straight into the merged heads' memory.
      const Node& pv = nth_op(*f, OpKind::Matmul, 4);
      const TensorInfo& po = f->tensor(pv.outputs[0]);
      EXPECT_EQ(po.desc.layout, Layout::Strided);
      EXPECT_EQ(po.desc.strides, (std::vector<int64_t>{7 * 32, 16, 32, 1}));
      const int merged = nth_op(*f, OpKind::Reshape, 3).outputs[0];
      EXPECT_EQ(po.view_of, out_root ? merged : f->tensor(merged).view_of);
      expect_same_values(*g, *f, 3, 7, 32);

      // The arena: views take no memory of their own; a root lives while any view of it is used.
      for (const char* arch : {"sm_80", "sm_90"}) {
        CodegenOptions co;
        co.sm = arch == std::string("sm_90") ? 90 : 80;
        co.arch_specific = co.sm == 90;
        std::vector<KernelSpec> ks = generate_kernels(*f, p, co);
        EXPECT_EQ(ks.size(), p.groups.size() - count_kind(p, GroupKind::View));
        for (const KernelSpec& k : ks) EXPECT_NE(k.name.rfind("copy", 0), 0u) << k.name;
        ArenaPlan ap = plan_arena(*f, ks, {{"N", 3}});
        std::map<int, std::pair<int, int>> live;  // root -> first, last kernel
        for (int k = 0; k < static_cast<int>(ks.size()); ++k)
          for (const KernelArg& a : ks[k].args) {
            if (a.kind != KernelArg::Kind::Tensor) continue;
            EXPECT_EQ(ap.offset.count(a.tensor) && f->tensor(a.tensor).view_of >= 0, false);
            int r = f->tensor(a.tensor).view_of >= 0 ? f->tensor(a.tensor).view_of : a.tensor;
            if (!ap.offset.count(r)) continue;
            auto [it, fresh] = live.emplace(r, std::pair<int, int>{k, k});
            it->second.second = k;
          }
        for (auto& [a, ra] : live)
          for (auto& [b, rb] : live) {
            if (a >= b || ra.second < rb.first || rb.second < ra.first) continue;
            int64_t a0 = ap.offset.at(a), a1 = a0 + tensor_bytes(f->tensor(a).desc, {{"N", 3}});
            int64_t b0 = ap.offset.at(b), b1 = b0 + tensor_bytes(f->tensor(b).desc, {{"N", 3}});
            EXPECT_TRUE(a1 <= b0 || b1 <= a0) << f->tensor(a).name << " and " << f->tensor(b).name
                                              << " overlap while both are live";
          }
        CompiledGraph cg = compile_for(*g, arch);  // every kernel compiles with NVRTC
        for (const KernelInfo& k : cg.kernels()) EXPECT_NE(k.name.rfind("copy", 0), 0u) << k.name;
      }
    }
}

// Movement the views leave to copy kernels.
TEST(Views, CopiesStayWhereAViewWouldNotDo) {
  auto copies = [](const Graph& g) {
    auto f = apply_engine_passes(std::make_shared<const Graph>(g), true);
    return count_kind(plan_fusion(*f), GroupKind::Copy);
  };
  {  // a transpose read by an elementwise op (it would read uncoalesced)
    Graph g;
    Tensor x = g.input("x", DType::F16, {"N", 8, 16});
    g.output(g.relu(g.transpose(x, {0, 2, 1})));
    EXPECT_EQ(copies(g), 1);
  }
  {  // a reshape of an NHWC tensor (its memory is not in logical order)
    Graph g;
    Tensor x = g.input("x", DType::F16, {"N", 8, 4, 4}, Layout::NHWC);
    Tensor r = g.reshape(x, {"N", 128});
    g.output(g.matmul(r, g.constant_random("w", TensorDesc{DType::F16, {128, 8}, Layout::NCHW, {}},
                                           "normal", 0, 1, 1)));
    EXPECT_EQ(copies(g), 1);
  }
  {  // a matmul operand transposed so that its last dim is strided
    Graph g;
    Tensor x = g.input("x", DType::F16, {"N", 8, 16});
    Tensor w = g.input("w", DType::F16, {"N", 8, 8});
    g.output(g.matmul(g.transpose(x, {0, 2, 1}), w));
    EXPECT_EQ(copies(g), 1);
  }
  {  // a graph output reshaped from a tensor that is also used elsewhere
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N", 8, 16});
    Tensor y = g.relu(x);
    g.output(g.reshape(y, {"N", 128}));
    g.output(g.sigmoid(y));
    EXPECT_EQ(copies(g), 1);
  }
  {  // ... but a reshape of a private result into a graph output is the same memory
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N", 8, 16});
    g.output(g.reshape(g.relu(x), {"N", 128}));
    auto f = apply_engine_passes(std::make_shared<const Graph>(g), true);
    Plan p = plan_fusion(*f);
    EXPECT_EQ(count_kind(p, GroupKind::Copy), 0);
    EXPECT_EQ(count_kind(p, GroupKind::View), 1);
    EXPECT_EQ(f->tensor(nth_op(*f, OpKind::Relu, 0).outputs[0]).view_of, f->outputs()[0]);
  }
  {  // fusion off: one kernel per op, no passes, no views
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N", 8, 16});
    g.output(g.relu(g.reshape(x, {"N", 128})));
    auto s = std::make_shared<const Graph>(g);
    EXPECT_EQ(apply_engine_passes(s, false).get(), s.get());
  }
}

// ConvNeXt's block: NHWC conv output permuted to [N, H, W, C] (row-major as it is), a LayerNorm
// over C, the permute back (channels-last as it is), a residual add, the next conv. Both permutes
// are views, the add and the conv take channels-last memory (the layout handed down), and the
// rewritten graph computes what the original does.
TEST(Views, PermutesOfDenseMemoryAreViews) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 16, 6, 5}, Layout::NHWC);
  auto w = [&](const char* name, Shape s) {
    return g.constant_random(name, TensorDesc{DType::F32, std::move(s), Layout::NCHW, {}}, "normal",
                             0, 0.2, 3);
  };
  Conv2dOptions o;
  o.padding = {1, 1};
  Tensor c = g.conv2d(x, w("w1", {16, 16, 3, 3}), {}, o);
  Tensor t = g.transpose(c, {0, 2, 3, 1});
  Tensor ln = g.layernorm(t, w("s", {16}), w("b", {16}));
  Tensor back = g.transpose(ln, {0, 3, 1, 2});
  Tensor sum = g.add(back, x);
  g.output(g.conv2d(sum, w("w2", {16, 16, 3, 3}), {}, o));
  auto f = apply_engine_passes(std::make_shared<const Graph>(g), true);
  Plan p = plan_fusion(*f);
  EXPECT_EQ(count_kind(p, GroupKind::Copy), 0) << plan_to_string(*f, p);
  const Node& t1 = nth_op(*f, OpKind::Transpose, 0);
  const Node& t2 = nth_op(*f, OpKind::Transpose, 1);
  EXPECT_GE(f->tensor(t1.outputs[0]).view_of, 0);
  EXPECT_EQ(f->tensor(t1.outputs[0]).desc.layout, Layout::NCHW);  // row-major [N, H, W, C]
  EXPECT_GE(f->tensor(t2.outputs[0]).view_of, 0);
  EXPECT_EQ(f->tensor(t2.outputs[0]).desc.layout, Layout::NHWC);
  const Node& add = nth_op(*f, OpKind::Add, 0);
  EXPECT_EQ(f->tensor(add.outputs[0]).desc.layout, Layout::NHWC);  // handed down to the conv
  std::map<std::string, HostTensor> in{
      {"x", random_input(DType::F32, {2, 16, 6, 5}, Layout::NHWC, 23)}};
  auto want = run_reference(g, in);
  auto got = run_reference(*f, in);
  for (auto& [name, wt] : want) {
    std::vector<double> a = got.at(name).to_f64(), b = wt.to_f64();
    ASSERT_EQ(a.size(), b.size()) << name;
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(a[i], b[i], 1e-9 * (1 + std::abs(b[i]))) << name << " [" << i << "]";
  }
  compile_for(*f, "sm_90");  // every kernel compiles (NVRTC)
}

// Reshapes of dense row-major memory are views whatever dims are symbolic: ViT's QKV split
// reshapes [S, N, 3 * E] into [S, N, 3, E] under a dynamic batch N in the middle.
TEST(Views, ReshapesWithSymbolicInnerDimsAreViews) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {5, "N", 12});
  Tensor w = g.constant_random("w", TensorDesc{DType::F32, {12, 24}, Layout::NCHW, {}}, "normal", 0,
                               0.2, 3);
  Tensor y = g.matmul(x, w);                                  // [5, N, 24]
  Tensor r = g.reshape(y, {5, "N", 2, 12});                   // a view
  Tensor e = g.exp(r);                                        // reads it in place
  g.output(g.reshape(e, {5, parse_dim("2*N", "test"), 12}));  // a view of the output
  auto f = apply_engine_passes(std::make_shared<const Graph>(g), true);
  Plan p = plan_fusion(*f);
  EXPECT_EQ(count_kind(p, GroupKind::Copy), 0) << plan_to_string(*f, p);
  EXPECT_EQ(count_kind(p, GroupKind::View), 2) << plan_to_string(*f, p);
  for (int64_t n : {1, 3}) {
    std::map<std::string, HostTensor> in{
        {"x", random_input(DType::F32, {5, n, 12}, Layout::NCHW, 29)}};
    auto want = run_reference(g, in);
    auto got = run_reference(*f, in);
    for (auto& [name, wt] : want) {
      std::vector<double> a = got.at(name).to_f64(), b = wt.to_f64();
      ASSERT_EQ(a.size(), b.size()) << name;
      for (size_t i = 0; i < a.size(); ++i)
        ASSERT_NEAR(a[i], b[i], 1e-9 * (1 + std::abs(b[i]))) << name << " [" << i << "]";
    }
  }
  compile_for(*f, "sm_90");
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

const FusionGroup* group_of_kind(const Plan& p, GroupKind k) {
  for (const FusionGroup& g : p.groups)
    if (g.kind == k) return &g;
  return nullptr;
}

// q @ k^T / c -> softmax -> @ v as one kernel where the fused kernel takes it.
TEST(Attention, FusedWhereTheKernelTakesIt) {
  for (DType dt : {DType::F16, DType::BF16})
    for (int64_t hd : {32, 64, 128}) {
      SCOPED_TRACE(fmt::format("{} hd {}", dtype_name(dt), hd));
      auto g = std::make_shared<const Graph>(test::attention_graph(dt, 197, 2, hd, false, true));
      auto f = apply_engine_passes(g, true);
      Plan p = plan_fusion(*f);
      const FusionGroup* a = group_of_kind(p, GroupKind::Attention);
      ASSERT_NE(a, nullptr) << plan_to_string(*f, p);
      // matmul, div, softmax, matmul; q, k and v are slices of one projection
      // (engine/passes/sibling_matmuls.cpp), read through the movement ops the group absorbs
      int compute = 0;
      for (int n : a->nodes) compute += op_info(f->nodes()[n].op).category != OpCategory::Movement;
      EXPECT_EQ(compute, 4);
      EXPECT_EQ(a->outputs.size(), 1u) << "the scores never leave the kernel";
      EXPECT_EQ(count_kind(p, GroupKind::RowNorm), 0);
      std::optional<AttentionChain> c = match_attention(*f, a->anchor);
      ASSERT_TRUE(c.has_value());
      EXPECT_NEAR(c->scale_value, 1.0 / std::sqrt(static_cast<double>(hd)), 1e-3);
      for (const char* arch : {"sm_80", "sm_90"}) {  // NVRTC compiles it for both
        CompiledGraph cg = compile_for(*g, arch);
        // sm_90 (sm_90a kernels allowed) at head dims 64 and 128: the wgmma kernel.
        const bool wg = arch[3] == '9' && hd != 32;
        int fused = 0;
        for (const KernelInfo& k : cg.kernels())
          fused += k.name == fmt::format("attention_{}_d{}_{}_s197x197", dtype_name(dt), hd,
                                         wg ? "wg128x128" : "q64");
        EXPECT_EQ(fused, 1);
      }
    }
  // Not taken: f32, a head dim of 12 (not a multiple of 8), the scores also a graph output, the
  // override off.
  auto planned = [](const Graph& g, bool fused = true) {
    PlanOptions po;
    po.fused_attention = fused;
    auto f = apply_engine_passes(std::make_shared<const Graph>(g), true);
    return group_of_kind(plan_fusion(*f, po), GroupKind::Attention) != nullptr;
  };
  EXPECT_TRUE(planned(test::attention_graph(DType::F16, 7, 2, 32, true, false)));
  EXPECT_FALSE(planned(test::attention_graph(DType::F16, 7, 2, 32, true, false), false));
  EXPECT_FALSE(planned(test::attention_graph(DType::F32, 7, 2, 32, false, false)));
  EXPECT_FALSE(planned(test::attention_graph(DType::F16, 7, 2, 12, false, false)));
  Graph s = test::attention_graph(DType::F16, 7, 2, 32, false, false);
  for (const Node& n : s.nodes())
    if (n.op == OpKind::Softmax) s.output(Tensor{n.outputs[0]});
  EXPECT_FALSE(planned(s));
  PlanOptions old_arch;
  old_arch.sm = 75;
  auto f = apply_engine_passes(
      std::make_shared<const Graph>(test::attention_graph(DType::F16, 7, 2, 32, false, false)),
      true);
  EXPECT_EQ(group_of_kind(plan_fusion(*f, old_arch), GroupKind::Attention), nullptr);
}

}  // namespace
}  // namespace kiln
