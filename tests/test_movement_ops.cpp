// The byte-moving movement ops (concat, split, slice, expand, tile, depth_to_space,
// space_to_depth, trilu) and pad's reflect and edge modes: shape inference and its located
// errors, the CPU reference against hand-computed values, split's several outputs through the
// graph file, the split-to-slices pass, which ops become views and which copies, and every
// generated copy kernel compiling with NVRTC (sm_80, sm_90).
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
#include "tests/movement_graphs.hpp"
#include "tests/random_input.hpp"
#include "tests/user_error.hpp"

namespace kiln {
namespace {

using test::user_error;

// 0, 1, 2, ... in `shape` (f32, exact).
HostTensor iota(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  return HostTensor::from_f64(DType::F32, shape, v);
}

// The values of output `name` of `g` run on the CPU reference with x = iota.
std::vector<double> run1(const Graph& g, const std::string& name, std::vector<int64_t> shape) {
  return run_reference(g, {{"x", iota(std::move(shape))}}).at(name).to_f64();
}

using V = std::vector<double>;

// ---------------------------------------------------------------- reference values
TEST(MovementOps, ConcatReference) {
  Graph g("concat");
  Tensor x = g.input("x", DType::F32, {2, 2});
  Tensor y = g.constant("y", {DType::F32, {2, 1}, Layout::NCHW, {}},
                        HostTensor::from_f64(DType::F32, {2, 1}, {10, 11}));
  Tensor c1 = g.concat({x, y}, -1), c0 = g.concat({y, x, y}, 1), r = g.concat({x, x}, 0);
  g.output(c1);
  g.output(c0);
  g.output(r);
  EXPECT_EQ(shape_str(g.desc(c1).shape), "[2, 3]");
  auto out = run_reference(g, {{"x", iota({2, 2})}});
  EXPECT_EQ(out.at(g.tensor(c1).name).to_f64(), (V{0, 1, 10, 2, 3, 11}));
  EXPECT_EQ(out.at(g.tensor(c0).name).to_f64(), (V{10, 0, 1, 10, 11, 2, 3, 11}));
  EXPECT_EQ(out.at(g.tensor(r).name).to_f64(), (V{0, 1, 2, 3, 0, 1, 2, 3}));
  // Symbolic dims add up along the axis and must match elsewhere.
  Graph s("sym");
  Tensor a = s.input("a", DType::F16, {"N", 4}), b = s.input("b", DType::F16, {2, 4});
  EXPECT_EQ(shape_str(s.desc(s.concat({a, b, a}, 0)).shape), "[2*N+2, 4]");
}

TEST(MovementOps, SplitReference) {
  Graph g("split");
  Tensor x = g.input("x", DType::F32, {2, 5});
  std::vector<Tensor> p = g.split(x, 1, {2, 3});
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(g.tensor(p[0]).name, "split_0:0");
  g.output(p[0]);
  g.output(p[1]);
  std::vector<Tensor> q =
      g.add_node("split", {x}, {{"axis", int64_t{0}}, {"num_outputs", int64_t{2}}});
  g.output(q[1]);
  auto out = run_reference(g, {{"x", iota({2, 5})}});
  EXPECT_EQ(out.at(g.tensor(p[0]).name).to_f64(), (V{0, 1, 5, 6}));
  EXPECT_EQ(out.at(g.tensor(p[1]).name).to_f64(), (V{2, 3, 4, 7, 8, 9}));
  EXPECT_EQ(out.at(g.tensor(q[1]).name).to_f64(), (V{5, 6, 7, 8, 9}));
  // num_outputs: ceil-sized parts, a smaller last one (7 = 3 + 3 + 1).
  Graph h("split18");
  Tensor z = h.input("x", DType::F32, {7});
  std::vector<Tensor> r = h.add_node("split", {z}, {{"num_outputs", int64_t{3}}});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(shape_str(h.desc(r[2]).shape), "[1]");
  h.output(r[2]);
  EXPECT_EQ(run1(h, h.tensor(r[2]).name, {7}), (V{6}));
}

TEST(MovementOps, SliceReference) {
  Graph g("slice");
  Tensor x = g.input("x", DType::F32, {3, 4});
  // Negative bounds, clamped ends, negative steps (ONNX Slice).
  Tensor a = g.slice(x, {1, -1}, {100, -100}, {0, 1}, {1, -2});  // rows 1..2, cols 3, 1
  Tensor b = g.slice(x, {-2}, {100}, {1});                       // cols 2, 3
  Tensor c = g.slice(x, {2, 0}, {-100, 4}, {}, {-1, 3});         // rows 2, 1, 0, cols 0, 3
  for (Tensor t : {a, b, c}) g.output(t);
  EXPECT_EQ(shape_str(g.desc(a).shape), "[2, 2]");
  EXPECT_EQ(shape_str(g.desc(c).shape), "[3, 2]");
  auto out = run_reference(g, {{"x", iota({3, 4})}});
  EXPECT_EQ(out.at(g.tensor(a).name).to_f64(), (V{7, 5, 11, 9}));
  EXPECT_EQ(out.at(g.tensor(b).name).to_f64(), (V{2, 3, 6, 7, 10, 11}));
  EXPECT_EQ(out.at(g.tensor(c).name).to_f64(), (V{8, 11, 4, 7, 0, 3}));
  // A symbolic dim that is not sliced stays symbolic.
  Tensor s = g.input("s", DType::F32, {"N", 8});
  EXPECT_EQ(shape_str(g.desc(g.slice(s, {2}, {INT64_MAX}, {-1}, {3})).shape), "[N, 2]");
}

TEST(MovementOps, ExpandTileReference) {
  Graph g("et");
  Tensor x = g.input("x", DType::F32, {2, 1});
  Tensor e = g.expand(x, {3, 1, 3});  // both ways: [3, 2, 3]
  Tensor t = g.tile(x, {2, 3});
  g.output(e);
  g.output(t);
  EXPECT_EQ(shape_str(g.desc(e).shape), "[3, 2, 3]");
  EXPECT_EQ(shape_str(g.desc(t).shape), "[4, 3]");
  auto out = run_reference(g, {{"x", iota({2, 1})}});
  EXPECT_EQ(out.at(g.tensor(e).name).to_f64(),
            (V{0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(out.at(g.tensor(t).name).to_f64(), (V{0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1}));
  Tensor s = g.input("s", DType::F32, {"N", 1});
  EXPECT_EQ(shape_str(g.desc(g.expand(s, {1, 4})).shape), "[N, 4]");
  EXPECT_EQ(shape_str(g.desc(g.tile(s, {2, 1})).shape), "[2*N, 1]");
}

TEST(MovementOps, DepthSpaceReference) {
  // x [1, 4, 1, 2] = channels c0 = (0, 1), c1 = (2, 3), c2 = (4, 5), c3 = (6, 7); blocksize 2.
  Graph g("d2s");
  Tensor x = g.input("x", DType::F32, {1, 4, 1, 2});
  Tensor dcr = g.depth_to_space(x, 2, "DCR"), crd = g.depth_to_space(x, 2, "CRD");
  g.output(dcr);
  g.output(crd);
  EXPECT_EQ(shape_str(g.desc(dcr).shape), "[1, 1, 2, 4]");
  auto out = run_reference(g, {{"x", iota({1, 4, 1, 2})}});
  // One output channel: DCR reads channel i*2 + j at block (i, j), as does CRD with C/b^2 = 1.
  EXPECT_EQ(out.at(g.tensor(dcr).name).to_f64(), (V{0, 2, 1, 3, 4, 6, 5, 7}));
  EXPECT_EQ(out.at(g.tensor(crd).name).to_f64(), (V{0, 2, 1, 3, 4, 6, 5, 7}));
  // Two output channels tell DCR and CRD apart: x [1, 8, 1, 1] = 0..7.
  Graph h("d2s8");
  Tensor y = h.input("x", DType::F32, {1, 8, 1, 1});
  Tensor a = h.depth_to_space(y, 2, "DCR"), b = h.depth_to_space(y, 2, "CRD");
  h.output(a);
  h.output(b);
  auto o2 = run_reference(h, {{"x", iota({1, 8, 1, 1})}});
  EXPECT_EQ(o2.at(h.tensor(a).name).to_f64(), (V{0, 2, 4, 6, 1, 3, 5, 7}));
  EXPECT_EQ(o2.at(h.tensor(b).name).to_f64(), (V{0, 1, 2, 3, 4, 5, 6, 7}));
  // space_to_depth inverts DCR.
  Graph k("s2d");
  Tensor z = k.input("x", DType::F32, {1, 2, 2, 4});
  Tensor s = k.space_to_depth(z, 2);
  Tensor back = k.depth_to_space(s, 2);
  k.output(s);
  k.output(back);
  EXPECT_EQ(shape_str(k.desc(s).shape), "[1, 8, 1, 2]");
  auto o3 = run_reference(k, {{"x", iota({1, 2, 2, 4})}});
  EXPECT_EQ(o3.at(k.tensor(s).name).to_f64(),
            (V{0, 2, 8, 10, 1, 3, 9, 11, 4, 6, 12, 14, 5, 7, 13, 15}));
  EXPECT_EQ(o3.at(k.tensor(back).name).to_f64(), iota({1, 2, 2, 4}).to_f64());
}

TEST(MovementOps, PadModesReference) {
  Graph g("padmodes");
  Tensor x = g.input("x", DType::F32, {2, 3});
  auto pad = [&](std::vector<int64_t> p, const char* m) {
    return g.add_node1("pad", {x}, {{"pads", std::move(p)}, {"mode", std::string(m)}});
  };
  Tensor r = pad({0, 2, 1, 1}, "reflect"), e = pad({1, 1, 0, 2}, "edge");
  g.output(r);
  g.output(e);
  auto out = run_reference(g, {{"x", iota({2, 3})}});
  // x = [[0 1 2] [3 4 5]]; reflect: cols 2 1 | 0 1 2 | 1, rows | 0 1 | 0.
  EXPECT_EQ(out.at(g.tensor(r).name).to_f64(),
            (V{2, 1, 0, 1, 2, 1, 5, 4, 3, 4, 5, 4, 2, 1, 0, 1, 2, 1}));
  // edge: row 0 repeated before; col 0 once before, col 2 twice after.
  EXPECT_EQ(out.at(g.tensor(e).name).to_f64(),
            (V{0, 0, 1, 2, 2, 2, 0, 0, 1, 2, 2, 2, 3, 3, 4, 5, 5, 5}));
}

TEST(MovementOps, TriluReference) {
  Graph g("trilu");
  Tensor x = g.input("x", DType::F32, {3, 3});
  Tensor u = g.trilu(x), l = g.trilu(x, false, -1), u1 = g.trilu(x, true, 1);
  for (Tensor t : {u, l, u1}) g.output(t);
  auto out = run_reference(g, {{"x", iota({3, 3})}});
  EXPECT_EQ(out.at(g.tensor(u).name).to_f64(), (V{0, 1, 2, 0, 4, 5, 0, 0, 8}));
  EXPECT_EQ(out.at(g.tensor(l).name).to_f64(), (V{0, 0, 0, 3, 0, 0, 6, 7, 0}));
  EXPECT_EQ(out.at(g.tensor(u1).name).to_f64(), (V{0, 1, 2, 0, 0, 5, 0, 0, 0}));
}

// ---------------------------------------------------------------- errors
TEST(MovementOps, BadInputIsALocatedError) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 3, 4, 6});
  Tensor y = g.input("y", DType::F32, {"N", 3, 5, 6});
  std::string e = user_error([&] { g.add_node1("concat", {x, y}, {{"axis", int64_t{1}}}, "cat"); });
  EXPECT_NE(e.find("node 'cat' (concat): input 1 ('y') has shape [N, 3, 5, 6] but input 0 ('x') "
                   "has [N, 3, 4, 6]: dim 2 differs (5 vs 4; only the concat axis 1 may)"),
            std::string::npos)
      << e;
  e = user_error([&] { g.concat({x, g.input("h", DType::F16, {"N", 3, 4, 6})}, 0); });
  EXPECT_NE(e.find("dtype mismatch: input 1 ('h') is f16"), std::string::npos) << e;
  e = user_error([&] { g.concat({x}, 4); });
  EXPECT_NE(e.find(".axis: axis 4 out of range for rank 4"), std::string::npos) << e;
  e = user_error([&] { g.slice(x, {0}, {2}, {5}); });
  EXPECT_NE(e.find(".axes[0]: axis 5 out of range for rank 4"), std::string::npos) << e;
  e = user_error([&] { g.slice(x, {0}, {2}, {0}); });
  EXPECT_NE(e.find("a sliced dim (dim 0 of 'x') must be a static size, found symbolic 'N'"),
            std::string::npos)
      << e;
  e = user_error([&] { g.slice(x, {3}, {1}, {2}); });
  EXPECT_NE(e.find(".starts[0]: slice of axis 2 (size 4) from 3 to 1 step 1 is empty"),
            std::string::npos)
      << e;
  e = user_error([&] { g.slice(x, {0}, {2}, {2}, {0}); });
  EXPECT_NE(e.find(".steps[0]: a step must not be 0"), std::string::npos) << e;
  e = user_error([&] { g.split(x, 3, {2, 3}); });
  EXPECT_NE(e.find(".split: the sizes [2, 3] sum to 5, not to the split axis's 6"),
            std::string::npos)
      << e;
  e = user_error([&] { g.add_node("split", {x}, {{"axis", int64_t{1}}}); });
  EXPECT_NE(e.find("give split (the output sizes) or num_outputs (equal parts), found neither"),
            std::string::npos)
      << e;
  e = user_error([&] { g.depth_to_space(x, 2); });
  EXPECT_NE(e.find(".blocksize: the 3 channels of 'x' are not divisible by blocksize^2 = 4"),
            std::string::npos)
      << e;
  e = user_error([&] { g.space_to_depth(y, 2); });
  EXPECT_NE(e.find(".blocksize: the height 5 of 'y' is not divisible by blocksize 2"),
            std::string::npos)
      << e;
  e = user_error([&] { g.expand(x, {2, 3, 1, 1}); });
  EXPECT_NE(e.find("do not broadcast"), std::string::npos) << e;
  e = user_error([&] { g.tile(x, {1, 2}); });
  EXPECT_NE(e.find(".repeats: expected 4 integers"), std::string::npos) << e;
  e = user_error([&] {
    g.add_node1(
        "pad", {x},
        {{"pads", std::vector<int64_t>{0, 0, 0, 6, 0, 0, 0, 0}}, {"mode", std::string("reflect")}});
  });
  EXPECT_NE(e.find(".pads: reflect pads of dim 3 (6 before, 0 after) must be smaller than its "
                   "size 6"),
            std::string::npos)
      << e;
  e = user_error([&] { g.trilu(g.input("v", DType::F32, {5})); });
  EXPECT_NE(e.find("must be a matrix [..., rows, cols] (rank >= 2)"), std::string::npos) << e;
}

// ---------------------------------------------------------------- several outputs
TEST(MovementOps, SplitThroughTheGraphFile) {
  const std::string text = R"({"kiln": 1,
    "inputs": {"x": {"dtype": "f32", "shape": ["N", 6]}},
    "nodes": [{"op": "split", "name": "sp", "inputs": ["x"], "outputs": ["a", "b", "c"],
               "axis": 1, "split": [1, 2, 3]},
              {"op": "relu", "inputs": ["c"], "outputs": ["rc"]}],
    "outputs": ["a", "rc"]})";
  Graph g = load_graph_string(text, "s.json");
  ASSERT_EQ(g.nodes()[0].outputs.size(), 3u);
  EXPECT_EQ(shape_str(g.desc({g.find("b")}).shape), "[N, 2]");
  auto out = run_reference(g, {{"x", iota({2, 6})}});
  EXPECT_EQ(out.at("a").to_f64(), (V{0, 6}));
  EXPECT_EQ(out.at("rc").to_f64(), (V{3, 4, 5, 9, 10, 11}));
  // Saved and loaded again: the same node with its three outputs.
  Graph again = load_graph_string(save_graph_string(g), "again.json");
  EXPECT_EQ(again.nodes()[0].outputs.size(), 3u);
  // The output count must match the sizes.
  std::string bad = text;
  bad.replace(bad.find("[\"a\", \"b\", \"c\"]"), 15, "[\"a\", \"b\", \"c\", \"d\"]");
  std::string e = user_error([&] { load_graph_string(bad, "s.json"); });
  EXPECT_NE(e.find("s.json: nodes[0] (sp).outputs: op split has 3 outputs, found 4 output names"),
            std::string::npos)
      << e;
}

