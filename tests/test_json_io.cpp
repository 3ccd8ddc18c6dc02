// Graph files: loading through the builder, saving, exact round trips over every op.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <fmt/format.h>

#include "engine/ir/json_io.hpp"
#include "engine/ir/op_table.hpp"
#include "kiln/error.hpp"
#include "kiln/io.hpp"
#include "tests/test_paths.hpp"
#include "tests/user_error.hpp"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

using test::user_error;

fs::path temp_dir(const std::string& tag) {
  fs::path d = fs::temp_directory_path() / fmt::format("kiln_json_io_{}_{}", tag, getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  f << s;
}

TensorDesc desc(DType t, Shape s, Layout l = Layout::NCHW) {
  return TensorDesc{t, std::move(s), l, {}};
}

Tensor data_const(Graph& g, const std::string& name, DType t, std::vector<int64_t> shape,
                  double start) {
  std::vector<double> v;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  for (int64_t i = 0; i < n; ++i) v.push_back(start + 0.37 * static_cast<double>(i) - 1.1);
  Shape s(shape.begin(), shape.end());
  return g.constant(name, desc(t, s), HostTensor::from_f64(t, shape, v));
}

// One graph that uses every op of the op table, most with non-default attributes.
Graph all_ops_graph() {
  Graph g("all_ops");
  Tensor x = g.input("x", DType::F32, {"N", 8, 6, 6}, Layout::NHWC);
  Tensor m = g.input("m", DType::F32, {"B", 5, 7});
  std::vector<Tensor> outs;
#define KILN_X(E, n)                                                                 \
  if (std::string(#n) == "cast")                                                     \
    outs.push_back(g.add_node1(#n, {x}, {{"dtype", std::string("bf16")}}, "u_" #n)); \
  else                                                                               \
    outs.push_back(g.add_node1(#n, {x}, {}, "u_" #n));
  KILN_UNARY_OPS(KILN_X)
#undef KILN_X
  outs.push_back(g.leaky_relu(x, 0.2));
  outs.push_back(g.gelu(x, GeluApprox::Tanh));
  outs.push_back(g.clamp(x, -1.0, 2.5));
  outs.push_back(g.add_node1("elu", {x}, {{"alpha", 0.5}}));
  outs.push_back(g.add_node1("clamp", {x}, {{"min", 0.0}}));  // max stays +inf
  Tensor per_c = data_const(g, "per_c", DType::F32, {1, 8, 1, 1}, 0.25);
#define KILN_X(E, n) outs.push_back(g.add_node1(#n, {x, per_c}, {}, "b_" #n));
  KILN_BINARY_OPS(KILN_X)
#undef KILN_X
  Tensor w =
      g.constant_random("w", desc(DType::F32, {16, 4, 3, 3}, Layout::NHWC), "normal", 0.5, 0.1, 7);
  Tensor bias = data_const(g, "bias", DType::F32, {16}, 0.0);
  outs.push_back(g.conv2d(
      x, w, bias, {.stride = {2, 1}, .padding = {1, 0, 2, 1}, .dilation = {1, 2}, .groups = 2}));
  Tensor b =
      g.constant_random("b", desc(DType::F32, {7, 3}), "uniform", -0.5, 0.5, 0xffffffffffffffffull);
  Tensor mb = data_const(g, "mb", DType::F32, {3}, 1.0);
  outs.push_back(g.matmul(m, b, mb));
  Tensor bt = data_const(g, "bt", DType::F32, {3, 7}, 2.0);
  outs.push_back(g.matmul(m, bt, {}, false, true));
  std::vector<Tensor> bn;
  for (const char* n : {"bn_scale", "bn_bias", "bn_mean", "bn_var"})
    bn.push_back(data_const(g, n, DType::F32, {8}, 3.0));
  outs.push_back(g.batchnorm(x, bn[0], bn[1], bn[2], bn[3], 1e-3));
  Tensor ln_s = data_const(g, "ln_s", DType::F32, {6, 6}, 0.5);
  outs.push_back(g.layernorm(x, ln_s, ln_s, -2, 1e-6));
  outs.push_back(g.rmsnorm(x, {}, -1, 1e-5));
  outs.push_back(g.groupnorm(x, 4, bn[0], bn[1], 2e-5));
  outs.push_back(g.instancenorm(x));
  outs.push_back(g.softmax(x, 1));
  outs.push_back(g.reduce("reduce_sum", x, {2, 3}, true));
  outs.push_back(g.reduce("reduce_mean", x, {1}));
  outs.push_back(g.reduce("reduce_max", x, {}));
  outs.push_back(g.reduce("reduce_min", x, {-1}, true));
  outs.push_back(g.maxpool2d(x, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}));
  outs.push_back(
      g.add_node1("avgpool2d", {x},
                  {{"kernel", std::vector<int64_t>{2, 2}}, {"count_include_pad", int64_t{1}}}));
  outs.push_back(g.global_avgpool(x));
  outs.push_back(g.reshape(x, {"N", -1}));
  outs.push_back(g.reshape(x, {0, 8, 36}));
  outs.push_back(g.transpose(x, {0, 2, 3, 1}));
  outs.push_back(g.pad(x, {0, 1, 0, 2, 0, 7, 1, 0}, -1.5));
  outs.push_back(g.pad(m, {0, 0, 1, 0, 0, 0}));  // value 0 by default
  outs.push_back(g.add_node1("log_softmax", {x}, {{"axis", int64_t{2}}}));
  outs.push_back(g.reduce("reduce_l2", x, {1, 3}, true));
  outs.push_back(g.reduce("reduce_prod", m, {0}));
  outs.push_back(g.add_node1("cumsum", {m}, {{"axis", int64_t{-2}}, {"reverse", int64_t{1}}}));
  outs.push_back(g.add_node1(
      "pad", {x},
      {{"pads", std::vector<int64_t>{0, 0, 1, 2, 0, 0, 3, 1}}, {"mode", std::string("reflect")}}));
  outs.push_back(g.concat({x, x}, 1));
  for (Tensor t : g.split(x, 2, {2, 4})) outs.push_back(t);  // several outputs
  outs.push_back(g.slice(x, {1, -1}, {5, -7}, {2, 3}, {1, -2}));
  outs.push_back(g.expand(x, {2, 1, 1, 1, 1}));
  outs.push_back(g.tile(x, {1, 2, 1, 3}));
  outs.push_back(g.depth_to_space(x, 2, "CRD"));
  outs.push_back(g.space_to_depth(x, 3));
  outs.push_back(g.trilu(x, false, -1));
  outs.push_back(g.resize(x, {1, 1, 1.5, 2}, "linear", "align_corners"));  // float list
  outs.push_back(g.resize_to(x, {"N", 8, 3, 12}, "nearest", "asymmetric", "floor"));
  // conv_transpose2d (grouped, strided, output_padding), argmax / argmin, range of a symbol.
  outs.push_back(g.add_node1("conv_transpose2d",
                             {x, data_const(g, "wt", DType::F32, {8, 3, 3, 3}, 0.1)},
                             {{"stride", std::vector<int64_t>{2, 2}},
                              {"padding", std::vector<int64_t>{1, 0, 1, 2}},
                              {"output_padding", std::vector<int64_t>{1, 0}},
                              {"groups", int64_t{2}}}));
  outs.push_back(
      g.add_node1("argmax", {x}, {{"axis", int64_t{-1}}, {"select_last_index", int64_t{1}}}));
  outs.push_back(g.add_node1("argmin", {m}, {{"keepdims", int64_t{0}}}));
  outs.push_back(g.add_node1("range", {},
                             {{"start", 2.0},
                              {"delta", 3.0},
                              {"length", std::vector<Dim>{Dim("N")}},
                              {"dtype", std::string("i64")}}));
  // f16 / bf16 constants and a strided input.
  Tensor h = g.input("h", desc(DType::F16, {4, 6}));
  Tensor hc = data_const(g, "hc", DType::F16, {4, 6}, 0.1);
  outs.push_back(g.add(h, hc));
  Tensor bf = g.input("bf", desc(DType::BF16, {"S", 6}));
  Tensor bfc = data_const(g, "bfc", DType::BF16, {6}, -3.3);
  outs.push_back(g.mul(bf, bfc));
  TensorDesc sd = desc(DType::F32, {3, 4}, Layout::Strided);
  sd.strides = {1, 3};
  Tensor st = g.input("st", sd);
  outs.push_back(g.neg(st));
  // Integer and bool tensors: comparisons, logical ops, mod, where.
  Tensor ids = g.input("ids", desc(DType::I64, {"N", 6}));
  Tensor k32 = g.input("k32", desc(DType::I32, {6}));
  Tensor mask = g.input("mask", desc(DType::Bool, {"N", 6}));
  outs.push_back(g.add_node1("mod", {ids, k32}, {{"fmod", int64_t{1}}}));
  for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"})
    outs.push_back(g.add_node1(op, {ids, k32}));
  for (const char* op : {"and", "or", "xor"}) outs.push_back(g.add_node1(op, {mask, mask}));
  outs.push_back(g.add_node1("not", {mask}));
  outs.push_back(g.where(mask, ids, g.cast(k32, DType::I64)));
  // Index-driven movement: i32 and i64 indices, a negative axis, indices of the data's rank.
  outs.push_back(g.gather(x, k32, 1));
  outs.push_back(g.gather(m, ids, -1));
  Tensor gi = g.input("gi", desc(DType::I64, {"N", 3, 6, 6}));
  outs.push_back(g.gather_elements(x, gi, 1));
  // Ragged attention: i32 offsets over symbolic token counts, GQA, a causal window.
  Tensor aq = g.input("aq", desc(DType::F16, {"T", 4, 16}));
  Tensor ak = g.input("ak", desc(DType::F16, {"Tk", 2, 16}));
  Tensor cu = g.input("cu", desc(DType::I32, {"Bp1"}));
  outs.push_back(
      g.attention_varlen(aq, ak, ak, cu, cu, {.scale = 0.25, .causal = true, .window_left = 3}));
  for (Tensor t : outs) g.output(t);
  return g;
}

// Same tensors (by name), nodes (in order) and attributes. `same_ids`: tensor ids match too (a
// loaded graph against its reload; a builder graph may order constants differently).
// same_sources: constants also say where their data came from alike (off where a save moved
// inline data to a weights file).
void expect_same_graph(const Graph& a, const Graph& b, bool same_ids = true,
                       bool same_sources = true) {
  EXPECT_EQ(a.name(), b.name());
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  ASSERT_EQ(a.nodes().size(), b.nodes().size());
  auto names = [](const Graph& g, const std::vector<int>& ids) {
    std::vector<std::string> v;
    for (int id : ids) v.push_back(g.tensor(id).name);
    return v;
  };
  EXPECT_EQ(names(a, a.inputs()), names(b, b.inputs()));
  EXPECT_EQ(names(a, a.outputs()), names(b, b.outputs()));
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const TensorInfo& x = a.tensors()[i];
    int j = b.find(x.name);
    ASSERT_GE(j, 0) << x.name;
    if (same_ids) EXPECT_EQ(static_cast<int>(i), j) << x.name;
    const TensorInfo& y = b.tensors()[j];
    EXPECT_EQ(x.desc.str(), y.desc.str()) << x.name;
    EXPECT_EQ(x.desc.layout, y.desc.layout) << x.name;
    EXPECT_EQ(x.role, y.role) << x.name;
    EXPECT_EQ(x.producer, y.producer) << x.name;
    ASSERT_EQ(x.data.has_value(), y.data.has_value()) << x.name;
    if (x.data) {
      EXPECT_EQ(x.data->shape, y.data->shape) << x.name;
      EXPECT_TRUE(x.data->data == y.data->data) << x.name << ": constant bytes differ";
      if (!same_sources) continue;
      EXPECT_EQ(x.source.kind, y.source.kind) << x.name;
      EXPECT_EQ(x.source.file, y.source.file) << x.name;
      EXPECT_EQ(x.source.key, y.source.key) << x.name;
      EXPECT_EQ(x.source.dist, y.source.dist) << x.name;
      EXPECT_EQ(x.source.a, y.source.a) << x.name;
      EXPECT_EQ(x.source.b, y.source.b) << x.name;
      EXPECT_EQ(x.source.seed, y.source.seed) << x.name;
    }
  }
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    const Node& x = a.nodes()[i];
    const Node& y = b.nodes()[i];
    EXPECT_EQ(x.op, y.op);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(names(a, x.inputs), names(b, y.inputs)) << x.name;
    EXPECT_EQ(names(a, x.outputs), names(b, y.outputs)) << x.name;
    EXPECT_TRUE(x.attrs == y.attrs) << x.name << ": attributes differ";
  }
}

}  // namespace

TEST(JsonIo, RoundTripEveryOp) {
  Graph g = all_ops_graph();
  // Every op of the table is covered.
  std::vector<bool> seen(static_cast<size_t>(OpKind::Count), false);
  for (const Node& n : g.nodes()) seen[static_cast<size_t>(n.op)] = true;
  for (size_t k = 0; k < seen.size(); ++k)
    EXPECT_TRUE(seen[k]) << "all_ops_graph lacks op " << op_name(static_cast<OpKind>(k));

  std::string s1 = save_graph_string(g);
  Graph g2 = load_graph_string(s1, "all_ops.json");
  expect_same_graph(g, g2, false);
  std::string s2 = save_graph_string(g2);
  EXPECT_EQ(s1, s2);
  Graph g3 = load_graph_string(s2, "all_ops.json");
  expect_same_graph(g2, g3);
  EXPECT_EQ(save_graph_string(g3), s1);
  // Every attribute is written, defaults included; infinity as a string.
  EXPECT_NE(s1.find("\"max\": \"inf\""), std::string::npos);
  EXPECT_NE(s1.find("\"count_include_pad\": 1"), std::string::npos);
  EXPECT_NE(s1.find("\"transpose_a\": 0"), std::string::npos);
  EXPECT_NE(s1.find("\"shape\": [\"N\", -1]"), std::string::npos);
  EXPECT_NE(s1.find("\"seed\": 18446744073709551615"), std::string::npos);
  EXPECT_NE(s1.find("\"strides\": [1, 3]"), std::string::npos);
  EXPECT_NE(s1.find("\"pads\": [0, 1, 0, 2, 0, 7, 1, 0]"), std::string::npos);
  EXPECT_NE(s1.find("\"value\": -1.5"), std::string::npos);
  EXPECT_NE(s1.find("\"scales\": [1.0, 1.0, 1.5, 2.0]"), std::string::npos) << s1;
  EXPECT_NE(s1.find("\"sizes\": [\"N\", 8, 3, 12]"), std::string::npos) << s1;
}

TEST(JsonIo, InlineDataRoundTripsExactly) {
  Graph g("exact");
  Tensor x = g.input("x", DType::F32, {4});
  std::vector<double> v = {0.1, -1.0 / 3.0, 3.4028234663852886e38, 1e-40, 0.0, -0.0, 1e-7, 65504};
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    std::string n = std::string("c_") + dtype_name(t);
    g.constant(n, desc(t, {8}), HostTensor::from_f64(t, {8}, v));
  }
  Tensor inf =
      g.constant("inf", desc(DType::F32, {3}),
                 HostTensor::from_f64(DType::F32, {3},
                                      {std::numeric_limits<double>::infinity(),
                                       -std::numeric_limits<double>::infinity(), std::nan("")}));
  Tensor c = Tensor{g.find("c_f16")};
  g.output(g.add(x, g.cast(g.reshape(g.reduce("reduce_sum", c, {}, true), {1}), DType::F32)));
  g.output(g.mul(x, g.reduce("reduce_max", Tensor{g.find("c_f32")}, {}, true)));
  g.output(g.reduce("reduce_max", Tensor{g.find("c_bf16")}, {}, true));
  g.output(g.reduce("reduce_max", inf, {}, true));
  std::string s = save_graph_string(g);
  Graph g2 = load_graph_string(s, "exact.json");
  expect_same_graph(g, g2, false);
  EXPECT_EQ(save_graph_string(g2), s);
  EXPECT_NE(s.find("0.1,"), std::string::npos) << s;  // shortest f32 text, not 0.100000001
  EXPECT_NE(s.find("[\"inf\", \"-inf\", \"nan\"]"), std::string::npos) << s;
}

// A saved graph file keeps large float constants in <stem>.safetensors beside it (a model's
// weights inline as text exceed the loader's 256 MB limit: ResNet-50 through the torch backend
// was 343 MB), exactly, NHWC ones too; small and integer constants stay inline. Saving over the
// same path again carries the weights it reads from that file over.
TEST(JsonIo, SavedFileKeepsLargeWeightsBeside) {
  fs::path dir = temp_dir("spill");
  Graph g("spill");
  Tensor x = g.input("x", DType::F16, {2, 8, 4, 4}, Layout::NHWC);
  std::vector<double> w(8 * 8 * 3 * 3), b(8);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::ldexp(static_cast<double>(i % 61) - 30, -7);
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.125 * static_cast<double>(i) - 0.3;
  TensorDesc wd = desc(DType::F16, {8, 8, 3, 3});
  wd.layout = Layout::NHWC;
  Tensor wt =
      g.constant("w", wd, HostTensor::from_f64(DType::F16, {8, 8, 3, 3}, w).relayout(Layout::NHWC));
  Tensor bt = g.constant("b", desc(DType::F16, {8}), HostTensor::from_f64(DType::F16, {8}, b));
  Conv2dOptions o;
  o.padding = {1, 1};
  g.output(g.conv2d(x, wt, bt, o));
  const fs::path path = dir / "model.json";
  save_graph_file(g, path.string());
  ASSERT_TRUE(fs::exists(dir / "model.safetensors"));
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"file\": \"model.safetensors\""), std::string::npos) << text;
  EXPECT_EQ(text.find("\"file\"", text.find("\"b\"")), std::string::npos) << text;  // b inline
  Graph g2 = load_graph_file(path.string());
  expect_same_graph(g, g2, false, false);
  EXPECT_EQ(g2.tensor(g2.find("w")).source.kind, ConstantSource::Kind::File);
  EXPECT_EQ(g2.tensor(g2.find("b")).source.kind, ConstantSource::Kind::Data);
  save_graph_file(g2, path.string());  // reads model.safetensors, rewrites it
  Graph g3 = load_graph_file(path.string());
  expect_same_graph(g2, g3, false);
  fs::remove_all(dir);
}

