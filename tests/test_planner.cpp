// Golden tests of the fusion planner: which nodes land in which group, and why.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "engine/ir/op_table.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/graph.hpp"

namespace kiln {
namespace {

TensorDesc desc(DType t, Shape s, Layout l = Layout::NCHW) {
  TensorDesc d;
  d.dtype = t;
  d.shape = std::move(s);
  d.layout = l;
  return d;
}

Tensor cst(Graph& g, const std::string& name, DType t, Shape s) {
  return g.constant_random(name, desc(t, std::move(s)), "normal", 0.0, 1.0, 1);
}

// Node names of each group, in plan order.
std::vector<std::vector<std::string>> groups_of(const Graph& g, const Plan& p) {
  std::vector<std::vector<std::string>> r;
  for (const FusionGroup& grp : p.groups) {
    std::vector<std::string> names;
    for (int n : grp.nodes) names.push_back(g.nodes()[n].name);
    r.push_back(names);
  }
  return r;
}

const FusionGroup& group_with(const Graph& g, const Plan& p, const std::string& node) {
  for (const FusionGroup& grp : p.groups)
    for (int n : grp.nodes)
      if (g.nodes()[n].name == node) return grp;
  throw std::runtime_error("node not planned: " + node);
}

std::string all_why(const Plan& p) {
  std::string s;
  for (const FusionGroup& grp : p.groups)
    for (const std::string& w : grp.why) s += w + "\n";
  return s;
}

using Groups = std::vector<std::vector<std::string>>;

TEST(Planner, AddLayernormGeluIsOneKernel) {
  Graph g("ln");
  Tensor x = g.input("x", DType::BF16, {"N", 4096});
  Tensor r = g.input("r", DType::BF16, {"N", 4096});
  Tensor s = cst(g, "s", DType::BF16, {4096});
  Tensor b = cst(g, "b", DType::BF16, {4096});
  Tensor h = g.add_node1("add", {x, r}, {}, "add");
  Tensor y = g.add_node1("layernorm", {h, s, b}, {}, "ln");
  Tensor z = g.add_node1("gelu", {y}, {}, "gelu");
  g.output(z);
  Plan p = plan_fusion(g);
  EXPECT_EQ(groups_of(g, p), (Groups{{"add", "ln", "gelu"}}));
  const FusionGroup& grp = p.groups[0];
  EXPECT_EQ(grp.kind, GroupKind::RowNorm);
  EXPECT_EQ(g.nodes()[grp.anchor].name, "ln");
  EXPECT_EQ(grp.outputs, std::vector<int>{z.id});
  std::set<int> ins(grp.inputs.begin(), grp.inputs.end());
  EXPECT_EQ(ins, (std::set<int>{x.id, r.id, s.id, b.id}));
  EXPECT_EQ(grp.name, "rownorm_bf16_add_layernorm_gelu");
  std::string why = all_why(p);
  EXPECT_NE(why.find("prologue: add (add) fused into ln's input"), std::string::npos) << why;
  EXPECT_NE(why.find("epilogue: gelu (gelu) fused on ln's output"), std::string::npos) << why;
}

TEST(Planner, ResidualOfLayernormIsExtraOutput) {
  // h = x + a; y = layernorm(h); out = h + relu(y): h leaves the norm kernel as an extra output.
  Graph g("res");
  Tensor x = g.input("x", DType::F16, {8, 1024});
  Tensor a = g.input("a", DType::F16, {8, 1024});
  Tensor h = g.add_node1("add", {x, a}, {}, "h");
  Tensor y = g.add_node1("layernorm", {h}, {}, "ln");
  Tensor m = g.add_node1("matmul", {y, cst(g, "w", DType::F16, {1024, 1024})}, {}, "mm");
  Tensor o = g.add_node1("add", {h, m}, {}, "out");
  g.output(o);
  Plan p = plan_fusion(g);
  EXPECT_EQ(groups_of(g, p), (Groups{{"h", "ln"}, {"mm", "out"}}));
  EXPECT_EQ(p.groups[0].outputs, (std::vector<int>{h.id, y.id}));
  EXPECT_EQ(p.groups[1].kind, GroupKind::Contraction);
  std::string why = all_why(p);
  EXPECT_NE(why.find("h output 'h' also used by out: written as extra output"), std::string::npos)
      << why;
  EXPECT_NE(why.find("ln -> mm: mm is a contraction anchor, ln cannot be its prologue"),
            std::string::npos)
      << why;
}

TEST(Planner, BiasGeluIsOneGroup) {
  Graph g("bg");
  Tensor x = g.input("x", DType::F16, {"N", 3072});
  Tensor b = cst(g, "b", DType::F16, {3072});
  Tensor y = g.add_node1("add", {x, b}, {}, "bias");
  Tensor z = g.add_node1("gelu", {y}, {}, "gelu");
  g.output(z);
  Plan p = plan_fusion(g);
  EXPECT_EQ(groups_of(g, p), (Groups{{"bias", "gelu"}}));
  EXPECT_EQ(p.groups[0].kind, GroupKind::Pointwise);
  EXPECT_EQ(p.groups[0].anchor, -1);
  EXPECT_EQ(p.groups[0].outputs, std::vector<int>{z.id});
  EXPECT_EQ(p.groups[0].name, "pointwise_f16_add_gelu");
}

TEST(Planner, GeluIntoMatmulIsABoundary) {
  Graph g("gm");
  Tensor x = g.input("x", DType::F16, {64, 256});
  Tensor a = g.add_node1("gelu", {x}, {}, "gelu");
  Tensor y = g.add_node1("matmul", {a, cst(g, "w", DType::F16, {256, 128})}, {}, "matmul");
  g.output(y);
  Plan p = plan_fusion(g);
  EXPECT_EQ(groups_of(g, p), (Groups{{"gelu"}, {"matmul"}}));
  EXPECT_NE(all_why(p).find("gelu -> matmul: matmul is a contraction anchor, gelu cannot be its "
                            "prologue"),
            std::string::npos)
      << all_why(p);
}

TEST(Planner, ResidualBlockConvAnchorsWithEpilogues) {
  Graph g("block");
  Tensor x = g.input("x", DType::F16, {"N", 64, 56, 56}, Layout::NHWC);
  auto conv = [&](Tensor in, const std::string& name) {
    Tensor w = cst(g, name + ".w", DType::F16, {64, 64, 3, 3});
    Tensor b = cst(g, name + ".b", DType::F16, {64});
    return g.add_node1(
        "conv2d", {in, w, b},
        {{"padding", std::vector<int64_t>{1, 1}}, {"stride", std::vector<int64_t>{1, 1}}}, name);
  };
  Tensor c1 = conv(x, "conv1");
  Tensor sc = cst(g, "bn.s", DType::F16, {64});
  Tensor bn = g.add_node1("batchnorm",
                          {c1, sc, cst(g, "bn.b", DType::F16, {64}),
                           cst(g, "bn.m", DType::F16, {64}), cst(g, "bn.v", DType::F16, {64})},
                          {}, "bn1");
  Tensor r1 = g.add_node1("relu", {bn}, {}, "relu1");
  Tensor c2 = conv(r1, "conv2");
  Tensor add = g.add_node1("add", {c2, x}, {}, "residual");
  Tensor r2 = g.add_node1("relu", {add}, {}, "relu2");
  g.output(r2);
  Plan p = plan_fusion(g);
  EXPECT_EQ(groups_of(g, p), (Groups{{"conv1", "bn1", "relu1"}, {"conv2", "residual", "relu2"}}));
  for (const FusionGroup& grp : p.groups) EXPECT_EQ(grp.kind, GroupKind::Contraction);
  EXPECT_EQ(p.groups[1].outputs, std::vector<int>{r2.id});
}

TEST(Planner, PointwiseIntermediateUsedTwiceIsExtraOutput) {
  Graph g("twice");
  Tensor x = g.input("x", DType::F32, {32, 100});
  Tensor r = g.add_node1("relu", {x}, {}, "relu");
  Tensor e = g.add_node1("exp", {r}, {}, "exp");
  Tensor s = g.add_node1("reduce_sum", {r}, {{"axes", std::vector<int64_t>{1}}}, "sum");
  g.output(e);
  g.output(s);
  Plan p = plan_fusion(g);
  // relu is the reduction's prologue and is also needed by exp: written as an extra output.
  EXPECT_EQ(groups_of(g, p), (Groups{{"relu", "sum"}, {"exp"}}));
  EXPECT_EQ(p.groups[0].outputs, (std::vector<int>{r.id, s.id}));
  EXPECT_NE(all_why(p).find("relu output 'relu' also used by exp: written as extra output"),
            std::string::npos)
      << all_why(p);
}

TEST(Planner, VerticalAndHorizontalPointwise) {
  Graph g("pw");
  Tensor x = g.input("x", DType::F16, {4, 8, 16, 16}, Layout::NHWC);
  Tensor s = cst(g, "s", DType::F16, {8, 1, 1});
  Tensor a = g.add_node1("mul", {x, s}, {}, "scale");
  Tensor b = g.add_node1("sigmoid", {a}, {}, "sig");
  Tensor c = g.add_node1("tanh", {x}, {}, "tanh");  // sibling reading x
  Tensor d = g.add_node1("reduce_max", {x}, {{"axes", std::vector<int64_t>{2, 3}}}, "rmax");
  Tensor e = g.add_node1("relu", {d}, {}, "relu");  // different iteration shape
  g.output(b);
  g.output(c);
  g.output(e);
  Plan p = plan_fusion(g);
  EXPECT_EQ(groups_of(g, p), (Groups{{"scale", "sig", "tanh"}, {"rmax", "relu"}}));
  EXPECT_EQ(p.groups[0].outputs, (std::vector<int>{b.id, c.id}));
  EXPECT_EQ(p.groups[1].kind, GroupKind::Reduction);
  EXPECT_NE(all_why(p).find("horizontal: tanh (tanh) shares input 'x'"), std::string::npos)
      << all_why(p);
}

TEST(Planner, FusionDisabledIsOneGroupPerNode) {
  Graph g("nf");
  Tensor x = g.input("x", DType::F32, {16, 64});
  Tensor a = g.add_node1("add", {x, x}, {}, "add");
  Tensor y = g.add_node1("softmax", {a}, {}, "sm");
  Tensor z = g.add_node1("neg", {y}, {}, "neg");
  Tensor t = g.add_node1("transpose", {z}, {{"perm", std::vector<int64_t>{1, 0}}}, "tr");
  g.output(t);
  PlanOptions o;
  o.fusion = false;
  Plan p = plan_fusion(g, o);
  EXPECT_EQ(groups_of(g, p), (Groups{{"add"}, {"sm"}, {"neg"}, {"tr"}}));
  EXPECT_EQ(p.groups[1].kind, GroupKind::RowNorm);
  EXPECT_EQ(p.groups[3].kind, GroupKind::Copy);
  EXPECT_NE(all_why(p).find("add -> sm: fusion disabled"), std::string::npos) << all_why(p);
  // With fusion: add+softmax+neg in one kernel, the transpose materialized.
  Plan f = plan_fusion(g);
  EXPECT_EQ(groups_of(g, f), (Groups{{"add", "sm", "neg"}, {"tr"}}));
  EXPECT_NE(all_why(f).find("neg -> tr: tr is a movement op"), std::string::npos) << all_why(f);
}

TEST(Planner, GroupnormSiluAndPoolAnchors) {
  Graph g("gn");
  Tensor x = g.input("x", DType::BF16, {16, 320, 64, 64}, Layout::NHWC);
  Tensor y = g.add_node1("groupnorm",
                         {x, cst(g, "s", DType::BF16, {320}), cst(g, "b", DType::BF16, {320})},
                         {{"groups", int64_t{32}}}, "gn");
  Tensor z = g.add_node1("silu", {y}, {}, "silu");
  Tensor m = g.add_node1("maxpool2d", {z}, {{"kernel", std::vector<int64_t>{2, 2}}}, "pool");
  Tensor q = g.add_node1("relu", {m}, {}, "relu");
  g.output(q);
  Plan p = plan_fusion(g);
  EXPECT_EQ(groups_of(g, p), (Groups{{"gn", "silu"}, {"pool", "relu"}}));
  EXPECT_EQ(p.groups[0].kind, GroupKind::ChannelNorm);
  EXPECT_EQ(p.groups[1].kind, GroupKind::Window);
  EXPECT_NE(
      all_why(p).find("silu -> pool: silu is already fused into its producer's kernel (group 0)"),
      std::string::npos)
      << all_why(p);
}

TEST(Planner, NoCycleThroughAnotherKernel) {
  // a = exp(x); m = reduce_max(a) keepdims; b = a - m: b cannot join a's group (m sits between).
  Graph g("cyc");
  Tensor x = g.input("x", DType::F32, {8, 33});
  Tensor a = g.add_node1("exp", {x}, {}, "exp");
  Tensor m = g.add_node1("reduce_max", {a},
                         {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{1}}}, "max");
  Tensor b = g.add_node1("sub", {a, m}, {}, "sub");
  g.output(b);
  Plan p = plan_fusion(g);
  // exp is the reduction's prologue and an extra output; sub reads both.
  EXPECT_EQ(groups_of(g, p), (Groups{{"exp", "max"}, {"sub"}}));
  EXPECT_EQ(p.groups[0].outputs, (std::vector<int>{a.id, m.id}));
  std::string text = plan_to_string(g, p);
  EXPECT_NE(text.find("group 0 [reduction]"), std::string::npos) << text;
  EXPECT_NE(text.find("*max (reduce_max)"), std::string::npos) << text;
}

TEST(Planner, DeadNodesAreNotPlanned) {
  Graph g("dead");
  Tensor x = g.input("x", DType::F32, {4});
  g.add_node1("exp", {x}, {}, "unused");
  Tensor y = g.add_node1("neg", {x}, {}, "neg");
  g.output(y);
  Plan p = plan_fusion(g);
  EXPECT_EQ(groups_of(g, p), (Groups{{"neg"}}));
}

// Fusion legality comes from the op table: every op's role agrees with its category, and the
// elementwise spill-overs (batchnorm's per-channel operands, the fast 16-bit forms) are columns.
TEST(Planner, OpTableRolesAgreeWithCategories) {
  for (int k = 0; k < static_cast<int>(OpKind::Count); ++k) {
    const OpInfo& info = op_info(static_cast<OpKind>(k));
    SCOPED_TRACE(info.name);
    switch (info.category) {
      case OpCategory::Pointwise:
        EXPECT_EQ(info.role, FusionRole::Elementwise);
        EXPECT_TRUE(info.ref && info.cuda);
        break;
      case OpCategory::Movement:
        EXPECT_EQ(info.role, FusionRole::Movement);
        break;
      case OpCategory::Normalization:
        EXPECT_NE(info.role, FusionRole::Anchor);
        EXPECT_NE(info.role, FusionRole::Movement);
        break;
      default:
        EXPECT_EQ(info.role, FusionRole::Anchor);
    }
    if (info.role == FusionRole::Elementwise) EXPECT_TRUE(info.cuda);
    if (info.fast16) EXPECT_EQ(info.max_inputs, 1);  // unary forms only
    EXPECT_EQ(info.channel_operands, info.kind == OpKind::Batchnorm);
  }
  EXPECT_EQ(op_info(OpKind::Batchnorm).role, FusionRole::Elementwise);
  EXPECT_EQ(op_info(OpKind::Groupnorm).role, FusionRole::ChannelStatistics);
  EXPECT_EQ(op_info(OpKind::Softmax).role, FusionRole::RowStatistics);
  for (OpKind k : {OpKind::Gelu, OpKind::Silu, OpKind::Sigmoid})
    EXPECT_TRUE(op_info(k).fast16) << op_name(k);
  EXPECT_FALSE(op_info(OpKind::Tanh).fast16);
}

// Batchnorm as the table's elementwise op: it joins a pointwise chain and a norm's epilogue.
TEST(Planner, BatchnormFusesAsElementwise) {
  Graph g("bn");
  Tensor x = g.input("x", DType::F16, {"N", 64, 8, 8}, Layout::NHWC);
  auto vec = [&](const char* n) { return cst(g, n, DType::F16, {64}); };
  Tensor y = g.add_node1("groupnorm", {x}, {{"groups", int64_t{8}}}, "gn");
  Tensor b = g.add_node1("batchnorm", {y, vec("s"), vec("b"), vec("m"), vec("v")}, {}, "bn");
  g.output(g.add_node1("relu", {b}, {}, "relu"));
  Plan p = plan_fusion(g);
  EXPECT_EQ(groups_of(g, p), (Groups{{"gn", "bn", "relu"}})) << plan_to_string(g, p);
  EXPECT_EQ(p.groups[0].kind, GroupKind::ChannelNorm);
}

// The attention group carries the chain the planner matched, for codegen to read.
TEST(Planner, AttentionGroupCarriesItsChain) {
  Graph g("attn");
  Tensor q = g.input("q", DType::F16, {"N", 128, 64});
  Tensor k = g.input("k", DType::F16, {"N", 128, 64});
  Tensor v = g.input("v", DType::F16, {"N", 128, 64});
  Tensor c = g.constant("c", desc(DType::F16, {}), HostTensor::from_f64(DType::F16, {}, {8.0}));
  Tensor s = g.add_node1("matmul", {q, k}, {{"transpose_b", int64_t{1}}}, "qk");
  Tensor sm = g.softmax(g.add_node1("div", {s, c}, {}, "scale"));
  g.output(g.add_node1("matmul", {sm, v}, {}, "pv"));
  Plan p = plan_fusion(g);
  ASSERT_EQ(p.groups.size(), 1u) << plan_to_string(g, p);
  const FusionGroup& a = p.groups[0];
  EXPECT_EQ(a.kind, GroupKind::Attention);
  ASSERT_TRUE(a.attention.has_value());
  EXPECT_EQ(a.attention->qk, a.anchor);
  EXPECT_EQ(a.attention->q, q.id);
  EXPECT_EQ(a.attention->v, v.id);
  EXPECT_EQ(a.attention->head_dim, 64);
  EXPECT_DOUBLE_EQ(a.attention->scale_value, 1.0 / 8.0);
  // Other groups carry none; nor does the unfused plan.
  PlanOptions off;
  off.fused_attention = false;
  for (const FusionGroup& grp : plan_fusion(g, off).groups) EXPECT_FALSE(grp.attention);
}

}  // namespace
}  // namespace kiln
