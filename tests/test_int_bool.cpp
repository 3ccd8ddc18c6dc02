// Integer and bool tensors (i32, i64, bool): storage and I/O (host tensors, graph files,
// safetensors), the dtype rules of shape inference with their located messages, and the CPU
// reference against hand-computed values for every integer / bool op and dtype, exact beyond
// 2^53. The CLI's random integer inputs and its exit status on bad graphs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "kiln/engine.hpp"
#include "kiln/graph.hpp"
#include "kiln/host_tensor.hpp"
#include "kiln/io.hpp"
#include "kiln/reference.hpp"
#include "tests/shell_util.hpp"
#include "tests/test_paths.hpp"
#include "tests/user_error.hpp"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

using I = std::vector<int64_t>;
using Vals = std::vector<double>;
constexpr int64_t kBig = (int64_t{1} << 53) + 1;  // the first integer an f64 cannot hold
const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

HostTensor ints(DType t, const I& v) {
  return HostTensor::from_i64(t, {static_cast<int64_t>(v.size())}, v);
}
HostTensor floats(DType t, const Vals& v) {
  return HostTensor::from_f64(t, {static_cast<int64_t>(v.size())}, v);
}

// One op over 1-D inputs a (and b, c) on the CPU reference: the output's exact integers.
struct OneOp {
  Graph g{"one"};
  std::map<std::string, HostTensor> in;
  Tensor add(const std::string& name, const HostTensor& h) {
    in[name] = h;
    Shape s(h.shape.begin(), h.shape.end());
    return g.input(name, h.dtype, s);
  }
  HostTensor run(const std::string& op, const std::vector<Tensor>& xs, const Attrs& attrs = {}) {
    g.output(g.add_node1(op, xs, attrs, "y"));
    return run_reference(g, in).at("y");
  }
};

I run_ints(const std::string& op, const std::vector<HostTensor>& xs, const Attrs& attrs = {},
           DType* out_dtype = nullptr) {
  OneOp o;
  std::vector<Tensor> ts;
  for (size_t i = 0; i < xs.size(); ++i) ts.push_back(o.add(std::string(1, 'a' + i), xs[i]));
  HostTensor y = o.run(op, ts, attrs);
  if (out_dtype) *out_dtype = y.dtype;
  return y.to_i64();
}

Vals run_floats(const std::string& op, const std::vector<HostTensor>& xs, const Attrs& attrs = {}) {
  OneOp o;
  std::vector<Tensor> ts;
  for (size_t i = 0; i < xs.size(); ++i) ts.push_back(o.add(std::string(1, 'a' + i), xs[i]));
  return o.run(op, ts, attrs).to_f64();
}

}  // namespace

// ---------------------------------------------------------------- storage and I/O

TEST(IntBoolTypes, NamesSizesAndParsing) {
  for (auto [t, name, size] : {std::tuple{DType::I32, "i32", 4}, std::tuple{DType::I64, "i64", 8},
                               std::tuple{DType::Bool, "bool", 1}}) {
    EXPECT_STREQ(dtype_name(t), name);
    EXPECT_EQ(dtype_size(t), static_cast<size_t>(size));
    DType back = DType::F32;
    EXPECT_TRUE(parse_dtype(name, &back));
    EXPECT_EQ(back, t);
    EXPECT_FALSE(is_float(t));
  }
  EXPECT_TRUE(is_integer(DType::I32) && is_integer(DType::I64) && !is_integer(DType::Bool));
}

