// Matmul row reshapes (engine/passes/matmul_reshapes.cpp): a 2-D Gemm between reshapes computes
// the batched shape itself, so GPT-2's written-out GELU and the residual add join the matmul's
// epilogue and ViT's out-projection stores straight into the transposed rows (no copy kernel);
// the rewritten graph computes what the original does (CPU reference) and its kernels compile
// with the batch dims folded into GEMM rows. What must stay as it is stays.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "codegen/kernel_spec.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/engine.hpp"
#include "kiln/reference.hpp"
#include "tests/linear_graphs.hpp"
#include "tests/random_input.hpp"
#include "tests/same_values.hpp"

namespace kiln {
namespace {

using test::expect_same_values;

int count_kind(const Plan& p, GroupKind k) {
  return static_cast<int>(std::count_if(p.groups.begin(), p.groups.end(),
                                        [&](const FusionGroup& g) { return g.kind == k; }));
}

std::vector<KernelInfo> kernels_for(const Graph& g, const char* arch) {
  EngineOptions o;
  o.arch = arch;
  o.load_kernels = false;
  o.disk_cache = false;
  return Engine(o).compile(g).kernels();  // every kernel compiles (NVRTC)
}

// GPT-2's MLP: two matmuls computing [N, S, M]; the GELU's eight ops join the first one's
// epilogue and the residual add the second's; no pointwise kernel, no copy.
TEST(MatmulReshapes, Gpt2MlpFusesGeluAndResidual) {
  auto g = test::gpt2_mlp(DType::F32);
  std::string note;
  auto f = apply_engine_passes(g, true, &note);
  EXPECT_NE(note.find("matmuls computing their reshaped output: matmul_1 -> reshape_2, matmul_13"),
            std::string::npos)
      << note;
  Plan p = plan_fusion(*f);
  EXPECT_EQ(count_kind(p, GroupKind::Contraction), 2) << plan_to_string(*f, p);
  EXPECT_EQ(count_kind(p, GroupKind::Pointwise), 0) << plan_to_string(*f, p);
  EXPECT_EQ(count_kind(p, GroupKind::Copy), 0) << plan_to_string(*f, p);
  for (const FusionGroup& grp : p.groups)
    if (grp.kind == GroupKind::Contraction) EXPECT_GE(grp.nodes.size(), 2u);  // epilogues
  for (const Node& n : f->nodes())
    if (n.op == OpKind::Matmul) EXPECT_EQ(f->tensor(n.outputs[0]).desc.rank(), 3) << n.name;
  expect_same_values(*g, *f);
  for (const char* arch : {"sm_90a", "sm_80"})
    for (const KernelInfo& k : kernels_for(*g, arch))
      EXPECT_EQ(k.name.find("_batched"), std::string::npos) << arch << " " << k.name;
}

// ViT's out-projection: the matmul computes [S, N, E] and stores it through the transpose's
// strides into [N, S, E] (the transpose is a view); the GEMM still folds S x N rows.
TEST(MatmulReshapes, VitOutProjectionStoresTransposed) {
  auto g = test::vit_out_proj(DType::F16);
  auto f = apply_engine_passes(g, true);
  Plan p = plan_fusion(*f);
  EXPECT_EQ(count_kind(p, GroupKind::Copy), 0) << plan_to_string(*f, p);
  EXPECT_EQ(count_kind(p, GroupKind::Contraction), 1);
  for (const Node& n : f->nodes())
    if (n.op == OpKind::Matmul) {
      const TensorInfo& y = f->tensor(n.outputs[0]);
      EXPECT_GE(y.view_of, 0);
      EXPECT_EQ(y.desc.layout, Layout::Strided);
      EXPECT_EQ(y.desc.strides, (std::vector<int64_t>{64, 11 * 64, 1}));
    }
  expect_same_values(*g, *f);
  for (const char* arch : {"sm_90a", "sm_80"}) {
    std::vector<KernelInfo> ks = kernels_for(*g, arch);
    bool matmul = false;
    for (const KernelInfo& k : ks) {
      EXPECT_EQ(k.name.rfind("copy", 0), std::string::npos) << k.name;
      if (k.name.find("matmul") == std::string::npos) continue;
      matmul = true;
      EXPECT_EQ(k.name.find("_batched"), std::string::npos) << arch << " " << k.name;
    }
    EXPECT_TRUE(matmul) << arch;
  }
}

// ViT's QKV projection over transposed tokens: the matmul reads the tokens as they are (one GEMM
// of N x S rows, not S batched GEMMs of N rows) and the transpose moves to its output.
TEST(MatmulReshapes, VitQkvReadsTokensUnpermuted) {
  auto g = test::vit_qkv_proj(DType::F16);
  std::string note;
  auto f = apply_engine_passes(g, true, &note);
  EXPECT_NE(note.find("matmuls reading their rows unpermuted: transpose_"), std::string::npos)
      << note;
  for (const Node& n : f->nodes())
    if (n.op == OpKind::Matmul) EXPECT_EQ(f->tensor(n.inputs[0]).name, "x") << n.name;
  expect_same_values(*g, *f);
  for (const char* arch : {"sm_90a", "sm_80"}) {
    bool matmul = false;
    for (const KernelInfo& k : kernels_for(*g, arch)) {
      if (k.name.find("matmul") == std::string::npos) continue;
      matmul = true;
      EXPECT_EQ(k.name.find("_batched"), std::string::npos) << arch << " " << k.name;
    }
    EXPECT_TRUE(matmul) << arch;
  }
}

// The same projection as the torch.compile backend's FX graph has it, the bias a separate add
// after the matmul: the bias joins the matmul (its epilogue), so the lifted permute leaves no
// elementwise kernel over the whole [S, N, 3E] result. A bias that is a graph output's add, or a
// non-vector addend, stays an add.
TEST(MatmulReshapes, VitQkvBiasAddJoinsTheMatmul) {
  auto g = std::make_shared<Graph>("vit_qkv_bias_add");
  const int64_t s = 11, e = 64;
  Tensor x = g->input("x", DType::F16, {"N", s, e});
  Tensor y = g->matmul(g->transpose(x, {1, 0, 2}),
                       test::weight(*g, DType::F16, "in_proj.w", {e, 3 * e}, 1.0 / 8.0, 61));
  Tensor yb = g->add(y, test::weight(*g, DType::F16, "in_proj.b", {3 * e}, 0.1, 62));
  g->output(g->relu(g->reshape(yb, {Dim(s), Dim("N"), Dim(3), Dim(e)})));
  auto f = apply_engine_passes(g, true);
  int adds = 0;
  for (const Node& n : f->nodes()) {
    adds += n.op == OpKind::Add;
    if (n.op == OpKind::Matmul) EXPECT_EQ(n.inputs.size(), 3u) << n.name;
  }
  EXPECT_EQ(adds, 0);
  // One f16 rounding (the bias in the epilogue) where there were two: close, not identical.
  std::map<std::string, HostTensor> in{
      {"x", test::random_input(DType::F16, {3, s, e}, Layout::NCHW, 5)}};
  auto want = run_reference(*g, in).begin()->second.to_f64();
  auto got = run_reference(*f, in).begin()->second.to_f64();
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 2e-3 * (1 + std::abs(want[i]))) << i;
  for (const KernelInfo& k : kernels_for(*g, "sm_90a"))
    EXPECT_EQ(k.name.find("add"), std::string::npos) << k.name;

