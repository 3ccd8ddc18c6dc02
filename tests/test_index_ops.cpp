// argmax / argmin and range: the CPU reference against hand-computed values (ties, NaN as
// onnxruntime treats it, integer inputs, every axis, keepdims; ranges of each dtype and of a
// symbolic length), located errors, the plan (range runs inside a pointwise kernel; argmax takes a
// prologue) and NVRTC compiles of each kernel form.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "codegen/nvrtc.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/error.hpp"
#include "kiln/graph.hpp"
#include "kiln/reference.hpp"
#include "tests/user_error.hpp"

namespace kiln {
namespace {

using Dims = std::vector<int64_t>;
using Vals = std::vector<double>;
using I64s = std::vector<int64_t>;
const double kNan = std::numeric_limits<double>::quiet_NaN();

I64s arg(const std::string& op, DType dt, Dims shape, const Vals& x, int64_t axis, int64_t keep,
         int64_t last, Dims* out_shape = nullptr) {
  Graph g("arg");
  Tensor xi = g.input("x", dt, Shape(shape.begin(), shape.end()));
  Tensor y =
      g.add_node1(op, {xi}, {{"axis", axis}, {"keepdims", keep}, {"select_last_index", last}});
  g.output(y);
  EXPECT_EQ(g.tensor(y).desc.dtype, DType::I64);
  auto out = run_reference(g, {{"x", HostTensor::from_f64(dt, shape, x)}});
  const HostTensor& h = out.at(g.tensor(y).name);
  if (out_shape) *out_shape = h.shape;
  return h.to_i64();
}

TEST(ArgReduce, FirstOrLastIndexOfTheExtreme) {
  const Vals x{1, 5, 5, 2, 0, 0};
  EXPECT_EQ(arg("argmax", DType::F32, {6}, x, 0, 0, 0), (I64s{1}));
  EXPECT_EQ(arg("argmax", DType::F32, {6}, x, 0, 0, 1), (I64s{2}));
  EXPECT_EQ(arg("argmin", DType::F32, {6}, x, 0, 0, 0), (I64s{4}));
  EXPECT_EQ(arg("argmin", DType::F32, {6}, x, 0, 0, 1), (I64s{5}));
  // [2, 3]: along rows and columns, keepdims.
  const Vals m{3, 1, 3, 0, 7, -1};
  Dims s;
  EXPECT_EQ(arg("argmax", DType::F32, {2, 3}, m, 1, 1, 0, &s), (I64s{0, 1}));
  EXPECT_EQ(s, (Dims{2, 1}));
  EXPECT_EQ(arg("argmax", DType::F32, {2, 3}, m, 1, 0, 1, &s), (I64s{2, 1}));
  EXPECT_EQ(s, (Dims{2}));
  EXPECT_EQ(arg("argmin", DType::F32, {2, 3}, m, 0, 1, 0, &s), (I64s{1, 0, 1}));
  EXPECT_EQ(s, (Dims{1, 3}));
  EXPECT_EQ(arg("argmin", DType::F32, {2, 3}, m, -2, 0, 0), (I64s{1, 0, 1}));
  // A line of one.
  EXPECT_EQ(arg("argmax", DType::F16, {3, 1}, {1, 2, 3}, 1, 0, 0), (I64s{0, 0, 0}));
}

TEST(ArgReduce, NanAsOnnxruntime) {
  // onnxruntime 1.32 scans from the first element and replaces the best only by a strictly
  // better value (or an equal one with select_last_index): a NaN first stays, another never wins.
  for (int64_t last : {0, 1}) {
    EXPECT_EQ(arg("argmax", DType::F32, {3}, {kNan, 1, 2}, 0, 0, last), (I64s{0}));
    EXPECT_EQ(arg("argmax", DType::F32, {3}, {1, kNan, 2}, 0, 0, last), (I64s{2}));
    EXPECT_EQ(arg("argmax", DType::F32, {3}, {1, 2, kNan}, 0, 0, last), (I64s{1}));
    EXPECT_EQ(arg("argmax", DType::F32, {3}, {kNan, kNan, 1}, 0, 0, last), (I64s{0}));
    EXPECT_EQ(arg("argmin", DType::F32, {3}, {3, kNan, 2}, 0, 0, last), (I64s{2}));
    EXPECT_EQ(arg("argmin", DType::F32, {3}, {1, kNan, kNan}, 0, 0, last), (I64s{0}));
  }
}

TEST(ArgReduce, IntegerInputsAreExact) {
  // Values beyond 2^53 differ by one: compared as integers.
  const int64_t big = (int64_t{1} << 60);
  Graph g("argi");
  Tensor x = g.input("x", DType::I64, {3});
  Tensor y = g.add_node1("argmax", {x}, {{"keepdims", int64_t{0}}});
  Tensor z = g.add_node1("argmin", {x}, {{"keepdims", int64_t{0}}});
  g.output(y);
  g.output(z);
  auto out = run_reference(
      g, {{"x", HostTensor::from_i64(DType::I64, {3}, {big, big + 1, big - 1}, Layout::NCHW)}});
  EXPECT_EQ(out.at(g.tensor(y).name).to_i64(), (I64s{1}));
  EXPECT_EQ(out.at(g.tensor(z).name).to_i64(), (I64s{2}));
  EXPECT_EQ(arg("argmax", DType::I32, {2, 2}, {4, 4, -1, 7}, 1, 0, 1), (I64s{1, 1}));
}

Graph range_graph(double start, double delta, Dim len, const char* dtype, Tensor* y) {
  Graph g("range");
  g.input("x", DType::F32, {"S"});
  *y = g.add_node1("range", {},
                   {{"start", start},
                    {"delta", delta},
                    {"length", std::vector<Dim>{len}},
                    {"dtype", std::string(dtype)}},
                   "pos");
  g.output(*y);
  return g;
}

TEST(Range, ValuesOfEachDtype) {
  Tensor y;
  Graph g = range_graph(3, -2, Dim("S"), "i64", &y);
  EXPECT_EQ(g.tensor(y).desc.dtype, DType::I64);
  EXPECT_EQ(shape_str(g.tensor(y).desc.shape), "[S]");
  auto run = [&](const Graph& gr, int64_t s) {
    return run_reference(gr, {{"x", HostTensor::from_f64(DType::F32, {s}, Vals(s, 0.0))}})
        .at(gr.tensor(y).name);
  };
  EXPECT_EQ(run(g, 4).to_i64(), (I64s{3, 1, -1, -3}));
  Graph gi = range_graph(0, 1, Dim("S"), "i32", &y);
  EXPECT_EQ(run(gi, 5).to_i64(), (I64s{0, 1, 2, 3, 4}));
  Graph gf = range_graph(-1.5, 0.25, Dim(5), "f32", &y);
  EXPECT_EQ(run(gf, 2).to_f64(), (Vals{-1.5, -1.25, -1, -0.75, -0.5}));
  // f16 rounds each value once: 0.1 steps.
  Graph gh = range_graph(0, 0.1, Dim(3), "f16", &y);
  Vals h = run(gh, 2).to_f64();
  EXPECT_NEAR(h[1], 0.1, 1e-4);
  EXPECT_NEAR(h[2], 0.2, 1e-4);
}

TEST(Range, BadNodesAreLocatedUserErrors) {
  using test::user_error;
  Graph g;
  auto attrs = [](Attrs extra) {
    Attrs a{{"length", std::vector<Dim>{Dim(4)}}, {"dtype", std::string("i64")}};
    for (auto& [k, v] : extra) a[k] = v;
    return a;
  };
  std::string e = user_error([&] {
    g.add_node1("range", {}, attrs({{"length", std::vector<Dim>{Dim(2), Dim(2)}}}), "pos");
  });
  EXPECT_NE(e.find("node 'pos' (range).length: expected one size (the output length), found 2"),
            std::string::npos)
      << e;
  e = user_error([&] { g.add_node1("range", {}, attrs({{"start", 0.5}}), "pos"); });
  EXPECT_NE(e.find("node 'pos' (range).start: an i64 range takes integers"), std::string::npos)
      << e;
  e = user_error([&] { g.add_node1("range", {}, {{"length", std::vector<Dim>{Dim(4)}}}, "pos"); });
  EXPECT_NE(e.find("missing required attribute 'dtype' of op range"), std::string::npos) << e;
  Tensor x = g.input("x", DType::F32, {4});
  e = user_error([&] { g.add_node1("range", {x}, attrs({}), "pos"); });
  EXPECT_NE(e.find("op range takes 0 inputs, found 1"), std::string::npos) << e;
  e = user_error([&] { g.add_node1("argmax", {x}, {{"keepdims", int64_t{2}}}, "am"); });
  EXPECT_NE(e.find("node 'am' (argmax).keepdims: expected 0 or 1, found 2"), std::string::npos)
      << e;
  Tensor b = g.input("b", DType::Bool, {4});
  e = user_error([&] { g.add_node1("argmin", {b}, {}, "am"); });
  EXPECT_NE(e.find("node 'am' (argmin).inputs[0]: argmin takes a numeric tensor"),
            std::string::npos)
      << e;
}

// ---------------------------------------------------------------- plan and codegen
TEST(IndexOpsPlanner, RangeFusesIntoPointwiseArgmaxTakesAPrologue) {
  Graph g("idx");
  Tensor x = g.input("x", DType::F16, {"N", "S"});
  Tensor pos = g.add_node1(
      "range", {}, {{"length", std::vector<Dim>{Dim("S")}}, {"dtype", std::string("f32")}}, "pos");
  Tensor h = g.add_node1(
      "add", {x, g.add_node1("cast", {pos}, {{"dtype", std::string("f16")}}, "c")}, {}, "h");
  g.output(g.add_node1("argmax", {g.add_node1("exp", {h}, {}, "e")}, {{"axis", int64_t{1}}}, "am"));
  Tensor ids = g.add_node1(
      "range", {}, {{"length", std::vector<Dim>{Dim("S")}}, {"dtype", std::string("i64")}}, "ids");
  g.output(g.add_node1("mul", {ids, ids}, {}, "sq"));
  Plan p = plan_fusion(g);
  std::vector<std::vector<std::string>> groups;
  for (const FusionGroup& grp : p.groups) {
    std::vector<std::string> names;
    for (int n : grp.nodes) names.push_back(g.nodes()[n].name);
    groups.push_back(names);
  }
  // pos and its cast run in their own pointwise kernel ([S]); add and exp are argmax's prologue.
  EXPECT_EQ(groups,
            (std::vector<std::vector<std::string>>{{"pos", "c"}, {"h", "e", "am"}, {"ids", "sq"}}));
  EXPECT_EQ(p.groups[1].kind, GroupKind::Reduction);
}

void compile_all(const Graph& g) {
  for (int sm : {80, 90}) {
    CodegenOptions co;
    co.sm = sm;
    for (const KernelSpec& k : generate_kernels(g, plan_fusion(g), co)) {
      try {
        NvrtcResult r = nvrtc_compile(k.source, k.name, fmt::format("sm_{}", sm));
        EXPECT_FALSE(r.cubin.empty()) << k.name;
      } catch (const Error& e) {
        ADD_FAILURE() << g.name() << ": " << k.name << " for sm_" << sm << ": " << e.what();
      }
    }
  }
}

TEST(IndexOpsCodegen, EveryFormCompiles) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64}) {
    Graph g(fmt::format("arg_{}", dtype_name(dt)));
    // Thread-per-output (axis 0), warp (short inner lines), CTA (long ones), symbolic, NHWC.
    for (Dim len : {Dim(7), Dim(100), Dim(5000), Dim("L")}) {
      Tensor x = g.input(fmt::format("x{}", len.str()), dt, {"N", 3, len});
      for (int64_t ax : {0, 2})
        for (const char* op : {"argmax", "argmin"})
          for (int64_t last : {0, 1})
            g.output(g.add_node1(op, {x}, {{"axis", ax}, {"select_last_index", last}}));
      if (is_float(dt))
        g.output(g.add_node1("argmax", {g.add_node1("tanh", {x})}, {{"axis", int64_t{2}}}));
    }
    Tensor m = g.input("m", dt, {2, 7, 5, 4}, Layout::NHWC);
    g.output(g.add_node1("argmin", {m}, {{"axis", int64_t{1}}}));
    compile_all(g);
  }
  Graph r("ranges");
  Tensor x = r.input("x", DType::F32, {"S"});
  for (const char* dt : {"f32", "f16", "bf16", "i32", "i64"}) {
    Tensor y = r.add_node1("range", {},
                           {{"start", 2.0},
                            {"delta", 3.0},
                            {"length", std::vector<Dim>{Dim("S")}},
                            {"dtype", std::string(dt)}});
    r.output(y);
  }
  r.output(r.add(
      x, r.add_node1("range", {},
                     {{"length", std::vector<Dim>{Dim("S")}}, {"dtype", std::string("f32")}})));
  compile_all(r);
}

}  // namespace
}  // namespace kiln
