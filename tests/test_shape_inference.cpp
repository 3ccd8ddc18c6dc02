// Shape inference and builder checks for every op category.
#include <gtest/gtest.h>

#include "engine/ir/op_table.hpp"
#include "kiln/error.hpp"
#include "kiln/graph.hpp"

using namespace kiln;

namespace {
std::string err_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::User) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected a user error";
  return "";
}
}  // namespace

TEST(OpTable, EveryKindHasARow) {
  for (int k = 0; k < static_cast<int>(OpKind::Count); ++k) {
    const OpInfo& o = op_info(static_cast<OpKind>(k));
    EXPECT_EQ(std::string(o.name), op_name(static_cast<OpKind>(k)));
    EXPECT_EQ(find_op(o.name), &o);
    if (o.category == OpCategory::Pointwise) {
      EXPECT_NE(o.ref, nullptr) << o.name;
      EXPECT_NE(o.cuda, nullptr) << o.name;
    }
  }
  EXPECT_EQ(find_op("no_such_op"), nullptr);
}

TEST(ShapeInference, Conv2dStridePadDilationGroups) {
  Graph g;
  Tensor x = g.input("x", DType::F16, {"N", 64, 56, 56}, Layout::NHWC);
  TensorDesc wd{DType::F16, {128, 32, 3, 3}, Layout::NHWC, {}};
  Tensor w = g.constant_random("w", wd, "normal", 0, 0.1, 1);
  Tensor y =
      g.conv2d(x, w, {}, {.stride = {2, 2}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 2});
  EXPECT_EQ(shape_str(g.desc(y).shape), "[N, 128, 28, 28]");
  EXPECT_EQ(g.desc(y).layout, Layout::NHWC);
  Tensor y2 = g.conv2d(x, w, {}, {.padding = {2, 2}, .dilation = {2, 2}, .groups = 2});
  EXPECT_EQ(shape_str(g.desc(y2).shape), "[N, 128, 56, 56]");
  EXPECT_NE(err_of([&] { g.conv2d(x, w, {}, {.groups = 3}); }).find("groups"), std::string::npos);
  EXPECT_NE(err_of([&] {
              g.conv2d(x, w, {}, {.stride = {0, 1}, .groups = 2});
            }).find("stride"),
            std::string::npos);
}

TEST(ShapeInference, SymbolicSpatialConv) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 3, "H", "W"});
  Tensor w =
      g.constant_random("w", {DType::F32, {8, 3, 3, 3}, Layout::NCHW, {}}, "normal", 0, 1, 2);
  Tensor y = g.conv2d(x, w, {}, {.stride = {2, 2}, .padding = {1, 1}});
  const Shape& s = g.desc(y).shape;
  EXPECT_FALSE(s[2].is_static());
  EXPECT_EQ(s[2].eval({{"H", 224}}), 112);
  EXPECT_EQ(s[3].eval({{"W", 7}}), 4);
}

TEST(ShapeInference, BroadcastAndDtype) {
  Graph g;
  Tensor a = g.input("a", DType::F32, {"N", 64, 56, 56});
  Tensor b = g.input("b", DType::F32, {1, 64, 1, 1});
  Tensor c = g.add(a, b);
  EXPECT_EQ(shape_str(g.desc(c).shape), "[N, 64, 56, 56]");
  // Mixed dtypes are allowed outside contractions; the output takes the first input's dtype
  // (GRAPH_FORMAT.md's own example multiplies f16 by an f32 scalar).
  Tensor d = g.input("d", DType::F16, {64, 1, 1});
  EXPECT_EQ(g.desc(g.mul(a, d)).dtype, DType::F32);
  EXPECT_EQ(g.desc(g.mul(d, a)).dtype, DType::F16);
  Tensor w = g.input("w", DType::F16, {8, 64, 1, 1});
  EXPECT_NE(err_of([&] { g.conv2d(a, w); }).find("dtype mismatch"), std::string::npos);
  Tensor e = g.input("e", DType::F32, {3, 1, 1});
  EXPECT_NE(err_of([&] { g.add(a, e); }).find("do not broadcast"), std::string::npos);
}

TEST(ShapeInference, MatmulBatchedTransposed) {
  Graph g;
  Tensor a = g.input("a", DType::BF16, {"B", 1, "S", 64});
  Tensor b = g.input("b", DType::BF16, {8, 128, 64});
  Tensor c = g.matmul(a, b, {}, false, true);
  EXPECT_EQ(shape_str(g.desc(c).shape), "[B, 8, S, 128]");
  EXPECT_NE(err_of([&] { g.matmul(a, b); }).find("inner dims"), std::string::npos);
}