TEST(IntBoolTypes, HostTensorsAreExact) {
  HostTensor t = ints(DType::I64, {kBig, INT64_MIN, INT64_MAX, -1});
  EXPECT_EQ(t.to_i64(), (I{kBig, INT64_MIN, INT64_MAX, -1}));
  EXPECT_EQ(t.data.size(), 32u);
  // Narrowing stores wrap (i32) or test != 0 (bool); floats convert toward zero, saturating.
  EXPECT_EQ(ints(DType::I32, {int64_t{1} << 32 | 5, -1}).to_i64(), (I{5, -1}));
  EXPECT_EQ(ints(DType::Bool, {0, 7, -1}).to_i64(), (I{0, 1, 1}));
  EXPECT_EQ(floats(DType::I32, {2.9, -2.9, kNan, 1e20, -1e20}).to_i64(),
            (I{2, -2, 0, INT32_MAX, INT32_MIN}));
  EXPECT_EQ(floats(DType::Bool, {0.0, -0.0, 0.5, kNan}).to_i64(), (I{0, 0, 1, 1}));
  EXPECT_EQ(floats(DType::I64, {1e300, -kInf}).to_i64(), (I{INT64_MAX, INT64_MIN}));
  // A bool byte other than 0/1 (from a file) reads as true.
  HostTensor b = HostTensor::zeros(DType::Bool, {2});
  b.data[1] = std::byte{0x80};
  EXPECT_EQ(b.to_i64(), (I{0, 1}));
  // Relayout of 1- and 8-byte elements.
  HostTensor m = HostTensor::from_i64(DType::I64, {1, 2, 1, 3}, {1, 2, 3, 4, 5, kBig});
  EXPECT_EQ(m.relayout(Layout::NHWC).relayout(Layout::NCHW).to_i64(), (I{1, 2, 3, 4, 5, kBig}));
}

TEST(IntBoolTypes, SafetensorsRoundTrip) {
  fs::path p = fs::temp_directory_path() / ("kiln_int_bool_" + std::to_string(getpid()) + ".st");
  std::map<std::string, HostTensor> t = {{"ids", ints(DType::I64, {kBig, -3})},
                                         {"k", ints(DType::I32, {INT32_MIN, 7})},
                                         {"m", ints(DType::Bool, {1, 0, 1})}};
  write_safetensors(p.string(), t);
  auto back = read_safetensors(p.string());
  fs::remove(p);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back.at("ids").dtype, DType::I64);
  EXPECT_EQ(back.at("ids").to_i64(), (I{kBig, -3}));
  EXPECT_EQ(back.at("k").dtype, DType::I32);
  EXPECT_EQ(back.at("k").to_i64(), (I{INT32_MIN, 7}));
  EXPECT_EQ(back.at("m").dtype, DType::Bool);
  EXPECT_EQ(back.at("m").data.size(), 3u);
  EXPECT_EQ(back.at("m").to_i64(), (I{1, 0, 1}));
}

TEST(IntBoolTypes, GraphFileConstantsAreExact) {
  const char* text = R"({"kiln": 1, "name": "c",
    "inputs": {"x": {"dtype": "i64", "shape": [3]}},
    "constants": {"c": {"dtype": "i64", "shape": [3], "data": [9007199254740993, -5, 0]},
                  "m": {"dtype": "bool", "shape": [3], "data": [true, 0, 1]}},
    "nodes": [{"op": "add", "inputs": ["x", "c"], "outputs": ["s"]},
              {"op": "where", "inputs": ["m", "s", "x"], "outputs": ["y"]}],
    "outputs": ["y"]})";
  Graph g = load_graph_string(text);
  Graph again = load_graph_string(save_graph_string(g));
  EXPECT_EQ(again.tensor(again.find("c")).data->to_i64(), (I{kBig, -5, 0}));
  EXPECT_EQ(again.tensor(again.find("m")).data->to_i64(), (I{1, 0, 1}));
  std::map<std::string, HostTensor> in = {{"x", ints(DType::I64, {1, 2, 3})}};
  EXPECT_EQ(run_reference(again, in).at("y").to_i64(), (I{kBig + 1, 2, 3}));
}

// ---------------------------------------------------------------- dtype rules