TEST(JsonIo, SharedFormatExampleLoads) {
  fs::path dir = temp_dir("example");
  // The example of ../shared/GRAPH_FORMAT.md, with its weight file.
  HostTensor w =
      HostTensor::from_f64(DType::F16, {64, 64, 3, 3}, std::vector<double>(64 * 64 * 9, 0.25));
  write_safetensors((dir / "block.safetensors").string(), {{"conv1.weight", w}});
  write_text(dir / "g.json", R"({
  "kiln": 1,
  "name": "resnet_stage2_block",
  "inputs": {
    "x": {"dtype": "f16", "shape": ["N", 64, 56, 56], "layout": "NHWC"}
  },
  "constants": {
    "w1": {"dtype": "f16", "shape": [64, 64, 3, 3], "layout": "NHWC", "file": "block.safetensors", "key": "conv1.weight"},
    "b1": {"dtype": "f16", "shape": [64], "init": {"normal": {"mean": 0.0, "std": 0.1}, "seed": 7}},
    "eps_scale": {"dtype": "f32", "shape": [], "data": [0.5]}
  },
  "nodes": [
    {"op": "conv2d", "name": "conv1", "inputs": ["x", "w1", "b1"], "outputs": ["c1"],
     "stride": [1, 1], "padding": [1, 1], "dilation": [1, 1], "groups": 1},
    {"op": "relu", "inputs": ["c1"], "outputs": ["r1"]},
    {"op": "mul", "inputs": ["r1", "eps_scale"], "outputs": ["y"]}
  ],
  "outputs": ["y"]
})");
  Graph g = load_graph_file((dir / "g.json").string());
  EXPECT_EQ(g.name(), "resnet_stage2_block");
  ASSERT_EQ(g.nodes().size(), 3u);
  // f16 relu output times an f32 scalar: the output keeps the first input's dtype.
  EXPECT_EQ(g.desc(Tensor{g.find("y")}).dtype, DType::F16);
  const TensorInfo& w1 = g.tensor(g.find("w1"));
  EXPECT_EQ(w1.desc.layout, Layout::NHWC);
  EXPECT_EQ(w1.source.kind, ConstantSource::Kind::File);
  EXPECT_EQ(w1.source.key, "conv1.weight");
  EXPECT_EQ(w1.data->to_f64()[100], 0.25);
  EXPECT_EQ(shape_str(g.desc(Tensor{g.find("y")}).shape), "[N, 64, 56, 56]");
  // Unnamed nodes get a generated name that the saved file keeps.
  std::string s = save_graph_string(g);
  EXPECT_NE(s.find("\"file\": \"block.safetensors\", \"key\": \"conv1.weight\""), std::string::npos)
      << s;
  save_graph_file(g, (dir / "g2.json").string());
  Graph g2 = load_graph_file((dir / "g2.json").string());
  expect_same_graph(g, g2);
  EXPECT_EQ(save_graph_string(g2), s);
  fs::remove_all(dir);
}

