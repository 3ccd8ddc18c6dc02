// The resize op: shape inference and its located errors, the CPU reference against
// hand-computed values in every coordinate and nearest mode (align_corners and
// pytorch_half_pixel with an output size of 1 too), which kernel each mode becomes, and every
// generated resize kernel compiling with NVRTC (sm_80, sm_90).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <numeric>

#include "codegen/kernel_spec.hpp"
#include "codegen/nvrtc.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/error.hpp"
#include "kiln/graph.hpp"
#include "kiln/io.hpp"
#include "kiln/reference.hpp"
#include "tests/kernel_batch.hpp"
#include "tests/resize_graphs.hpp"
#include "tests/user_error.hpp"

namespace kiln {
namespace {

using test::user_error;
using V = std::vector<double>;

HostTensor iota(std::vector<int64_t> shape, DType dt = DType::F32) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  return HostTensor::from_f64(dt, shape, v);
}

// The values of `t` with input x = `in`.
std::vector<double> run(const Graph& g, Tensor t, const HostTensor& in) {
  return run_reference(g, {{"x", in}}).at(g.tensor(t).name).to_f64();
}

void expect_near(const V& got, const V& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "element " << i;
}

// ---------------------------------------------------------------- reference values
// x = 0, 1, 2, 3 along one spatial dim, resized to 3 (scale 0.75): source coordinates
// half_pixel (o + 0.5) / 0.75 - 0.5 = 1/6, 1.5, 17/6; asymmetric o / 0.75 = 0, 4/3, 8/3;
// align_corners o * 3 / 2 = 0, 1.5, 3.
TEST(Resize, NearestEveryModeReference) {
  struct Case {
    const char* coord;
    const char* round;
    V want;
  };
  const std::vector<Case> cases = {
      {"half_pixel", "round_prefer_floor", {0, 1, 3}},  // the tie 1.5 goes down
      {"half_pixel", "round_prefer_ceil", {0, 2, 3}},
      {"half_pixel", "floor", {0, 1, 2}},
      {"half_pixel", "ceil", {1, 2, 3}},
      {"pytorch_half_pixel", "round_prefer_floor", {0, 1, 3}},
      {"asymmetric", "round_prefer_floor", {0, 1, 3}},
      {"asymmetric", "floor", {0, 1, 2}},
      {"asymmetric", "ceil", {0, 2, 3}},
      {"align_corners", "round_prefer_floor", {0, 1, 3}},
      {"align_corners", "round_prefer_ceil", {0, 2, 3}},
  };
  for (const Case& c : cases) {
    Graph g("near");
    Tensor x = g.input("x", DType::F32, {1, 1, 4});
    Tensor y = g.resize_to(x, {1, 1, 3}, "nearest", c.coord, c.round);
    g.output(y);
    EXPECT_EQ(run(g, y, iota({1, 1, 4})), c.want) << c.coord << " " << c.round;
  }
  // An output size of 1: align_corners and pytorch_half_pixel read coordinate 0; half_pixel
  // (scale 1/4) reads (0.5) * 4 - 0.5 = 1.5, rounded down to 1.
  for (auto [coord, want] : std::vector<std::pair<const char*, double>>{
           {"align_corners", 0}, {"pytorch_half_pixel", 0}, {"half_pixel", 1}, {"asymmetric", 0}}) {
    Graph g("one");
    Tensor x = g.input("x", DType::F32, {1, 1, 4});
    Tensor y = g.resize_to(x, {1, 1, 1}, "nearest", coord);
    g.output(y);
    EXPECT_EQ(run(g, y, iota({1, 1, 4})), (V{want})) << coord;
  }
}

TEST(Resize, NearestUpsamplePlanesAndIntegers) {
  // UNet's x2 (asymmetric, floor) of [[0 1] [2 3]]: each element a 2x2 block.
  Graph g("up");
  Tensor x = g.input("x", DType::F32, {1, 1, 2, 2});
  Tensor y = g.resize(x, {1, 1, 2, 2}, "nearest", "asymmetric", "floor");
  g.output(y);
  EXPECT_EQ(shape_str(g.desc(y).shape), "[1, 1, 4, 4]");
  EXPECT_EQ(run(g, y, iota({1, 1, 2, 2})), (V{0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3}));
  // Every (N, C) plane resizes on its own; integers are copied exactly.
  Graph h("planes");
  Tensor z = h.input("x", DType::I64, {2, 2, 1, 1});
  Tensor w = h.resize(z, {1, 1, 2, 1});
  h.output(w);
  EXPECT_EQ(run(h, w, iota({2, 2, 1, 1}, DType::I64)), (V{0, 0, 1, 1, 2, 2, 3, 3}));
}

TEST(Resize, LinearEveryModeReference) {
  // Linear of x = 0, 1, 2, 3 is the clamped source coordinate itself.
  const std::vector<std::pair<const char*, V>> down = {
      {"half_pixel", {1.0 / 6, 1.5, 17.0 / 6}},
      {"pytorch_half_pixel", {1.0 / 6, 1.5, 17.0 / 6}},
      {"align_corners", {0, 1.5, 3}},
      {"asymmetric", {0, 4.0 / 3, 8.0 / 3}},
  };
  for (const auto& [coord, want] : down) {
    Graph g("lin");
    Tensor x = g.input("x", DType::F32, {1, 1, 4});
    Tensor y = g.resize_to(x, {1, 1, 3}, "linear", coord);
    g.output(y);
    expect_near(run(g, y, iota({1, 1, 4})), want);
  }
  // x2 of 0, 1: half_pixel coordinates -0.25, 0.25, 0.75, 1.25 clamp into [0, 1];
  // align_corners o / 3; asymmetric o / 2 (the last one clamped); size 1: coordinate 0.
  const std::vector<std::pair<const char*, V>> up = {
      {"half_pixel", {0, 0.25, 0.75, 1}},
      {"align_corners", {0, 1.0 / 3, 2.0 / 3, 1}},
      {"asymmetric", {0, 0.5, 1, 1}},
  };
  for (const auto& [coord, want] : up) {
    Graph g("linup");
    Tensor x = g.input("x", DType::F32, {1, 1, 2});
    Tensor y = g.resize(x, {1, 1, 2}, "linear", coord);
    g.output(y);
    expect_near(run(g, y, iota({1, 1, 2})), want);
  }
  for (const char* coord : {"align_corners", "pytorch_half_pixel"}) {
    Graph g("lin1");
    Tensor x = g.input("x", DType::F32, {1, 1, 4});
    Tensor y = g.resize_to(x, {1, 1, 1}, "linear", coord);
    g.output(y);
    expect_near(run(g, y, iota({1, 1, 4})), {0});
  }
}

TEST(Resize, BilinearAndTrilinearReference) {
  // x[i][j] = i * j over 2x2 (0 0 / 0 1): bilinear is exact on it, at half steps.
  Graph g("bi");
  Tensor x = g.input("x", DType::F32, {1, 1, 2, 2});
  Tensor y = g.resize_to(x, {1, 1, 3, 3}, "linear", "align_corners");
  g.output(y);
  expect_near(run(g, y, HostTensor::from_f64(DType::F32, {1, 1, 2, 2}, {0, 0, 0, 1})),
              {0, 0, 0, 0, 0.25, 0.5, 0, 0.5, 1});
  // x = 4z + 2y + x over 2x2x2 (iota): trilinear is exact on it.
  Graph t("tri");
  Tensor a = t.input("x", DType::F32, {1, 2, 2, 2, 2});
  Tensor b = t.resize_to(a, {1, 2, 3, 3, 3}, "linear", "align_corners");
  t.output(b);
  V want;
  for (int c = 0; c < 2; ++c)
    for (int z = 0; z < 3; ++z)
      for (int yy = 0; yy < 3; ++yy)
        for (int xx = 0; xx < 3; ++xx) want.push_back(8 * c + 2 * z + yy + 0.5 * xx);
  expect_near(run(t, b, iota({1, 2, 2, 2, 2})), want);
}

// ---------------------------------------------------------------- shapes and errors
TEST(Resize, ShapeInference) {
  Graph g("shapes");
  Tensor x = g.input("x", DType::F16, {"N", 3, 5, 7});
  // floor(5 * 0.5) = 2, floor(7 * 1.5) = 10.
  EXPECT_EQ(shape_str(g.desc(g.resize(x, {1, 1, 0.5, 1.5})).shape), "[N, 3, 2, 10]");
  EXPECT_EQ(shape_str(g.desc(g.resize_to(x, {"N", 3, 10, 12})).shape), "[N, 3, 10, 12]");
  Tensor s = g.input("s", DType::F32, {"N", 3, "H", 8}, Layout::NHWC);
  Tensor y = g.resize(s, {1, 1, 2, 1}, "linear");
  EXPECT_EQ(shape_str(g.desc(y).shape), "[N, 3, 2*H, 8]");
  EXPECT_EQ(g.desc(y).layout, Layout::NHWC);
}

TEST(Resize, BadInputIsALocatedError) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 3, 4, 6});
  auto node = [&](Attrs a) { return g.add_node1("resize", {x}, std::move(a), "up"); };
  const std::vector<double> x2 = {1, 1, 2, 2};
  std::string e = user_error([&] { node({{"scales", x2}, {"mode", std::string("cubic")}}); });
  EXPECT_NE(e.find("node 'up' (resize).mode: unsupported resize mode 'cubic'"), std::string::npos)
      << e;
  e = user_error([&] {
    node({{"scales", x2}, {"coordinate_transformation_mode", std::string("tf_crop_and_resize")}});
  });
  EXPECT_NE(e.find(".coordinate_transformation_mode: unsupported coordinate transformation mode "
                   "'tf_crop_and_resize'"),
            std::string::npos)
      << e;
  e = user_error([&] { node({{"scales", x2}, {"exclude_outside", int64_t{1}}}); });
  EXPECT_NE(e.find(".exclude_outside: only 0 is supported"), std::string::npos) << e;
  e = user_error([&] { node({{"scales", x2}, {"antialias", int64_t{1}}}); });
  EXPECT_NE(e.find(".antialias: only 0 is supported"), std::string::npos) << e;
  e = user_error([&] { node({{"scales", x2}, {"extrapolation_value", 1.5}}); });
  EXPECT_NE(e.find(".extrapolation_value: only 0 is supported"), std::string::npos) << e;
  e = user_error([&] { g.resize(x, {1, 2, 2, 2}); });
  EXPECT_NE(e.find(".scales[1]: resizing the channel dim is not supported (scale 2"),
            std::string::npos)
      << e;
  e = user_error([&] { g.resize_to(x, {"M", 3, 8, 8}); });
  EXPECT_NE(e.find(".sizes[0]: resizing the batch dim is not supported (N to M"), std::string::npos)
      << e;
  e = user_error([&] { node({}); });
  EXPECT_NE(e.find("give scales or sizes (one per dim of 'x'), found neither"), std::string::npos)
      << e;
  e = user_error([&] { node({{"scales", x2}, {"sizes", std::vector<Dim>{1, 3, 8, 8}}}); });
  EXPECT_NE(e.find("found both"), std::string::npos) << e;
  e = user_error([&] { g.resize(x, {1, 1, 2}); });
  EXPECT_NE(e.find(".scales: expected 4 values (one per dim of 'x' [N, 3, 4, 6]), found 3"),
            std::string::npos)
      << e;
  e = user_error([&] { g.resize(x, {1, 1, 0, 2}); });
  EXPECT_NE(e.find(".scales[2]: expected a positive scale, found 0"), std::string::npos) << e;
  e = user_error([&] { g.resize(x, {1, 1, 0.1, 2}); });
  EXPECT_NE(e.find(".scales[2]: dim 2 of size 4 times 0.1 gives 0"), std::string::npos) << e;
  e = user_error([&] { g.resize(g.input("m", DType::F32, {4, 6}), {2, 2}); });
  EXPECT_NE(e.find("must be [N, C, spatial...] with 1 to 3 spatial dims (rank 3..5), found"),
            std::string::npos)
      << e;
  e = user_error([&] { g.resize(g.input("h", DType::F32, {"N", 3, "H", 6}), {1, 1, 1.5, 1}); });
  EXPECT_NE(e.find(".scales[2]: the symbolic dim 'H' of 'h' resizes by integer scales only"),
            std::string::npos)
      << e;
  e = user_error([&] { g.resize(g.input("i", DType::I32, {1, 3, 4, 6}), x2, "linear"); });
  EXPECT_NE(e.find("linear resize takes a floating tensor, found i32 'i'"), std::string::npos) << e;
}