TEST(IntBoolRules, OutputDtypes) {
  Graph g("rules");
  Tensor a = g.input("a", DType::I32, {4});
  Tensor b = g.input("b", DType::I64, {4});
  Tensor x = g.input("x", DType::F16, {4});
  Tensor m = g.input("m", DType::Bool, {4});
  auto dt = [&](Tensor t) { return g.tensor(t.id).desc.dtype; };
  EXPECT_EQ(dt(g.add_node1("add", {a, a})), DType::I32);
  EXPECT_EQ(dt(g.add_node1("mul", {a, b})), DType::I64);  // the common integer type
  EXPECT_EQ(dt(g.add_node1("lt", {a, b})), DType::Bool);
  EXPECT_EQ(dt(g.add_node1("eq", {m, m})), DType::Bool);
  EXPECT_EQ(dt(g.add_node1("ge", {x, x})), DType::Bool);
  EXPECT_EQ(dt(g.add_node1("xor", {m, m})), DType::Bool);
  EXPECT_EQ(dt(g.add_node1("not", {m})), DType::Bool);
  EXPECT_EQ(dt(g.where(m, x, x)), DType::F16);
  EXPECT_EQ(dt(g.where(m, m, m)), DType::Bool);
  EXPECT_EQ(dt(g.cast(x, DType::I64)), DType::I64);
  EXPECT_EQ(dt(g.cast(b, DType::Bool)), DType::Bool);
  EXPECT_EQ(dt(g.add_node1("mod", {b, b}, {{"fmod", int64_t{1}}})), DType::I64);
  EXPECT_EQ(dt(g.add_node1("transpose", {g.add_node1("reshape", {b}, {{"shape", I{2, 2}}})},
                           {{"perm", I{1, 0}}})),
            DType::I64);
  // where broadcasts all three.
  Tensor c = g.input("c", DType::Bool, {3, 1});
  Tensor row = g.input("row", DType::I32, {1, 4});
  Tensor one = g.input("one", DType::I32, {1});
  EXPECT_EQ(g.tensor(g.where(c, row, one).id).desc.shape, (Shape{3, 4}));
}

TEST(IntBoolRules, LocatedMessages) {
  auto msg = [](const std::function<void(Graph&)>& f) {
    return test::user_error([&] {
      Graph g("bad");
      f(g);
    });
  };
  EXPECT_NE(msg([](Graph& g) {
              g.relu(g.input("ids", DType::I64, {4}));
            }).find("(relu).inputs[0]: relu takes a floating tensor, got i64 'ids'"),
            std::string::npos);
  EXPECT_NE(msg([](Graph& g) {
              Tensor x = g.input("x", DType::F32, {4});
              g.where(x, x, x);
            }).find("where takes a bool condition, got f32 'x'"),
            std::string::npos);
  EXPECT_NE(msg([](Graph& g) {
              g.add_node1("sub", {g.input("i", DType::I32, {4}), g.input("f", DType::BF16, {4})});
            })
                .find("inputs[1]: sub mixes integer and floating operands: 'f' is bf16 but 'i' is "
                      "i32 (insert a cast)"),
            std::string::npos);
  EXPECT_NE(msg([](Graph& g) {
              Tensor m = g.input("m", DType::Bool, {4});
              g.add_node1("add", {m, m});
            }).find("add takes a numeric tensor (floating or integer, not bool), got bool 'm'"),
            std::string::npos);
  EXPECT_NE(msg([](Graph& g) {
              g.add_node1("eq", {g.input("m", DType::Bool, {4}), g.input("i", DType::I32, {4})});
            }).find("eq mixes bool and integer operands"),
            std::string::npos);
  EXPECT_NE(msg([](Graph& g) {
              g.softmax(g.input("i", DType::I32, {4, 4}));
            }).find("softmax takes a floating tensor, got i32 'i'"),
            std::string::npos);
  EXPECT_NE(msg([](Graph& g) {
              Tensor i = g.input("i", DType::I64, {1, 3, 8, 8});
              g.add_node1("maxpool2d", {i}, {{"kernel", I{2, 2}}});
            }).find("maxpool2d takes a floating tensor, got i64 'i'"),
            std::string::npos);
}

// ---------------------------------------------------------------- reference: integer math

TEST(IntBoolReference, Arithmetic) {
  for (DType t : {DType::I32, DType::I64}) {
    SCOPED_TRACE(dtype_name(t));
    HostTensor a = ints(t, {7, -7, 7, -7, 0, 100});
    HostTensor b = ints(t, {2, 2, -2, -2, 3, 0});
    EXPECT_EQ(run_ints("add", {a, b}), (I{9, -5, 5, -9, 3, 100}));
    EXPECT_EQ(run_ints("sub", {a, b}), (I{5, -9, 9, -5, -3, 100}));
    EXPECT_EQ(run_ints("mul", {a, b}), (I{14, -14, -14, 14, 0, 0}));
    // Truncating division (ONNX Div, C); x / 0 is 0.
    EXPECT_EQ(run_ints("div", {a, b}), (I{3, -3, -3, 3, 0, 0}));
    EXPECT_EQ(run_ints("max", {a, b}), (I{7, 2, 7, -2, 3, 100}));
    EXPECT_EQ(run_ints("min", {a, b}), (I{2, -7, -2, -7, 0, 0}));
    EXPECT_EQ(run_ints("neg", {a}), (I{-7, 7, -7, 7, 0, -100}));
    EXPECT_EQ(run_ints("abs", {a}), (I{7, 7, 7, 7, 0, 100}));
    // ONNX Mod: fmod=0 takes the divisor's sign (Python), fmod=1 the dividend's (C); x mod 0 = 0.
    EXPECT_EQ(run_ints("mod", {a, b}), (I{1, 1, -1, -1, 0, 0}));
    EXPECT_EQ(run_ints("mod", {a, b}, {{"fmod", int64_t{1}}}), (I{1, -1, 1, -1, 0, 0}));
    EXPECT_EQ(run_ints("identity", {a}), (I{7, -7, 7, -7, 0, 100}));
  }
}