TEST(JsonIo, NodesInAnyOrderAndPrune) {
  std::string text = R"({"kiln": 1,
    "inputs": {"x": {"dtype": "f32", "shape": ["N", 4]}},
    "nodes": [
      {"op": "add", "name": "last", "inputs": ["b", "a"], "outputs": ["y"]},
      {"op": "exp", "name": "dead", "inputs": ["x"], "outputs": ["unused"]},
      {"op": "relu", "name": "second", "inputs": ["a"], "outputs": ["b"]},
      {"op": "neg", "name": "first", "inputs": ["x"], "outputs": ["a"]}
    ],
    "outputs": ["y"]})";
  Graph g = load_graph_string(text, "order.json");
  ASSERT_EQ(g.nodes().size(), 3u);
  EXPECT_EQ(g.nodes()[0].name, "first");
  EXPECT_EQ(g.nodes()[1].name, "second");
  EXPECT_EQ(g.nodes()[2].name, "last");
  EXPECT_EQ(g.find("unused"), -1);
  EXPECT_EQ(g.name(), "graph");
  // The dead node was still validated.
  std::string bad = text;
  bad.replace(bad.find("\"exp\""), 5, "\"expp\"");
  EXPECT_NE(user_error([&] {
              load_graph_string(bad, "order.json");
            }).find("order.json: nodes[1] (dead).op: unknown op 'expp'"),
            std::string::npos);
}