  Graph kept("kept");
  Tensor x2 = kept.input("x", DType::F32, {"N", 5, 8});
  Tensor w = test::weight(kept, DType::F32, "w", {8, 4}, 0.3, 1);
  Tensor y2 = kept.matmul(kept.transpose(x2, {1, 0, 2}), w);
  kept.output(kept.add(y2, test::weight(kept, DType::F32, "b", {4}, 0.1, 2)));  // a graph output
  Tensor y3 = kept.matmul(kept.transpose(x2, {1, 0, 2}), w);
  kept.output(kept.relu(kept.add(y3, kept.input("r", DType::F32, {5, "N", 4}))));  // not a vector
  EXPECT_EQ(lift_matmul_row_permutes(kept), 2);
  int kept_adds = 0;
  for (const Node& n : kept.nodes()) kept_adds += n.op == OpKind::Add;
  EXPECT_EQ(kept_adds, 2);
}

// Left alone: a permute that moves K (the last dim), and a B with batch dims.
TEST(MatmulReshapes, RowPermutesOnlyOverTwoDimWeights) {
  Graph g("left_alone");
  Tensor x = g.input("x", DType::F32, {"N", 5, 8});
  Tensor moved_k = g.transpose(x, {0, 2, 1});  // [N, 8, 5]: K is no longer last
  g.output(g.matmul(moved_k, test::weight(g, DType::F32, "w1", {5, 4}, 0.3, 1)));
  Tensor b3 = g.input("b3", DType::F32, {5, 8, 3});
  g.output(g.matmul(g.transpose(x, {1, 0, 2}), b3));  // [5, N, 8] x [5, 8, 3]: batched B
  Graph before = g;
  EXPECT_EQ(lift_matmul_row_permutes(g), 0);
  EXPECT_EQ(g.nodes().size(), before.nodes().size());
}

// Left alone: a reshape that regroups the columns, a matmul output read twice, a reshape that is
// a graph output, a transposed A, an A that is strided memory.
TEST(MatmulReshapes, OnlyRowReshapesOfPrivateResults) {
  auto lifted = [](const Graph& g) {
    Graph c = g;
    return lift_matmul_reshapes(c);
  };
  auto w = [](Graph& g, Shape s) { return test::weight(g, DType::F32, "w", std::move(s), 1, 1); };
  {
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N", 16});
    g.output(g.relu(g.reshape(g.matmul(x, w(g, {16, 24})), {"N", 3, 8})));
    EXPECT_EQ(lifted(g), 0);
  }
  {
    Graph g;
    Tensor x = g.input("x", DType::F32, {12, 16});
    Tensor y = g.matmul(x, w(g, {16, 24}));
    g.output(g.relu(g.reshape(y, {3, 4, 24})));
    g.output(g.sigmoid(y));
    EXPECT_EQ(lifted(g), 0);
  }
  {
    Graph g;
    Tensor x = g.input("x", DType::F32, {12, 16});
    g.output(g.reshape(g.matmul(x, w(g, {16, 24})), {3, 4, 24}));
    EXPECT_EQ(lifted(g), 0);
  }
  {
    Graph g;
    Tensor x = g.input("x", DType::F32, {16, 12});
    g.output(g.relu(g.reshape(g.matmul(x, w(g, {16, 24}), {}, true), {3, 4, 24})));
    EXPECT_EQ(lifted(g), 0);
  }
  {  // A a transpose the matmul reads in place (reshaped, it would need a copy)
    Graph g;
    Tensor x = g.input("x", DType::F32, {16, 12});
    Tensor a = g.transpose(x, {1, 0});
    g.output(g.relu(g.reshape(g.matmul(a, w(g, {16, 24})), {3, 4, 24})));
    EXPECT_EQ(lifted(g), 0);
  }
  {  // the rewrite itself: [12, 16] x [16, 24] -> [3, 4, 24]
    Graph g;
    Tensor x = g.input("x", DType::F32, {12, 16});
    g.output(g.relu(g.reshape(g.matmul(x, w(g, {16, 24})), {3, 4, 24})));
    EXPECT_EQ(lifted(g), 1);
  }
}

// Swin's window rows: the output projection [N W, 49, C] x [C, C] reshaped to [N, h, w, 7, 7, C]
// and departitioned by a transpose: the matmul computes the 6-D shape (its A a view) and stores
// through the departition's strides, so no copy kernel is left.
TEST(MatmulReshapes, WindowRowsStoreDepartitioned) {
  auto g = std::make_shared<Graph>("proj");
  Tensor x = g->input("x", DType::F16, {"N", 4, 49, 32});
  Tensor w = g->constant_random("w", TensorDesc{DType::F16, {32, 32}, Layout::NCHW, {}}, "normal",
                                0, 0.3, 1);
  Tensor rows = g->reshape(x, {Dim("N") * Dim(4), 49, 32});
  Tensor y = g->reshape(g->matmul(rows, w), {"N", 2, 2, 7, 7, 32});
  Tensor d = g->reshape(g->transpose(y, {0, 1, 3, 2, 4, 5}), {"N", 14, 14, 32});
  g->output(g->relu(d));
  auto f = apply_engine_passes(g, true, nullptr);
  int copies = 0;
  for (const FusionGroup& grp : plan_fusion(*f).groups) copies += grp.kind == GroupKind::Copy;
  EXPECT_EQ(copies, 0);
  test::expect_same_values(*g, *f);
}

}  // namespace
}  // namespace kiln
