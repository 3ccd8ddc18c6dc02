// gather and gather_elements (ONNX Gather, GatherElements): shape inference and its located
// errors, the CPU reference against hand-computed values (several axes, negative indices, scalar
// indices, i32 and i64 indices, f16 and integer data), an index out of range as a located error,
// the copy kernel's index load and error word, and every kernel of tests/gather_graphs.hpp
// compiling with NVRTC (sm_80, sm_90).
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
#include "kiln/kiln.h"
#include "kiln/reference.hpp"
#include "tests/gather_graphs.hpp"
#include "tests/kernel_batch.hpp"
#include "tests/user_error.hpp"

namespace kiln {
namespace {

using test::user_error;
using V = std::vector<double>;

HostTensor iota(DType dt, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  return HostTensor::from_f64(dt, shape, v);
}
HostTensor ints(DType dt, std::vector<int64_t> shape, std::vector<int64_t> v) {
  return HostTensor::from_i64(dt, std::move(shape), v);
}

// ---------------------------------------------------------------- shapes
TEST(Gather, ShapeInference) {
  Graph g("shapes");
  Tensor x = g.input("x", DType::F16, {"N", 7, 5});
  Tensor i = g.input("i", DType::I64, {2, 3});
  Tensor s = g.input("s", DType::I32, std::vector<Dim>{});
  EXPECT_EQ(shape_str(g.desc(g.gather(x, i, 0)).shape), "[2, 3, 7, 5]");
  EXPECT_EQ(shape_str(g.desc(g.gather(x, i, 1)).shape), "[N, 2, 3, 5]");
  EXPECT_EQ(shape_str(g.desc(g.gather(x, i, -1)).shape), "[N, 7, 2, 3]");
  EXPECT_EQ(shape_str(g.desc(g.gather(x, s, 1)).shape), "[N, 5]");
  EXPECT_EQ(g.desc(g.gather(x, s, 1)).dtype, DType::F16);
  Tensor v = g.input("v", DType::F32, {4});
  EXPECT_EQ(g.desc(g.gather(v, s, 0)).rank(), 0);  // a 0-D result
  Tensor e = g.input("e", DType::I32, {"N", 9, 5});
  EXPECT_EQ(shape_str(g.desc(g.gather_elements(x, e, 1)).shape), "[N, 9, 5]");
  Tensor f = g.input("f", DType::I64, {"N", 7, 2});
  EXPECT_EQ(shape_str(g.desc(g.gather_elements(x, f, 1)).shape), "[N, 7, 2]");  // smaller: fine
}

TEST(Gather, BadInputIsALocatedError) {
  Graph g("bad");
  Tensor x = g.input("x", DType::F32, {4, 5});
  Tensor fi = g.input("fi", DType::F32, {2});
  Tensor i = g.input("i", DType::I64, {2});
  std::string m = user_error([&] { g.add_node1("gather", {x, fi}, {}, "emb"); });
  EXPECT_NE(m.find("node 'emb'"), std::string::npos) << m;
  EXPECT_NE(m.find(".inputs[1]: gather takes i32 or i64 indices, got f32 'fi'"), std::string::npos)
      << m;
  m = user_error([&] { g.add_node1("gather_elements", {x, fi}, {{"axis", int64_t{1}}}, "ge"); });
  EXPECT_NE(m.find("gather_elements takes i32 or i64 indices, got f32 'fi'"), std::string::npos)
      << m;
  m = user_error([&] { g.add_node1("gather", {x, i}, {{"axis", int64_t{2}}}, "g2"); });
  EXPECT_NE(m.find(".axis: axis 2 out of range for 'x' of rank 2"), std::string::npos) << m;
  m = user_error([&] { g.add_node1("gather_elements", {x, i}, {}, "ge2"); });
  EXPECT_NE(m.find(".inputs[1]: the indices 'i' [2] must have the rank of the data 'x' [4, 5] (2)"),
            std::string::npos)
      << m;
  Tensor wide = g.input("wide", DType::I64, {3, 6});
  m = user_error([&] { g.add_node1("gather_elements", {x, wide}, {}, "ge3"); });
  EXPECT_NE(m.find("dim 1 of the indices 'wide' [3, 6] is 6 but the data 'x' [4, 5] has 5 there "
                   "(only the axis 0 may be larger)"),
            std::string::npos)
      << m;
  Tensor s = g.input("s", DType::F32, std::vector<Dim>{});
  m = user_error([&] { g.add_node1("gather", {s, i}, {}, "g0"); });
  EXPECT_NE(m.find("must be a tensor of rank >= 1"), std::string::npos) << m;
  // Bool data is fine (movement), bool indices are not.
  Tensor b = g.input("b", DType::Bool, {2});
  EXPECT_NO_THROW(g.gather(b, i, 0));
  m = user_error([&] { g.gather(x, b, 0); });
  EXPECT_NE(m.find("takes i32 or i64 indices, got bool 'b'"), std::string::npos) << m;
}

// ---------------------------------------------------------------- reference values
TEST(Gather, ReferenceAxesAndNegativeIndices) {
  Graph g("ref");
  Tensor x = g.input("x", DType::F32, {3, 4});  // rows [0..3], [4..7], [8..11]
  Tensor i = g.input("i", DType::I64, {2, 2});
  Tensor j = g.input("j", DType::I32, {3});
  Tensor a0 = g.gather(x, i, 0), a1 = g.gather(x, j, 1), an = g.gather(x, j, -1);
  for (Tensor t : {a0, a1, an}) g.output(t);
  auto out = run_reference(g, {{"x", iota(DType::F32, {3, 4})},
                               {"i", ints(DType::I64, {2, 2}, {2, 0, -1, -3})},
                               {"j", ints(DType::I32, {3}, {3, -4, 1})}});
  EXPECT_EQ(shape_str(g.desc(a0).shape), "[2, 2, 4]");
  EXPECT_EQ(out.at(g.tensor(a0).name).to_f64(),
            (V{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11, 0, 1, 2, 3}));
  EXPECT_EQ(out.at(g.tensor(a1).name).to_f64(), (V{3, 0, 1, 7, 4, 5, 11, 8, 9}));
  EXPECT_EQ(out.at(g.tensor(an).name).to_f64(), out.at(g.tensor(a1).name).to_f64());
}

TEST(Gather, ReferenceScalarIndexF16AndMiddleAxis) {
  Graph g("scalar");
  Tensor x = g.input("x", DType::F16, {2, 3, 2});
  Tensor s = g.input("s", DType::I64, std::vector<Dim>{});
  Tensor m = g.gather(x, s, 1);                              // [2, 2]
  Tensor v = g.gather(g.input("v", DType::F16, {5}), s, 0);  // 0-D
  g.output(m);
  g.output(v);
  HostTensor xv = HostTensor::from_f64(DType::F16, {2, 3, 2},
                                       {0.5, 1, 1.5, 2, 2.5, 3, -0.5, -1, -1.5, -2, -2.5, -3});
  auto out = run_reference(g, {{"x", xv},
                               {"s", ints(DType::I64, {}, {-2})},
                               {"v", HostTensor::from_f64(DType::F16, {5}, {9, 8, 7, 6, 5})}});
  EXPECT_EQ(out.at(g.tensor(m).name).dtype, DType::F16);
  EXPECT_EQ(out.at(g.tensor(m).name).to_f64(), (V{1.5, 2, -1.5, -2}));  // index 1
  EXPECT_EQ(out.at(g.tensor(v).name).to_f64(), (V{6}));                 // index 3
}

TEST(Gather, ReferenceIntegerDataIsExact) {
  Graph g("ints");
  Tensor x = g.input("x", DType::I64, {2, 3});
  Tensor i = g.input("i", DType::I32, {2});
  Tensor y = g.gather(x, i, 1);
  g.output(y);
  const int64_t big = (int64_t{1} << 60) + 1;  // beyond 2^53: exact through the slots
  auto out = run_reference(g, {{"x", ints(DType::I64, {2, 3}, {1, big, -3, 4, 5, -big})},
                               {"i", ints(DType::I32, {2}, {-1, 1})}});
  EXPECT_EQ(out.at(g.tensor(y).name).to_i64(), (std::vector<int64_t>{-3, big, -big, 5}));
}

TEST(Gather, ReferenceGatherElements) {
  Graph g("elements");
  Tensor x = g.input("x", DType::F32, {3, 3});  // ONNX's example: [[1,2,3],[4,5,6],[7,8,9]] - 1
  Tensor i = g.input("i", DType::I64, {2, 3});
  Tensor j = g.input("j", DType::I32, {3, 2});
  Tensor e0 = g.gather_elements(x, i, 0), e1 = g.gather_elements(x, j, -1);
  g.output(e0);
  g.output(e1);
  auto out = run_reference(g, {{"x", iota(DType::F32, {3, 3})},
                               {"i", ints(DType::I64, {2, 3}, {1, 2, 0, 2, 0, -3})},
                               {"j", ints(DType::I32, {3, 2}, {0, 0, 1, 0, -1, 2})}});
  // out[i][j] = x[idx[i][j]][j] and x[i][idx[i][j]].
  EXPECT_EQ(out.at(g.tensor(e0).name).to_f64(), (V{3, 7, 2, 6, 1, 2}));
  EXPECT_EQ(out.at(g.tensor(e1).name).to_f64(), (V{0, 0, 4, 3, 8, 8}));
}

TEST(Gather, ReferenceIndexOutOfRangeIsALocatedError) {
  Graph g("oob");
  Tensor x = g.input("x", DType::F32, {3, 4});
  Tensor i = g.input("i", DType::I64, {2, 2});
  g.output(g.add_node1("gather", {x, i}, {{"axis", int64_t{1}}}, "emb"));
  std::string m = user_error([&] {
    run_reference(g,
                  {{"x", iota(DType::F32, {3, 4})}, {"i", ints(DType::I64, {2, 2}, {0, 3, 4, 1})}});
  });
  EXPECT_NE(m.find("node 'emb'"), std::string::npos) << m;
  EXPECT_NE(m.find("index out of range: indices[1, 0] is 4, outside [-4, 4) for axis 1"),
            std::string::npos)
      << m;
  m = user_error([&] {
    run_reference(
        g, {{"x", iota(DType::F32, {3, 4})}, {"i", ints(DType::I64, {2, 2}, {0, -5, 1, 1})}});
  });
  EXPECT_NE(m.find("indices[0, 1] is -5, outside [-4, 4)"), std::string::npos) << m;
  Graph e("oob_elements");
  Tensor ex = e.input("x", DType::F32, {3, 4});
  e.output(e.add_node1("gather_elements", {ex, e.input("i", DType::I32, {1, 2})},
                       {{"axis", int64_t{0}}}, "pick"));
  m = user_error([&] {
    run_reference(e, {{"x", iota(DType::F32, {3, 4})}, {"i", ints(DType::I32, {1, 2}, {2, 3})}});
  });
  EXPECT_NE(m.find("node 'pick'"), std::string::npos) << m;
  EXPECT_NE(m.find("indices[0, 1] is 3, outside [-3, 3) for axis 0"), std::string::npos) << m;
}

TEST(Gather, ThroughTheGraphFile) {
  Graph g = load_graph_string(R"({"kiln": 1,
    "inputs": {"ids": {"dtype": "i64", "shape": ["S"]}},
    "constants": {"w": {"dtype": "f32", "shape": [3, 2], "data": [0, 1, 2, 3, 4, 5]}},
    "nodes": [{"op": "gather", "name": "wte", "inputs": ["w", "ids"], "outputs": ["e"]}],
    "outputs": ["e"]})",
                              "emb.json");
  auto out = run_reference(g, {{"ids", ints(DType::I64, {3}, {2, -3, 1})}});
  EXPECT_EQ(out.at("e").to_f64(), (V{4, 5, 0, 1, 2, 3}));
  EXPECT_NE(save_graph_string(g).find("\"op\": \"gather\""), std::string::npos);
}