// Split becomes one slice per output before planning (fusion on or off), computing the same.
TEST(MovementOps, SplitLoweredToSlices) {
  auto g = std::make_shared<Graph>("split");
  Tensor x = g->input("x", DType::F16, {"N", 4, 32});
  std::vector<Tensor> p = g->split(x, 1, {1, 3});
  g->output(g->relu(p[1]));
  g->output(p[0]);
  for (bool fusion : {true, false}) {
    std::string note;
    std::shared_ptr<const Graph> f = apply_engine_passes(g, fusion, &note);
    ASSERT_NE(f.get(), g.get());
    EXPECT_NE(note.find("splits lowered to one slice per output: split_0 (2 slices)"),
              std::string::npos)
        << note;
    int slices = 0;
    for (const Node& n : f->nodes()) {
      EXPECT_EQ(n.outputs.size(), 1u) << n.name;
      slices += n.op == OpKind::Slice;
    }
    EXPECT_EQ(slices, 2);
    EXPECT_EQ(f->nodes()[1].name, "split_0.1");
    EXPECT_EQ(f->tensor(f->nodes()[1].outputs[0]).producer, 1);
    HostTensor in = test::random_input(DType::F16, {3, 4, 32}, Layout::NCHW, 7);
    auto want = run_reference(*g, {{"x", in}}), got = run_reference(*f, {{"x", in}});
    for (const auto& [name, t] : want) EXPECT_EQ(got.at(name).to_f64(), t.to_f64()) << name;
  }
}