TEST(IntBoolReference, WrapsAndStaysExact) {
  // i32 wraps on overflow; MIN / -1 and -MIN wrap to MIN; i64 beyond 2^53 is exact.
  HostTensor a32 = ints(DType::I32, {INT32_MAX, INT32_MIN, INT32_MIN, 65536});
  HostTensor b32 = ints(DType::I32, {1, -1, -1, 65536});
  EXPECT_EQ(run_ints("add", {a32, b32}), (I{INT32_MIN, INT32_MAX, INT32_MAX, 131072}));
  EXPECT_EQ(run_ints("div", {a32, b32}), (I{INT32_MAX, INT32_MIN, INT32_MIN, 1}));
  EXPECT_EQ(run_ints("mul", {a32, b32}), (I{INT32_MAX, INT32_MIN, INT32_MIN, 0}));
  EXPECT_EQ(run_ints("neg", {a32}), (I{-INT32_MAX, INT32_MIN, INT32_MIN, -65536}));
  EXPECT_EQ(run_ints("mod", {a32, b32}), (I{0, 0, 0, 0}));
  HostTensor a64 = ints(DType::I64, {kBig, INT64_MAX, INT64_MIN, kBig});
  HostTensor b64 = ints(DType::I64, {2, 1, -1, kBig - 1});
  EXPECT_EQ(run_ints("add", {a64, b64}), (I{kBig + 2, INT64_MIN, INT64_MAX, 2 * kBig - 1}));
  EXPECT_EQ(run_ints("div", {a64, b64}), (I{kBig / 2, INT64_MAX, INT64_MIN, 1}));
  EXPECT_EQ(run_ints("mod", {a64, b64}), (I{1, 0, 0, 1}));
  EXPECT_EQ(run_ints("abs", {ints(DType::I64, {INT64_MIN, -kBig})}), (I{INT64_MIN, kBig}));
  EXPECT_EQ(run_ints("max", {a64, b64}), (I{kBig, INT64_MAX, -1, kBig}));
  // i32 with i64: computed in i64, exact.
  DType dt;
  EXPECT_EQ(run_ints("mul", {ints(DType::I32, {INT32_MAX}), ints(DType::I64, {4})}, {}, &dt),
            (I{int64_t{INT32_MAX} * 4}));
  EXPECT_EQ(dt, DType::I64);
}