// Through the C ABI: an index out of range is KILN_ERROR_USER with the located message, and the
// next call with good indices runs.
TEST(Gather, CAbiIndexOutOfRangeIsAUserError) {
  kiln_graph g = nullptr;
  ASSERT_EQ(kiln_graph_load_string(R"({"kiln": 1,
    "inputs": {"ids": {"dtype": "i64", "shape": ["S"]}},
    "constants": {"w": {"dtype": "f32", "shape": [3, 2], "data": [0, 1, 2, 3, 4, 5]}},
    "nodes": [{"op": "gather", "name": "wte", "inputs": ["w", "ids"], "outputs": ["e"]}],
    "outputs": ["e"]})",
                                   nullptr, &g),
            KILN_OK)
      << kiln_last_error();
  std::vector<int64_t> ids = {1, 3};
  std::vector<float> e(4, -1.0f);
  kiln_host_tensor in{"ids", ids.data(), 16, 1, {2}};
  kiln_host_tensor out{"e", e.data(), 16, 0, {}};
  EXPECT_EQ(kiln_run_host(g, &in, 1, &out, 1), KILN_ERROR_USER);
  const std::string m = kiln_last_error();
  EXPECT_NE(m.find("node 'wte'"), std::string::npos) << m;
  EXPECT_NE(m.find("indices[1] is 3, outside [-3, 3)"), std::string::npos) << m;
  ids = {-1, 0};
  EXPECT_EQ(kiln_run_host(g, &in, 1, &out, 1), KILN_OK) << kiln_last_error();
  EXPECT_EQ(e, (std::vector<float>{4, 5, 0, 1}));
  kiln_graph_destroy(g);
}