// ---------------------------------------------------------------- planning and codegen
// Which movement ops are views (no kernel) and which are copy kernels, and what fuses.
TEST(MovementOps, PlanGoldenViewsAndCopies) {
  auto g = std::make_shared<Graph>("mv");
  Tensor x = g->input("x", DType::F16, {"N", 8, 16});
  Tensor r = g->reshape(g->relu(x), {"N", 128});  // a view of the relu's output
  Tensor c = g->concat({x, x}, 2);                // a copy (no prologue: two inputs)
  Tensor s = g->slice(g->exp(x), {0}, {4}, {1});  // a copy with the exp as its prologue
  std::vector<Tensor> sp = g->split(x, 2, {8, 8});
  Tensor e = g->expand(g->input("b", DType::F16, {1, 16}), {"N", 8, 16});
  for (Tensor t : {r, c, s, sp[0], sp[1], g->add(e, x)}) g->output(t);
  std::shared_ptr<const Graph> f = apply_engine_passes(g, true);
  Plan p = plan_fusion(*f);
  std::vector<std::string> got;
  for (const FusionGroup& grp : p.groups) {
    std::string ops;
    for (int n : grp.nodes) ops += (ops.empty() ? "" : " ") + f->nodes()[n].name;
    got.push_back(fmt::format("{}: {}", group_kind_name(grp.kind), ops));
  }
  // In execution order. The reshape is a view, and so is the expand the add reads (stride 0
  // along the broadcast dims: engine/passes/slice_views.cpp); the concat of graph inputs, the
  // slice and the split's two slices, graph outputs all (the caller's buffers), are one copy
  // kernel each; the add joins the relu horizontally (both read x).
  const std::vector<std::string> want = {
      "copy: concat_2", "copy: exp_3 slice_4",     "copy: split_5.0", "copy: split_5.1",
      "view: expand_6", "pointwise: relu_0 add_7", "view: reshape_1",
  };
  EXPECT_EQ(got, want) << plan_to_string(*f, p);
  const std::string text = plan_to_string(*f, p);
  EXPECT_NE(text.find("prologue: exp_3 (exp) fused into slice_4's input"), std::string::npos)
      << text;
}