TEST(IntBoolReference, Comparisons) {
  struct Case {
    const char* op;
    I want;
  };
  // a = {1, 2, 3, kBig}, b = {2, 2, 2, kBig - 1}
  const Case cases[] = {{"eq", {0, 1, 0, 0}}, {"ne", {1, 0, 1, 1}}, {"lt", {1, 0, 0, 0}},
                        {"le", {1, 1, 0, 0}}, {"gt", {0, 0, 1, 1}}, {"ge", {0, 1, 1, 1}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    DType dt;
    EXPECT_EQ(
        run_ints(c.op, {ints(DType::I64, {1, 2, 3, kBig}), ints(DType::I64, {2, 2, 2, kBig - 1})},
                 {}, &dt),
        c.want);
    EXPECT_EQ(dt, DType::Bool);
    I want3(c.want.begin(), c.want.begin() + 3);
    EXPECT_EQ(run_ints(c.op, {ints(DType::I32, {1, 2, 3}), ints(DType::I32, {2, 2, 2})}), want3);
    for (DType f : {DType::F32, DType::F16, DType::BF16})
      EXPECT_EQ(run_ints(c.op, {floats(f, {1, 2, 3}), floats(f, {2, 2, 2})}), want3);
  }
  // NaN: unequal to everything, unordered.
  HostTensor n = floats(DType::F32, {kNan, kNan});
  HostTensor v = floats(DType::F32, {1, kNan});
  EXPECT_EQ(run_ints("eq", {n, v}), (I{0, 0}));
  EXPECT_EQ(run_ints("ne", {n, v}), (I{1, 1}));
  EXPECT_EQ(run_ints("lt", {n, v}), (I{0, 0}));
  EXPECT_EQ(run_ints("ge", {n, v}), (I{0, 0}));
  // -0 == 0; bools compare for equality.
  EXPECT_EQ(run_ints("eq", {floats(DType::F32, {-0.0}), floats(DType::F32, {0.0})}), (I{1}));
  HostTensor p = ints(DType::Bool, {0, 0, 1, 1}), q = ints(DType::Bool, {0, 1, 0, 1});
  EXPECT_EQ(run_ints("eq", {p, q}), (I{1, 0, 0, 1}));
  EXPECT_EQ(run_ints("ne", {p, q}), (I{0, 1, 1, 0}));
}

TEST(IntBoolReference, Logical) {
  HostTensor p = ints(DType::Bool, {0, 0, 1, 1}), q = ints(DType::Bool, {0, 1, 0, 1});
  EXPECT_EQ(run_ints("and", {p, q}), (I{0, 0, 0, 1}));
  EXPECT_EQ(run_ints("or", {p, q}), (I{0, 1, 1, 1}));
  EXPECT_EQ(run_ints("xor", {p, q}), (I{0, 1, 1, 0}));
  EXPECT_EQ(run_ints("not", {p}), (I{1, 1, 0, 0}));
  // Broadcast: [4] and [1].
  EXPECT_EQ(run_ints("and", {p, ints(DType::Bool, {1})}), (I{0, 0, 1, 1}));
}

TEST(IntBoolReference, Where) {
  HostTensor c = ints(DType::Bool, {1, 0, 1, 0});
  EXPECT_EQ(run_ints("where",
                     {c, ints(DType::I64, {kBig, 2, 3, 4}), ints(DType::I64, {-1, -2, -3, kBig})}),
            (I{kBig, -2, 3, kBig}));
  EXPECT_EQ(
      run_ints("where", {c, ints(DType::Bool, {0, 0, 0, 0}), ints(DType::Bool, {1, 1, 1, 1})}),
      (I{0, 1, 0, 1}));
  EXPECT_EQ(
      run_ints("where", {c, ints(DType::I32, {5, 5, 5, 5}), ints(DType::I32, {-5, -5, -5, -5})}),
      (I{5, -5, 5, -5}));
  // The attention mask: where(mask, scores, -inf), mask [2, 1] against scores [2, 3].
  OneOp o;
  Tensor m = o.add("m", HostTensor::from_i64(DType::Bool, {2, 1}, {1, 0}));
  Tensor s = o.add("s", HostTensor::from_f64(DType::F16, {2, 3}, {0.5, -1, 2, 3, 4, 5}));
  Tensor ninf = o.g.constant("ninf", TensorDesc{DType::F16, {1}, Layout::NCHW, {}},
                             floats(DType::F16, {-kInf}));
  Vals y = o.run("where", {m, s, ninf}).to_f64();
  EXPECT_EQ(y, (Vals{0.5, -1, 2, -kInf, -kInf, -kInf}));
}

TEST(IntBoolReference, CastBetweenEveryPair) {
  const DType all[] = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool};
  // Source values representable in every floating type; what each target holds.
  const Vals src_f = {0, -0.0, 2.75, -2.75, 1, 256};
  const I src_i = {0, 0, 3, -3, 1, 256};
  for (DType from : all)
    for (DType to : all) {
      SCOPED_TRACE(fmt::format("{} -> {}", dtype_name(from), dtype_name(to)));
      HostTensor x = is_float(from)        ? floats(from, src_f)
                     : from == DType::Bool ? ints(from, {0, 0, 1, 1, 1, 0})
                                           : ints(from, src_i);
      OneOp o;
      HostTensor y = o.run("cast", {o.add("a", x)}, {{"dtype", std::string(dtype_name(to))}});
      ASSERT_EQ(y.dtype, to);
      if (from == DType::Bool) {
        EXPECT_EQ(y.to_f64(), (Vals{0, 0, 1, 1, 1, 0}));
      } else if (to == DType::Bool) {
        EXPECT_EQ(y.to_i64(), (I{0, 0, 1, 1, 1, 1}));  // x != 0 (-0.0 is 0)
      } else if (is_float(from) && !is_float(to)) {
        EXPECT_EQ(y.to_i64(), (I{0, 0, 2, -2, 1, 256}));  // toward zero
      } else if (is_float(from)) {
        EXPECT_EQ(y.to_f64(), src_f);
      } else {
        EXPECT_EQ(y.to_i64(), src_i);
      }
    }
  // Edges: NaN -> 0, saturation, i64 -> i32 wraps, i64 beyond 2^53 -> f32 rounds once.
  auto cast = [](const HostTensor& x, DType to) {
    OneOp o;
    return o.run("cast", {o.add("a", x)}, {{"dtype", std::string(dtype_name(to))}});
  };
  EXPECT_EQ(cast(floats(DType::F32, {kNan, 3e9, -3e9, kInf}), DType::I32).to_i64(),
            (I{0, INT32_MAX, INT32_MIN, INT32_MAX}));
  EXPECT_EQ(cast(floats(DType::F32, {kNan, -kInf}), DType::I64).to_i64(), (I{0, INT64_MIN}));
  EXPECT_EQ(cast(floats(DType::F32, {kNan}), DType::Bool).to_i64(), (I{1}));
  EXPECT_EQ(cast(ints(DType::I64, {(int64_t{1} << 32) + 7, -1}), DType::I32).to_i64(), (I{7, -1}));
  EXPECT_EQ(cast(ints(DType::I64, {kBig}), DType::F32).to_f64(), (Vals{9007199254740992.0}));
  EXPECT_EQ(cast(ints(DType::I64, {kBig}), DType::I64).to_i64(), (I{kBig}));
  EXPECT_EQ(cast(ints(DType::I32, {65519}), DType::F16).to_f64(), (Vals{65504}));
}