// ---------------------------------------------------------------- codegen
// The kernel loads the index, normalizes it, reports and clamps one out of range, and takes the
// error word as its last parameter; a graph without gathers has no error word.
TEST(Gather, CopyKernelLoadsTheIndexAndReportsOutOfRange) {
  Graph g("emb");
  TensorDesc wd;
  wd.dtype = DType::F16;
  wd.shape = {1000, 64};
  Tensor w = g.constant_random("wte", wd, "uniform", -1, 1, 3);
  g.output(g.gather(w, g.input("ids", DType::I64, {"B", "S"}), 0));
  auto ks = generate_kernels(g, plan_fusion(g));
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].name, "copy_f16_gather");
  const std::string body = ks[0].source.substr(ks[0].source.find("extern \"C\""));
  EXPECT_NE(body.find("long long gi_0 = kiln_ld("), std::string::npos) << body;
  EXPECT_NE(body.find("if (gi_0 < 0) gi_0 += 1000LL;"), std::string::npos) << body;
  EXPECT_NE(body.find("atomicOr(kiln_err, 1u);"), std::string::npos) << body;
  EXPECT_NE(body.find("kiln_stv(t"), std::string::npos) << body;  // 64 f16: vectors
  EXPECT_NE(body.find("unsigned int* __restrict__ kiln_err)"), std::string::npos) << body;
  ASSERT_FALSE(ks[0].args.empty());
  EXPECT_EQ(ks[0].args.back().kind, KernelArg::Kind::ErrorWord);
  EXPECT_NO_THROW(nvrtc_compile(ks[0].source, ks[0].name, "sm_90"));

  Graph t("t");
  t.output(t.transpose(t.input("x", DType::F32, {3, 5}), {1, 0}));
  for (const KernelSpec& k : generate_kernels(t, plan_fusion(t)))
    for (const KernelArg& a : k.args) EXPECT_NE(a.kind, KernelArg::Kind::ErrorWord) << k.name;
}