// Every copy kernel of tests/movement_graphs.hpp, in every dtype, fused and not, compiles with
// NVRTC for sm_80 and sm_90 (one program per arch: one prelude, each kernel renamed).
TEST(MovementOps, EveryCopyKernelCompiles) {
  std::vector<test::GraphBuilder> builds;
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (const test::MovementGraph& mg : test::movement_graphs(dt)) builds.push_back(mg.build);
  EXPECT_GT(test::compile_every_kernel(builds, "movement_batch"), 150);
}

// The vector path: a concat along NHWC channels stores 16-byte vectors whose lanes come from
// either input; a slice of 16 innermost elements too; trilu's scalar path copies storage
// elements bit-exactly and stores zero elsewhere.
TEST(MovementOps, CopyKernelShapes) {
  Graph g("v");
  Tensor c = g.input("c", DType::F16, {"N", 3, 5, 8}, Layout::NHWC);
  Tensor e = g.input("e", DType::F16, {"N", 5, 5, 8}, Layout::NHWC);
  g.output(g.concat({c, e}, 1));
  auto ks = generate_kernels(g, plan_fusion(g));
  ASSERT_EQ(ks.size(), 1u);
  std::string body = ks[0].source.substr(ks[0].source.find("extern \"C\""));
  EXPECT_NE(body.find("kiln_stv(t"), std::string::npos) << body;
  EXPECT_NE(body.find("} else {"), std::string::npos) << body;
  EXPECT_EQ(ks[0].name, "copy_f16_concat");

  Graph t("t");
  t.output(t.trilu(t.input("s", DType::BF16, {5, 7}), false, 0));
  auto kt = generate_kernels(t, plan_fusion(t));
  ASSERT_EQ(kt.size(), 1u);
  body = kt[0].source.substr(kt[0].source.find("extern \"C\""));
  EXPECT_NE(body.find("if (o_1 - o_0 <= 0) t_1["), std::string::npos) << body;
  EXPECT_NE(body.find("else kiln_st(t_1 + "), std::string::npos) << body;
  EXPECT_NO_THROW(nvrtc_compile(kt[0].source, kt[0].name, "sm_90"));
}

}  // namespace
}  // namespace kiln