TEST(JsonIo, AttributeConversion) {
  std::string text = R"({"kiln": 1,
    "inputs": {"x": {"dtype": "f32", "shape": ["N", 4, 6]}},
    "nodes": [
      {"op": "reshape", "name": "r", "inputs": ["x"], "outputs": ["a"], "shape": ["N", -1]},
      {"op": "matmul", "name": "m", "inputs": ["x", "x"], "outputs": ["b"], "transpose_b": true},
      {"op": "leaky_relu", "name": "l", "inputs": ["x"], "outputs": ["c"], "alpha": 1},
      {"op": "clamp", "name": "c", "inputs": ["x"], "outputs": ["d"], "min": "-inf", "max": 3}
    ],
    "outputs": ["a", "b", "c", "d"]})";
  Graph g = load_graph_string(text, "attrs.json");
  EXPECT_EQ(shape_str(g.desc(Tensor{g.find("a")}).shape), "[N, 24]");
  EXPECT_EQ(g.nodes()[1].attr_int("transpose_b"), 1);
  EXPECT_EQ(shape_str(g.desc(Tensor{g.find("b")}).shape), "[N, 4, 4]");
  EXPECT_EQ(g.nodes()[2].attr_float("alpha"), 1.0);
  EXPECT_EQ(g.nodes()[3].attr_float("min"), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(g.nodes()[3].attr_float("max"), 3.0);

  auto with_attr = [](const std::string& attr) {
    return R"({"kiln": 1, "inputs": {"x": {"dtype": "f32", "shape": [1, 4, 8, 8]}},
      "nodes": [{"op": "maxpool2d", "name": "p", "inputs": ["x"], "outputs": ["y"], )" +
           attr + R"(}], "outputs": ["y"]})";
  };
  EXPECT_NE(user_error([&] {
              load_graph_string(with_attr(R"("kernel": [2, 2.5])"), "p.json");
            }).find("p.json: nodes[0] (p).kernel[1]: expected an integer, found number 2.5"),
            std::string::npos);
  EXPECT_NE(user_error([&] {
              load_graph_string(with_attr(R"("kernel": {"h": 2})"), "p.json");
            }).find("p.json: nodes[0] (p).kernel: expected"),
            std::string::npos);
  EXPECT_NE(user_error([&] {
              load_graph_string(with_attr(R"("kernel": [[2], [2]])"), "p.json");
            }).find("p.json: nodes[0] (p).kernel[0]: expected an integer"),
            std::string::npos);
  EXPECT_NE(user_error([&] {
              load_graph_string(with_attr(R"("kernel": [2, 99999999999])"), "p.json");
            }).find("out of range"),
            std::string::npos);
  EXPECT_NO_THROW(load_graph_string(with_attr(R"("kernel": [2, 2])"), "p.json"));
}

TEST(JsonIo, MessagesNameFileAndPlace) {
  auto err = [](const std::string& text) {
    return user_error([&] { load_graph_string(text, "g.json"); });
  };
  std::string e = err("{\"kiln\": 1,\n  \"outputs\": [\"x\"\n}");
  EXPECT_NE(e.find("g.json:3:1: invalid JSON"), std::string::npos) << e;
  e = err(R"({"kiln": 1, "inputs": {"x": {"dtype": "f32", "shape": [1, 0]}}, "outputs": ["x"]})");
  EXPECT_NE(e.find("g.json: inputs.x.shape[1]: expected a positive integer"), std::string::npos)
      << e;
  e = err(R"({"kiln": 1, "constants": {"w1": {"dtype": "f32", "shape": [2], "data": [1]}},
             "outputs": ["w1"]})");
  EXPECT_NE(e.find("g.json: constants.w1.data: expected 2 values for shape [2], found 1"),
            std::string::npos)
      << e;
  e = err(R"({"kiln": 1, "inputs": {"x": {"dtype": "f32", "shape": [2]}},
             "nodes": [{"op": "add", "name": "add1", "inputs": ["x", "foo"], "outputs": ["y"]}],
             "outputs": ["y"]})");
  EXPECT_NE(e.find("g.json: nodes[0] (add1).inputs[1]: tensor 'foo' is not defined"),
            std::string::npos)
      << e;
  e = err(R"({"kiln": 1, "inputs": {"x": {"dtype": "f32", "shape": [2]}}, "outputs": ["z"]})");
  EXPECT_NE(e.find("g.json: outputs[0]: tensor 'z' is not defined"), std::string::npos) << e;
  e = err(R"({"kiln": 1, "inputs": {"x": {"dtype": "f32", "shape": [2]}},
             "nodes": [{"op": "conv2d", "name": "conv1", "inputs": ["x", "x"], "outputs": ["y"]}],
             "outputs": ["y"]})");
  EXPECT_NE(e.find("g.json: nodes[0] (conv1): input 0 ('x') must be an activation"),
            std::string::npos)
      << e;
  e = err(R"({"kiln": 1, "inputs": {"x": {"dtype": "f32", "shape": [2]}},
             "nodes": [{"op": "leaky_relu", "inputs": ["x"], "outputs": ["y"], "alpha": "big"}],
             "outputs": ["y"]})");
  EXPECT_NE(e.find("g.json: nodes[0].alpha: expected a number, found string"), std::string::npos)
      << e;
  e = err(R"({"kiln": 1, "inputs": {"x": {"dtype": "f32", "shape": [2]}},
             "nodes": [{"op": "neg", "name": "a", "inputs": ["c"], "outputs": ["b"]},
                       {"op": "neg", "name": "b", "inputs": ["b"], "outputs": ["c"]},
                       {"op": "neg", "name": "c", "inputs": ["x"], "outputs": ["y"]}],
             "outputs": ["y"]})");
  EXPECT_NE(e.find("cycle: nodes[0] (a) -> nodes[1] (b) -> nodes[0] (a) (each feeds the next)"),
            std::string::npos)
      << e;
  e = err(R"({"kiln": 1, "kiln": 1, "outputs": []})");
  EXPECT_NE(e.find("g.json: duplicate key 'kiln'"), std::string::npos) << e;
  e = err(R"([1, 2])");
  EXPECT_NE(e.find("g.json: expected a JSON object at the top level"), std::string::npos) << e;
  e = err(R"({"kiln": 1, "inputs": {"x": {"dtype": "f32", "shape": [65536, 65536, 65536, 65536]}},
             "outputs": ["x"]})");
  EXPECT_NE(e.find("g.json: inputs.x.shape: more than"), std::string::npos) << e;
  EXPECT_NE(user_error([] {
              load_graph_file("/nonexistent/dir/g.json");
            }).find("/nonexistent/dir/g.json: cannot open graph file"),
            std::string::npos);
}