TEST(IntBoolReference, MovementKeepsIntegersExact) {
  OneOp o;
  Tensor x = o.add("x", HostTensor::from_i64(DType::I64, {2, 3}, {kBig, 1, 2, 3, 4, -kBig}));
  Tensor t = o.g.add_node1("transpose", {x}, {{"perm", I{1, 0}}});
  Tensor r = o.g.add_node1("reshape", {t}, {{"shape", I{6}}});
  Tensor p = o.g.add_node1("pad", {r}, {{"pads", I{1, 2}}, {"value", -7.9}});
  HostTensor y = o.run("identity", {p});
  EXPECT_EQ(y.to_i64(), (I{-7, kBig, 3, 1, 4, 2, -kBig, -7, -7}));  // -7.9 cast toward zero
}

TEST(IntBoolReference, FloatMod) {
  HostTensor a = floats(DType::F32, {7.5, -7.5, 7.5, -7.5});
  HostTensor b = floats(DType::F32, {2, 2, -2, -2});
  EXPECT_EQ(run_floats("mod", {a, b}), (Vals{1.5, 0.5, -0.5, -1.5}));
  EXPECT_EQ(run_floats("mod", {a, b}, {{"fmod", int64_t{1}}}), (Vals{1.5, -1.5, 1.5, -1.5}));
}

// A chain mixing the domains: ids -> (ids mod 4) == 1 -> where(mask, x, -x) in f32.
TEST(IntBoolReference, MixedChain) {
  OneOp o;
  Tensor ids = o.add("ids", ints(DType::I64, {0, 1, 5, -3}));
  Tensor x = o.add("x", floats(DType::F32, {1, 2, 3, 4}));
  Tensor four =
      o.g.constant("four", TensorDesc{DType::I64, {1}, Layout::NCHW, {}}, ints(DType::I64, {4}));
  Tensor one =
      o.g.constant("one", TensorDesc{DType::I64, {1}, Layout::NCHW, {}}, ints(DType::I64, {1}));
  Tensor m = o.g.add_node1("eq", {o.g.add_node1("mod", {ids, four}), one});
  Tensor f = o.g.cast(ids, DType::F32);
  Tensor y = o.g.where(m, o.g.add(x, f), o.g.neg(x));
  o.g.output(y);
  HostTensor out = run_reference(o.g, o.in).at(o.g.tensor(y.id).name);
  EXPECT_EQ(out.to_f64(), (Vals{-1, 3, 8, 1}));  // -3 mod 4 = 1
}