// Constant indices all in range (a channel shuffle's) need no check: no clamp, no error word, so
// a run has nothing to read back; a constant index out of range keeps both and is reported.
TEST(Gather, ConstantIndicesInRangeNeedNoErrorWord) {
  for (int64_t bad : {0, 1}) {
    Graph g("shuffle");
    Tensor x = g.input("x", DType::F16, {"N", 6, 4, 4}, Layout::NHWC);
    Tensor idx = g.constant("idx", TensorDesc{DType::I64, {6}, Layout::NCHW, {}},
                            ints(DType::I64, {6}, {0, 3, 1, 4, 2, bad ? 6 : -1}));
    g.output(g.relu(g.gather(x, idx, 1)));
    auto ks = generate_kernels(g, plan_fusion(g));
    int words = 0;
    for (const KernelSpec& k : ks)
      for (const KernelArg& a : k.args) words += a.kind == KernelArg::Kind::ErrorWord;
    EXPECT_EQ(words, bad);
    const std::string body = ks[0].source.substr(ks[0].source.find("extern \"C\""));
    EXPECT_EQ(body.find("atomicOr") != std::string::npos, bad == 1) << body;
    EXPECT_NO_THROW(nvrtc_compile(ks[0].source, ks[0].name, "sm_90"));
  }
}