// ---------------------------------------------------------------- planning and codegen
TEST(Resize, KernelsAndPrologues) {
  Graph g("k");
  Tensor x = g.input("x", DType::F16, {"N", 16, 5, 6}, Layout::NHWC);
  g.output(g.resize(g.relu(x), {1, 1, 2, 2}, "nearest", "asymmetric", "floor"));
  g.output(g.resize(g.sigmoid(x), {1, 1, 2, 2}, "linear"));
  Plan p = plan_fusion(g);
  ASSERT_EQ(p.groups.size(), 2u) << plan_to_string(g, p);
  for (const FusionGroup& grp : p.groups) EXPECT_EQ(grp.nodes.size(), 2u);  // prologue fused
  auto ks = generate_kernels(g, p);
  ASSERT_EQ(ks.size(), 2u);
  // The nearest copy and the linear kernel (named linear2d), each with its prologue's op.
  std::string near, lin;
  for (const KernelSpec& k : ks) {
    const std::string body = k.source.substr(k.source.find("extern \"C\""));
    (k.name.find("_linear2d_") != std::string::npos ? lin : near) = body;
    EXPECT_NE(k.name.find(k.name.find("linear") != std::string::npos ? "sigmoid" : "relu"),
              std::string::npos)
        << k.name;
  }
  // Nearest: floorf of the coordinate, a 16-byte store of 8 channels.
  EXPECT_NE(near.find("floorf(((float)(o"), std::string::npos) << near;
  EXPECT_NE(near.find("kiln_stv("), std::string::npos) << near;
  // Linear: four corners of one pixel, 8 channels a thread.
  EXPECT_NE(lin.find("corner 3"), std::string::npos) << lin;
  EXPECT_NE(lin.find("kiln_stv(t"), std::string::npos) << lin;
  for (const KernelSpec& k : ks) EXPECT_NO_THROW(nvrtc_compile(k.source, k.name, "sm_90"));
}

// Every resize kernel of tests/resize_graphs.hpp, in every dtype, fused and not, compiles with
// NVRTC for sm_80 and sm_90 (one program per arch: one prelude, each kernel renamed).
TEST(Resize, EveryKernelCompiles) {
  std::vector<test::GraphBuilder> builds;
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (const test::MovementGraph& mg : test::resize_graphs(dt)) builds.push_back(mg.build);
  EXPECT_GT(test::compile_every_kernel(builds, "resize_batch"), 100);
}

}  // namespace
}  // namespace kiln