// ---------------------------------------------------------------- the CLI

TEST(IntBoolCli, RandomIntegerInputsAndCheck) {
  fs::path dir = fs::temp_directory_path() / ("kiln_int_cli_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::string graph = (dir / "g.json").string();
  {
    Graph g("ints");
    Tensor ids = g.input("ids", DType::I64, {"N"});
    Tensor m = g.input("m", DType::Bool, {"N"});
    g.output(g.add_node1("where", {m, ids, g.neg(ids)}, {}, "y"));
    save_graph_file(g, graph);
  }
  std::string cli = kiln::testing::cli_path(), out;
  std::string out_file = (dir / "o.safetensors").string();
  int rc = kiln::testing::run_shell(
      cli + " run " + graph + " --device cpu --shape N=4096 --output " + out_file, &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("input  ids: i64 [4096] row-major  from random integers in [0, 16)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("input  m: bool [4096] row-major  from random 0/1"), std::string::npos) << out;
  auto y = read_safetensors(out_file).at("y");
  EXPECT_EQ(y.dtype, DType::I64);
  I v = y.to_i64();
  int64_t lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
  EXPECT_EQ(lo, -15);
  EXPECT_EQ(hi, 15);
  rc = kiln::testing::run_shell(
      cli + " run " + graph + " --device cpu --shape N=4096 --int-range -1000:1000 --output " +
          out_file,
      &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("random integers in [-1000, 1000)"), std::string::npos) << out;
  v = read_safetensors(out_file).at("y").to_i64();
  EXPECT_GT(*std::max_element(v.begin(), v.end()), 900);
  EXPECT_LE(*std::max_element(v.begin(), v.end()), 1000);
  rc = kiln::testing::run_shell(cli + " run " + graph + " --shape N=4 --int-range 5:5", &out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--int-range: expected LO < HI"), std::string::npos) << out;
  rc = kiln::testing::run_shell(cli + " check " + graph, &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("i64"), std::string::npos) << out;
  EXPECT_NE(out.find("bool"), std::string::npos) << out;
  fs::remove_all(dir);
}

TEST(IntBoolCli, BadGraphsExitTwoWithOneLine) {
  std::string cli = kiln::testing::cli_path(), out;
  for (const char* f : {"relu_int_input.json", "where_float_cond.json", "add_int_float.json"}) {
    SCOPED_TRACE(f);
    std::string path =
        (fs::path(kiln::testing::source_dir()) / "tests" / "bad_graphs" / f).string();
    int rc = kiln::testing::run_shell(cli + " check " + path, &out);
    EXPECT_EQ(rc, 2) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_NE(out.find(path + ": nodes[0]"), std::string::npos) << out;
  }
}

// ---------------------------------------------------------------- codegen (NVRTC, no GPU)

namespace {

// Compiles `g` to cubin for sm_90 and sm_80 (no device needed); the kernels' names.
std::vector<std::string> compile_kernels(const Graph& g, bool fusion = true) {
  std::vector<std::string> names;
  for (const char* arch : {"sm_90", "sm_80"}) {
    EngineOptions eo;
    eo.load_kernels = false;
    eo.disk_cache = false;
    eo.fusion = fusion;
    eo.arch = arch;
    Engine e(eo);
    CompiledGraph cg = e.compile(g);
    names.clear();
    for (const KernelInfo& k : cg.kernels()) names.push_back(k.name);
  }
  return names;
}

}  // namespace

TEST(IntBoolCodegen, EveryIntegerAndBoolOpCompiles) {
  for (DType dt : {DType::I32, DType::I64}) {
    SCOPED_TRACE(dtype_name(dt));
    Graph g("int_ops");
    Tensor a = g.input("a", dt, {"N", 4097}), b = g.input("b", dt, {4097});
    for (const char* op :
         {"add", "sub", "mul", "div", "max", "min", "mod", "eq", "ne", "lt", "le", "gt", "ge"})
      g.output(g.add_node1(op, {a, b}, {}, op));
    g.output(g.add_node1("mod", {a, b}, {{"fmod", int64_t{1}}}, "fmod"));
    for (const char* op : {"neg", "abs", "identity"}) g.output(g.add_node1(op, {a}, {}, op));
    for (DType to : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool})
      g.output(g.add_node1("cast", {a}, {{"dtype", std::string(dtype_name(to))}},
                           fmt::format("cast_{}", dtype_name(to))));
    g.output(g.add_node1("mul", {a, g.cast(b, dt == DType::I32 ? DType::I64 : DType::I32)}, {},
                         "mixed"));
    // Every op in one horizontally fused pointwise kernel (the cast of the broadcast row b, on
    // its own [4097] iteration space, is a second one), and each alone.
    EXPECT_EQ(compile_kernels(g).size(), 2u);
    EXPECT_GT(compile_kernels(g, false).size(), 20u);
  }
  Graph g("bool_ops");
  Tensor p = g.input("p", DType::Bool, {"N", 33}), q = g.input("q", DType::Bool, {33});
  Tensor x = g.input("x", DType::F16, {"N", 33});
  for (const char* op : {"and", "or", "xor", "eq", "ne"}) g.output(g.add_node1(op, {p, q}, {}, op));
  g.output(g.add_node1("not", {p}, {}, "not"));
  g.output(g.add_node1("where", {p, q, p}, {}, "where_bool"));
  g.output(g.add_node1("where", {q, x, g.neg(x)}, {}, "where_f16"));
  for (DType to : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool})
    g.output(g.add_node1("cast", {p}, {{"dtype", std::string(dtype_name(to))}},
                         fmt::format("cast_{}", dtype_name(to))));
  EXPECT_FALSE(compile_kernels(g).empty());
  EXPECT_FALSE(compile_kernels(g, false).empty());
}

TEST(IntBoolCodegen, FloatComparisonsCastsAndMasksCompile) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    Graph g("float_masks");
    Tensor x = g.input("x", dt, {"N", 4096}), y = g.input("y", dt, {4096});
    Tensor ids = g.input("ids", DType::I64, {"N", 4096});
    for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"})
      g.output(g.add_node1(op, {x, y}, {}, op));
    g.output(g.add_node1("mod", {x, y}, {}, "mod"));
    g.output(g.add_node1("mod", {x, y}, {{"fmod", int64_t{1}}}, "fmod"));
    for (DType to : {DType::I32, DType::I64, DType::Bool})
      g.output(g.add_node1("cast", {x}, {{"dtype", std::string(dtype_name(to))}},
                           fmt::format("cast_{}", dtype_name(to))));
    // where(ids < 8, x * 2, -inf) -> exp: one pointwise kernel with the comparison and select.
    Tensor ninf = g.constant("ninf", TensorDesc{dt, {1}, Layout::NCHW, {}}, floats(dt, {-kInf}));
    Tensor eight =
        g.constant("eight", TensorDesc{DType::I64, {1}, Layout::NCHW, {}}, ints(DType::I64, {8}));
    Tensor s = g.where(g.add_node1("lt", {ids, eight}), g.add(x, x), ninf);
    g.output(g.exp(s));
    EXPECT_EQ(compile_kernels(g).size(), 1u);
  }
}