TEST(JsonIo, ConstantLimits) {
  LoadLimits saved = load_limits();
  load_limits().max_constant_numel = 100;
  std::string e = user_error([] {
    load_graph_string(R"({"kiln": 1, "constants": {"w": {"dtype": "f32", "shape": [11, 10],
      "init": {"uniform": {"low": 0, "high": 1}}}}, "outputs": ["w"]})",
                      "big.json");
  });
  EXPECT_NE(e.find("big.json: constants.w.shape: 110 elements is over the limit of 100"),
            std::string::npos)
      << e;
  load_limits().max_total_constant_numel = 150;
  e = user_error([] {
    load_graph_string(R"({"kiln": 1, "constants": {
      "a": {"dtype": "f32", "shape": [100], "init": {"uniform": {}}},
      "b": {"dtype": "f32", "shape": [100], "init": {"uniform": {}}}}, "outputs": ["a", "b"]})",
                      "big.json");
  });
  EXPECT_NE(e.find("big.json: constants.b.shape: the constants of this file exceed"),
            std::string::npos)
      << e;
  load_limits() = saved;
}

TEST(JsonIo, SaveWritesDimExpressionsAndRefusesUnreadableOnes) {
  // A derived dim is written as its canonical text, which reads back as the same dim.
  Graph g;
  Tensor a = g.input("a", DType::F32, {Dim("H") - Dim(2), Dim("N") * Dim("S")});
  g.output(g.neg(a));
  std::string text = save_graph_string(g);
  EXPECT_NE(text.find(R"(["H-2", "N*S"])"), std::string::npos) << text;
  Graph back = load_graph_string(text, "back.json");
  EXPECT_EQ(shape_str(back.tensor(back.inputs()[0]).desc.shape), "[H-2, N*S]");
  // A symbol whose name is not an identifier has no text that reads back.
  Graph h;
  Tensor b = h.input("b", DType::F32, {Dim("a b") + Dim(1)});
  h.output(h.neg(b));
  EXPECT_NE(user_error([&] { save_graph_string(h); }).find("input 'b'.shape[0]: 'a b+1'"),
            std::string::npos);
}

// docs/graph_format.md names every op and every attribute of the op table.
TEST(JsonIo, FormatReferenceCoversTheOpTable) {
  std::ifstream f(fs::path(kiln::testing::source_dir()) / "docs" / "graph_format.md");
  ASSERT_TRUE(f.good());
  std::string doc((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (int k = 0; k < static_cast<int>(OpKind::Count); ++k) {
    const OpInfo& o = op_info(static_cast<OpKind>(k));
    EXPECT_NE(doc.find(fmt::format("`{}`", o.name)), std::string::npos)
        << "docs/graph_format.md does not name op " << o.name;
    for (const AttrSpec& a : o.attrs)
      EXPECT_NE(doc.find(fmt::format("`{}`", a.name)), std::string::npos)
          << "docs/graph_format.md does not name attribute " << o.name << "." << a.name;
  }
}