TEST(ShapeInference, NormsReductionsPoolsMovement) {
  Graph g;
  Tensor x = g.input("x", DType::F16, {"N", 320, 64, 64}, Layout::NHWC);
  EXPECT_EQ(shape_str(g.desc(g.groupnorm(x, 32)).shape), "[N, 320, 64, 64]");
  EXPECT_NE(err_of([&] { g.groupnorm(x, 33); }).find("groups"), std::string::npos);
  EXPECT_EQ(shape_str(g.desc(g.reduce("reduce_mean", x, {2, 3}, true)).shape), "[N, 320, 1, 1]");
  EXPECT_EQ(shape_str(g.desc(g.reduce("reduce_sum", x, {-1})).shape), "[N, 320, 64]");
  EXPECT_EQ(
      shape_str(
          g.desc(g.maxpool2d(x, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}})).shape),
      "[N, 320, 32, 32]");
  EXPECT_EQ(shape_str(g.desc(g.global_avgpool(x)).shape), "[N, 320, 1, 1]");
  Tensor r = g.reshape(x, {"N", -1});
  EXPECT_EQ(shape_str(g.desc(r).shape), "[N, 1310720]");
  EXPECT_NE(err_of([&] { g.reshape(x, {-1, 7}); }).find("cannot reshape"), std::string::npos);
  Tensor t = g.transpose(x, {0, 2, 3, 1});
  EXPECT_EQ(shape_str(g.desc(t).shape), "[N, 64, 64, 320]");
  EXPECT_NE(err_of([&] { g.transpose(x, {0, 0, 1, 2}); }).find("permutation"), std::string::npos);
  Tensor y = g.input("y", DType::F16, {"S", 768});
  TensorDesc sd{DType::F16, {768}, Layout::NCHW, {}};
  Tensor sc = g.constant_random("sc", sd, "normal", 1, 0.1, 3);
  EXPECT_EQ(shape_str(g.desc(g.layernorm(y, sc, sc)).shape), "[S, 768]");
  Tensor bad = g.constant_random("bad", {DType::F16, {767}, Layout::NCHW, {}}, "normal", 1, 0.1, 3);
  EXPECT_NE(err_of([&] { g.rmsnorm(y, bad); }).find("scale"), std::string::npos);
}

TEST(ShapeInference, AttributeValidation) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {4, 8});
  EXPECT_NE(err_of([&] {
              g.add_node("relu", {x}, {{"alpha", 1.0}});
            }).find("unknown attribute 'alpha'"),
            std::string::npos);
  EXPECT_NE(err_of([&] {
              g.add_node("gelu", {x}, {{"approximate", std::string("fast")}});
            }).find("none|tanh"),
            std::string::npos);
  EXPECT_NE(err_of([&] { g.add_node("frobnicate", {x}); }).find("unknown op"), std::string::npos);
  EXPECT_NE(err_of([&] { g.add_node("add", {x}); }).find("takes 2 inputs"), std::string::npos);
  EXPECT_NE(err_of([&] { g.add_node("cast", {x}); }).find("missing required attribute 'dtype'"),
            std::string::npos);
  EXPECT_EQ(g.desc(g.cast(x, DType::BF16)).dtype, DType::BF16);
}

TEST(Graph, BindSymbols) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 4});
  Tensor y = g.input("y", DType::F32, {"N", 4});
  g.output(g.add(x, y));
  Bindings b = g.bind({{"x", {3, 4}}, {"y", {3, 4}}});
  EXPECT_EQ(b.at("N"), 3);
  EXPECT_NE(err_of([&] {
              g.bind({{"x", {3, 4}}, {"y", {5, 4}}});
            }).find("symbol 'N' is bound to 3"),
            std::string::npos);
  EXPECT_NE(err_of([&] { g.bind({{"x", {3, 5}}}); }).find("expected 4"), std::string::npos);
}

TEST(Graph, PruneDropsDeadNodes) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {4});
  Tensor a = g.relu(x);
  g.exp(x);  // dead
  g.output(g.neg(a));
  EXPECT_EQ(g.nodes().size(), 3u);
  g.prune();
  EXPECT_EQ(g.nodes().size(), 2u);
  EXPECT_EQ(g.tensor(g.outputs()[0]).producer, 1);
}

TEST(ShapeInference, HugeShapesAreUserErrorsNotOverflow) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {int64_t{1} << 40, int64_t{1} << 40});
  EXPECT_NE(err_of([&] { g.reshape(x, {-1}); }).find("64 bits"), std::string::npos);
  EXPECT_NE(err_of([&] { shape_numel(g.desc(x).shape); }).find("overflows"), std::string::npos);
}