// A mask after a softmax / matmul stays out of their kernels (their emitters hold f32 values)
// but fuses with the pointwise ops after it; integer copies compile.
TEST(IntBoolCodegen, MaskAfterAnchorsAndIntegerCopies) {
  Graph g("anchors");
  Tensor x = g.input("x", DType::F16, {"N", 64});
  Tensor w = g.constant_random("w", TensorDesc{DType::F16, {64, 64}, Layout::NCHW, {}}, "normal", 0,
                               0.1, 1);
  Tensor m = g.input("m", DType::Bool, {"N", 64});
  Tensor z =
      g.constant("z", TensorDesc{DType::F16, {1}, Layout::NCHW, {}}, floats(DType::F16, {0}));
  Tensor mm = g.matmul(x, w);
  Tensor masked = g.where(m, mm, z);
  g.output(g.relu(masked));
  g.output(g.where(m, g.softmax(x), z));
  Tensor ids = g.input("ids", DType::I64, {2, 3, 5, 7});
  g.output(g.transpose(ids, {0, 2, 3, 1}));
  g.output(g.pad(g.input("b", DType::Bool, {2, 3, 5, 7}), {0, 1, 0, 2, 0, 0, 3, 1}, 1.0));
  g.output(g.pad(g.input("k", DType::I32, {5, 7}), {1, 0, 2, 3}, -3.0));
  std::vector<std::string> names = compile_kernels(g);
  EXPECT_GE(names.size(), 6u);
}