// BERT's embedding block: both lookups fuse into the layernorm's prologue (one row-norm kernel
// reading the tables through the ids, one error word per lookup); unfused, each lookup is a copy
// kernel. A lookup whose result is also a graph output keeps its own kernel.
TEST(Gather, EmbeddingLookupsFuseIntoTheRowNorm) {
  for (const test::GatherGraph& gg : test::gather_graphs(DType::F16)) {
    if (gg.name != "gather_embedding_layernorm_d64_f16") continue;
    std::shared_ptr<Graph> g = gg.build();
    Plan p = plan_fusion(*g);
    ASSERT_EQ(p.groups.size(), 1u) << plan_to_string(*g, p);
    EXPECT_EQ(p.groups[0].kind, GroupKind::RowNorm);
    EXPECT_EQ(p.groups[0].nodes.size(), 4u);
    const std::string text = plan_to_string(*g, p);
    EXPECT_NE(text.find("(gather) read through by layernorm"), std::string::npos) << text;
    auto ks = generate_kernels(*g, p);
    ASSERT_EQ(ks.size(), 1u);
    int words = 0;
    for (const KernelArg& a : ks[0].args) words += a.kind == KernelArg::Kind::ErrorWord;
    EXPECT_EQ(words, 2);
    const std::string body = ks[0].source.substr(ks[0].source.find("extern \"C\""));
    EXPECT_NE(body.find("atomicOr(kiln_err0, 1u);"), std::string::npos) << body;
    EXPECT_NE(body.find("atomicOr(kiln_err1, 1u);"), std::string::npos) << body;
    EXPECT_NO_THROW(nvrtc_compile(ks[0].source, ks[0].name, "sm_90"));
    PlanOptions off;
    off.fusion = false;
    EXPECT_EQ(plan_fusion(*g, off).groups.size(), 4u);
    // The first lookup's result is also an output: it is materialized by its own copy kernel.
    g->output(Tensor{g->nodes()[0].outputs[0]});
    Plan p2 = plan_fusion(*g);
    EXPECT_EQ(p2.groups.size(), 2u) << plan_to_string(*g, p2);
  }
}

// Every kernel of tests/gather_graphs.hpp, in every dtype, fused and not, compiles with NVRTC for
// sm_80 and sm_90 (one program per arch: one prelude, each kernel renamed).
TEST(Gather, EveryKernelCompiles) {
  std::vector<test::GraphBuilder> builds;
  for (const test::GatherGraph& gg : test::gather_int_graphs()) builds.push_back(gg.build);
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (const test::GatherGraph& gg : test::gather_graphs(dt)) builds.push_back(gg.build);
  EXPECT_GT(test::compile_every_kernel(builds, "gather_batch"), 60);
}

}  // namespace
}  // namespace kiln
