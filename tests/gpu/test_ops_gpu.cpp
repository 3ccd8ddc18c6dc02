// The one parametrized GPU harness for the memory-bound kernels: every pointwise / reduction /
// normalization / window / movement op and the fusion patterns, over f32/f16/bf16, NCHW/NHWC and
// odd sizes (1, 7, 4097 elements per row; row counts that are not a multiple of the block), run
// through Engine::compile + CompiledGraph::run and compared with run_reference on fresh random
// inputs. Outputs are poisoned (NaN) first; tolerance by dtype; NaN never passes. Skips without a
// device.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <algorithm>

#include <functional>
#include <limits>
#include <memory>
#include <optional>

#include "engine/ir/op_table.hpp"
#include "kiln/engine.hpp"
#include "kiln/error.hpp"
#include "kiln/kiln.h"
#include "kiln/reference.hpp"
#include "tests/gather_graphs.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/movement_graphs.hpp"
#include "tests/pool_graphs.hpp"
#include "tests/resize_graphs.hpp"
#include "tests/whisper_stem.hpp"

namespace kiln {
namespace {

using namespace gputest;

struct InputSpec {
  std::vector<int64_t> shape;  // concrete
  double lo = -2.0, hi = 2.0;
};

struct Case {
  std::string name;
  std::function<std::shared_ptr<Graph>()> build;
  std::map<std::string, InputSpec> inputs;
  bool fusion = true;
  double rtol_scale = 1.0;  // for cases whose reference rounds many intermediates
  int runs = 1;             // launches of the compiled graph, each checked (state across runs)
  std::string schedule;     // EngineOptions::schedule (an opt-in kernel), "" = the rules
  std::string kernel;       // a part of some kernel's name the compiled graph must have
};

TensorDesc desc(DType t, Shape s, Layout l = Layout::NCHW) {
  TensorDesc d;
  d.dtype = t;
  d.shape = std::move(s);
  d.layout = l;
  return d;
}
Tensor cst(Graph& g, const std::string& name, DType t, Shape s, double lo = 0.5, double hi = 1.5) {
  return g.constant_random(name, desc(t, std::move(s)), "uniform", lo, hi, 11);
}
// silu(groupnorm(x, G) with scale and shift), or silu(instancenorm(x)) when G == C, over an NHWC
// x [N, C, h, w]: N a symbol, or `batch` when it is > 0.
std::function<std::shared_ptr<Graph>()> norm_silu_nhwc(DType dt, int64_t C, int64_t G, int64_t h,
                                                       int64_t w, int64_t batch = 0) {
  return [=] {
    auto g = std::make_shared<Graph>("norm_silu");
    Tensor x = g->input("x", dt, {batch > 0 ? Dim(batch) : Dim("N"), C, h, w}, Layout::NHWC);
    Tensor y = C == G ? g->instancenorm(x)
                      : g->groupnorm(x, G, cst(*g, "s", dt, {C}), cst(*g, "b", dt, {C}, -0.5, 0.5));
    g->output(g->silu(y));
    return g;
  };
}
const char* lname(Layout l) {
  return l == Layout::NHWC ? "nhwc" : "nchw";
}
const DType kDtypes[] = {DType::F32, DType::F16, DType::BF16};

bool needs_positive(OpKind k, int slot) {
  switch (k) {
    case OpKind::Log:
    case OpKind::Sqrt:
    case OpKind::Rsqrt:
    case OpKind::Reciprocal:
      return true;
    case OpKind::Pow:
      return slot == 0;
    case OpKind::Div:
      return slot == 1;
    default:
      return false;
  }
}

// ---- integer and bool tensors (i32, i64, bool): every integer / bool op x dtype, each graph's
// ops as sibling outputs (one horizontally fused kernel) and once unfused; masks and casts
// inside floating chains; integer copies (transpose, pad). Integer ranges reach the wrapping
// and the beyond-2^53 cases; results compare exactly.
void append_int_bool_cases(std::vector<Case>* cases) {
  const std::vector<int64_t> shape = {3, 4097}, row = {4097};
  for (DType dt : {DType::I32, DType::I64})
    for (bool fusion : {true, false}) {
      Case c;
      c.name = fmt::format("int_ops_{}{}", dtype_name(dt), fusion ? "" : "_unfused");
      c.fusion = fusion;
      // Small values (division, mod, comparisons hit equal and zero operands) and large ones
      // (i32 products wrap; i64 sums beyond 2^53).
      const double big = dt == DType::I32 ? 2147483648.0 : 4.6e18;
      c.inputs = {{"a", {shape, -20, 20}}, {"b", {row, -6, 6}}, {"w", {shape, -big, big}}};
      c.build = [dt] {
        auto g = std::make_shared<Graph>("int_ops");
        Tensor a = g->input("a", dt, {3, 4097}), b = g->input("b", dt, {4097});
        Tensor w = g->input("w", dt, {3, 4097});
        for (const char* op :
             {"add", "sub", "mul", "div", "max", "min", "mod", "eq", "ne", "lt", "le", "gt", "ge"})
          g->output(g->add_node1(op, {a, b}, {}, std::string(op)));
        g->output(g->add_node1("mod", {a, b}, {{"fmod", int64_t{1}}}, "fmod"));
        for (const char* op : {"neg", "abs", "identity"})
          g->output(g->add_node1(op, {a}, {}, std::string(op)));
        g->output(g->add_node1("mul", {w, w}, {}, "wrap_mul"));
        g->output(g->add_node1("add", {w, w}, {}, "wrap_add"));
        g->output(g->add_node1("neg", {w}, {}, "wrap_neg"));
        for (DType to : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool})
          g->output(g->add_node1("cast", {w}, {{"dtype", std::string(dtype_name(to))}},
                                 fmt::format("cast_{}", dtype_name(to))));
        // i32 with i64: computed in i64.
        Tensor other = g->cast(b, dt == DType::I32 ? DType::I64 : DType::I32);
        g->output(g->add_node1("mul", {a, other}, {}, "mixed_mul"));
        return g;
      };
      cases->push_back(c);
    }
  for (bool fusion : {true, false}) {
    Case c;
    c.name = fmt::format("bool_ops{}", fusion ? "" : "_unfused");
    c.fusion = fusion;
    c.inputs = {{"p", {shape, 0, 2}}, {"q", {row, 0, 2}}, {"x", {shape, -3, 3}}};
    c.build = [] {
      auto g = std::make_shared<Graph>("bool_ops");
      Tensor p = g->input("p", DType::I32, {3, 4097}), q = g->input("q", DType::I32, {4097});
      Tensor x = g->input("x", DType::I64, {3, 4097});
      Tensor pb = g->cast(p, DType::Bool), qb = g->cast(q, DType::Bool);
      for (const char* op : {"and", "or", "xor", "eq", "ne"})
        g->output(g->add_node1(op, {pb, qb}, {}, std::string(op)));
      g->output(g->add_node1("not", {pb}, {}, "not"));
      g->output(g->add_node1("where", {pb, qb, g->add_node1("not", {pb})}, {}, "where_bool"));
      g->output(g->add_node1("where", {qb, x, g->neg(x)}, {}, "where_i64"));
      for (DType to : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool})
        g->output(g->add_node1("cast", {pb}, {{"dtype", std::string(dtype_name(to))}},
                               fmt::format("cast_{}", dtype_name(to))));
      return g;
    };
    cases->push_back(c);
  }
  for (DType dt : kDtypes) {
    Case c;
    c.name = fmt::format("float_compare_where_cast_{}", dtype_name(dt));
    c.inputs = {{"x", {shape, -40, 40}}, {"y", {row, -40, 40}}, {"ids", {shape, 0, 16}}};
    c.build = [dt] {
      auto g = std::make_shared<Graph>("float_masks");
      Tensor x = g->input("x", dt, {3, 4097}), y = g->input("y", dt, {4097});
      Tensor ids = g->input("ids", DType::I64, {3, 4097});
      for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"})
        g->output(g->add_node1(op, {x, y}, {}, std::string(op)));
      g->output(g->add_node1("mod", {x, y}, {}, "mod"));
      g->output(g->add_node1("mod", {x, y}, {{"fmod", int64_t{1}}}, "fmod"));
      for (DType to : {DType::I32, DType::I64, DType::Bool})
        g->output(g->add_node1("cast", {x}, {{"dtype", std::string(dtype_name(to))}},
                               fmt::format("cast_{}", dtype_name(to))));
      // The attention-style mask: where(ids < 8, 2x, -inf), then exp, in one pointwise chain.
      Tensor ninf =
          g->constant("ninf", desc(dt, {1}),
                      HostTensor::from_f64(dt, {1}, {-std::numeric_limits<double>::infinity()}));
      Tensor eight =
          g->constant("eight", desc(DType::I64, {1}), HostTensor::from_i64(DType::I64, {1}, {8}));
      Tensor m = g->add_node1("lt", {ids, eight});
      Tensor s = g->add_node1("where", {m, g->mul(x, g->cast(g->cast(ids, DType::F32), dt)), ninf});
      g->output(
          g->add_node1("exp", {g->mul(s, cst(*g, "k", dt, {1}, 0.001, 0.002))}, {}, "masked_exp"));
      return g;
    };
    cases->push_back(c);
  }
  for (DType dt : {DType::I32, DType::I64, DType::Bool}) {
    Case c;
    c.name = fmt::format("int_copies_{}", dtype_name(dt));
    c.inputs = {{"x", {{2, 5, 7, 3}, -1000, 1000}}};
    c.build = [dt] {
      auto g = std::make_shared<Graph>("int_copies");
      Tensor x = g->input("x", dt, {2, 5, 7, 3});
      g->output(g->transpose(x, {0, 2, 3, 1}));
      g->output(g->pad(x, {0, 1, 0, 2, 0, 0, 3, 1}, dt == DType::Bool ? 1.0 : -7.0));
      return g;
    };
    cases->push_back(c);
  }
}

// ---- the ops added for real models (the new unary ops and prelu are in pointwise_all):
// log_softmax as a row norm, reduce_l2 / reduce_prod, cumsum, and conv + bias + hardswish / conv +
// per-channel prelu as one contraction kernel.
void add_new_float_op_cases(std::vector<Case>& cases) {
  for (DType dt : kDtypes)
    for (int64_t len : {1, 7, 96, 1000, 4096, 4097, 70000}) {
      Case c;
      c.name = fmt::format("log_softmax_{}_r{}", dtype_name(dt), len);
      c.inputs = {{"x", {{5, len}, -8.0, 8.0}}, {"r", {{5, len}}}};
      // The reference rounds h = x + r to the dtype before the norm and the product; the kernel
      // keeps it in f32. y * h amplifies that rounding: (|h| + |y|) * ulp(h) / 2, up to about
      // 8 units in the last place of the product in f16 / bf16 (seen: bf16 0.19 at -7.2).
      if (dt != DType::F32) c.rtol_scale = 10.0;
      c.build = [dt, len] {
        auto g = std::make_shared<Graph>("lsm");
        Tensor x = g->input("x", dt, {"N", len}), r = g->input("r", dt, {"N", len});
        Tensor h = g->add(x, r);
        Tensor y = g->add_node1("log_softmax", {h});
        g->output(g->mul(y, h));  // an epilogue reading the anchor's input (in registers)
        g->output(y);
        g->output(h);
        return g;
      };
      cases.push_back(c);
    }
  for (DType dt : kDtypes) {
    Case c;
    c.name = fmt::format("log_softmax_axis1_nhwc_symbolic_{}", dtype_name(dt));
    c.inputs = {{"x", {{3, 7, 5, 4}, -8.0, 8.0}}, {"y", {{3, 333}}}};
    c.build = [dt] {
      auto g = std::make_shared<Graph>("lsm1");
      Tensor x = g->input("x", dt, {3, 7, 5, 4}, Layout::NHWC);
      g->output(g->add_node1("log_softmax", {x}, {{"axis", int64_t{1}}}));
      Tensor y = g->input("y", dt, {"N", "L"});
      g->output(g->add_node1("log_softmax", {y}));
      return g;
    };
    cases.push_back(c);
  }
  // Products of values near 1 (a product of thousands stays in range); l2 with an epilogue.
  const std::vector<std::vector<int64_t>> axes_list = {{}, {0}, {1}, {3}, {2, 3}, {1, 2, 3}};
  for (DType dt : kDtypes)
    for (Layout l : {Layout::NCHW, Layout::NHWC})
      for (const char* op : {"reduce_l2", "reduce_prod"})
        for (size_t ai = 0; ai < axes_list.size(); ++ai) {
          if (dt != DType::F32 && ai % 2 == 1) continue;
          std::string ops = op;
          const bool prod = ops == "reduce_prod";
          Case c;
          bool keep = ai % 2 == 1;
          c.name =
              fmt::format("{}_{}_{}_a{}{}", op, dtype_name(dt), lname(l), ai, keep ? "_keep" : "");
          c.inputs = {{"x", {{3, 5, 7, 97}, prod ? 0.98 : -2.0, prod ? 1.02 : 2.0}}};
          c.rtol_scale = 10.0;  // long f32 accumulations in another order than the reference
          auto axes = axes_list[ai];
          c.build = [dt, l, ops, axes, keep] {
            auto g = std::make_shared<Graph>("red2");
            Tensor x = g->input("x", dt, {"N", 5, 7, 97}, l);
            g->output(g->neg(g->reduce(ops, x, axes, keep)));
            return g;
          };
          cases.push_back(c);
        }
  // cumsum: every flag, lines of one chunk, several chunks and a partial last chunk, a prologue
  // with its output stored, an epilogue; positive values (running sums without cancellation).
  for (DType dt : kDtypes)
    for (int64_t len : {1, 7, 33, 256, 257, 1000, 4097})
      for (int flags = 0; flags < 4; ++flags) {
        if (dt != DType::F32 && flags % 3 != 0) continue;
        Case c;
        const bool excl = flags & 1, rev = flags & 2;
        c.name = fmt::format("cumsum_{}_r{}{}{}", dtype_name(dt), len, excl ? "_excl" : "",
                             rev ? "_rev" : "");
        c.inputs = {{"x", {{5, len}, 0.0, 1.0}}, {"r", {{5, len}, 0.0, 1.0}}};
        c.rtol_scale = 10.0;
        c.build = [dt, len, excl, rev] {
          auto g = std::make_shared<Graph>("cs");
          Tensor x = g->input("x", dt, {"N", len}), r = g->input("r", dt, {"N", len});
          Tensor h = g->add(x, r);
          Tensor y = g->add_node1(
              "cumsum", {h},
              {{"axis", int64_t{1}}, {"exclusive", int64_t{excl}}, {"reverse", int64_t{rev}}});
          g->output(g->mul(y, cst(*g, "k", dt, {len})));
          g->output(h);
          return g;
        };
        cases.push_back(c);
      }
  for (DType dt : kDtypes)
    for (Layout l : {Layout::NCHW, Layout::NHWC}) {
      Case c;
      c.name = fmt::format("cumsum_axes_{}_{}", dtype_name(dt), lname(l));
      c.inputs = {{"x", {{3, 7, 5, 300}, 0.0, 1.0}}};
      c.rtol_scale = 10.0;
      c.build = [dt, l] {
        auto g = std::make_shared<Graph>("csax");
        Tensor x = g->input("x", dt, {"N", 7, 5, 300}, l);
        for (int64_t ax = 0; ax < 4; ++ax)
          g->output(g->add_node1("cumsum", {x}, {{"axis", ax}, {"reverse", int64_t{ax % 2}}}));
        return g;
      };
      cases.push_back(c);
    }
  // Contractions with the new epilogues: one kernel each (the planner tests pin the grouping).
  for (DType dt : kDtypes)
    for (Layout l : {Layout::NCHW, Layout::NHWC}) {
      Case c;
      c.name = fmt::format("conv_hardswish_prelu_{}_{}", dtype_name(dt), lname(l));
      c.inputs = {{"x", {{2, 16, 9, 9}}}};
      c.build = [dt, l] {
        auto g = std::make_shared<Graph>("convact");
        Tensor x = g->input("x", dt, {"N", 16, 9, 9}, l);
        Attrs pad{{"padding", std::vector<int64_t>{1, 1}}};
        Tensor w = cst(*g, "w", dt, {32, 16, 3, 3}, -0.2, 0.2);
        Tensor b = cst(*g, "b", dt, {32}, -0.5, 0.5);
        g->output(g->add_node1("hardswish", {g->add_node1("conv2d", {x, w, b}, pad)}));
        Tensor w2 = cst(*g, "w2", dt, {32, 16, 3, 3}, -0.2, 0.2);
        Tensor slope = cst(*g, "slope", dt, {32, 1, 1}, 0.05, 0.5);
        g->output(g->add_node1("prelu", {g->add_node1("conv2d", {x, w2}, pad), slope}));
        return g;
      };
      cases.push_back(c);
    }
}

// ---- conv_transpose2d (the direct gather kernel with the contraction epilogue), argmax /
// argmin (value-index pairs; integer inputs with many ties) and range (alone and fused).
struct ConvTCase {
  int64_t c, k, groups, r, s, stride, pad, opad, dil, h, w;
};
void add_conv_transpose_cases(std::vector<Case>& cases) {
  const std::vector<ConvTCase> shapes = {
      {3, 5, 1, 1, 1, 1, 0, 0, 1, 7, 5},     // 1x1, stride 1
      {4, 6, 1, 2, 2, 2, 0, 0, 1, 5, 7},     // the upsampling 2x2 / 2
      {6, 4, 2, 3, 3, 2, 1, 1, 1, 9, 6},     // groups 2, output_padding
      {8, 8, 8, 3, 3, 3, 1, 2, 1, 5, 4},     // depthwise, stride 3
      {5, 7, 1, 4, 4, 2, 1, 0, 1, 11, 3},    // 4x4 / 2 (the DCGAN block)
      {4, 8, 1, 3, 2, 2, 2, 1, 2, 6, 5},     // dilation 2 with stride 2, odd filter
      {3, 6, 3, 3, 3, 3, 0, 1, 2, 4, 7},     // dilation 2, stride 3 (gcd 1), groups 3
      {16, 32, 1, 3, 3, 1, 1, 0, 1, 13, 9},  // many channels (channels per thread > 1)
  };
  for (DType dt : {DType::F32, DType::F16})
    for (Layout l : {Layout::NCHW, Layout::NHWC})
      for (size_t i = 0; i < shapes.size(); ++i) {
        const ConvTCase t = shapes[i];
        Case c;
        c.name = fmt::format("conv_transpose2d_{}_{}_{}", dtype_name(dt), lname(l), i);
        c.inputs = {{"x", {{2, t.c, t.h, t.w}}}};
        c.rtol_scale = 10.0;
        c.kernel = "conv_transpose";
        c.build = [dt, l, t] {
          auto g = std::make_shared<Graph>("convt");
          Tensor x = g->input("x", dt, {"N", t.c, t.h, t.w}, l);
          Tensor w = cst(*g, "w", dt, {t.c, t.k / t.groups, t.r, t.s}, -0.5, 0.5);
          Tensor b = cst(*g, "b", dt, {t.k}, -0.5, 0.5);
          Attrs a{{"stride", std::vector<int64_t>{t.stride, t.stride}},
                  {"padding", std::vector<int64_t>{t.pad, t.pad, t.pad, 0}},
                  {"output_padding", std::vector<int64_t>{t.opad, 0}},
                  {"dilation", std::vector<int64_t>{t.dil, 1}},
                  {"groups", t.groups}};
          Tensor y = g->add_node1("conv_transpose2d", {x, w, b}, a);
          g->output(g->add_node1("relu", {y}));  // bias + relu: one kernel
          Tensor y2 = g->add_node1("conv_transpose2d", {x, w}, a);
          g->output(g->add(y2, y));  // a residual add of a tensor of the output's shape
          return g;
        };
        cases.push_back(c);
      }
}

void add_arg_reduce_range_cases(std::vector<Case>& cases) {
  // Lines of 1, 7, 33, 1000 and 5000 (thread, warp and CTA forms), every axis, both layouts.
  for (DType dt : {DType::F32, DType::F16, DType::I32, DType::I64})
    for (int64_t len : {1, 7, 33, 1000, 5000})
      for (int last = 0; last < 2; ++last) {
        Case c;
        c.name = fmt::format("argmax_argmin_{}_r{}{}", dtype_name(dt), len, last ? "_last" : "");
        const bool ints = !is_float(dt);
        c.inputs = {{"x", {{3, 5, len}, ints ? -4.0 : -2.0, ints ? 4.0 : 2.0}}};
        c.build = [dt, len, last] {
          auto g = std::make_shared<Graph>("arg");
          Tensor x = g->input("x", dt, {"N", 5, len});
          for (int64_t ax : {0, 1, 2})
            for (const char* op : {"argmax", "argmin"})
              g->output(g->add_node1(op, {x},
                                     {{"axis", ax},
                                      {"keepdims", int64_t{ax % 2}},
                                      {"select_last_index", int64_t{last}}}));
          if (is_float(dt))  // a prologue computed on the fly
            g->output(g->add_node1("argmax", {g->add_node1("sin", {x})}, {{"axis", int64_t{2}}}));
          return g;
        };
        cases.push_back(c);
      }
  for (Layout l : {Layout::NCHW, Layout::NHWC}) {
    Case c;
    c.name = fmt::format("argmax_nhwc_axes_{}", lname(l));
    c.inputs = {{"x", {{2, 7, 5, 33}}}};
    c.build = [l] {
      auto g = std::make_shared<Graph>("arg4");
      Tensor x = g->input("x", DType::F16, {"N", 7, 5, 33}, l);
      for (int64_t ax : {0, 1, 2, 3})
        g->output(g->add_node1("argmin", {x}, {{"axis", ax}, {"keepdims", int64_t{1}}}));
      return g;
    };
    cases.push_back(c);
  }
  for (const char* dt : {"f32", "f16", "i32", "i64"})
    for (int64_t len : {1, 7, 4097}) {
      Case c;
      c.name = fmt::format("range_{}_{}", dt, len);
      c.inputs = {{"x", {{len}}}};
      const std::string dts = dt;
      c.build = [dts] {
        auto g = std::make_shared<Graph>("range");
        Tensor x = g->input("x", DType::F32, {"S"});
        const bool ints = dts[0] == 'i';
        Tensor r = g->add_node1("range", {},
                                {{"start", ints ? 3.0 : -1.5},
                                 {"delta", ints ? -2.0 : 0.25},
                                 {"length", std::vector<Dim>{Dim("S")}},
                                 {"dtype", dts}});
        g->output(r);
        Tensor pos = g->add_node1(
            "range", {}, {{"length", std::vector<Dim>{Dim("S")}}, {"dtype", std::string("f32")}});
        g->output(g->add(x, pos));  // range fused into a pointwise kernel
        return g;
      };
      cases.push_back(c);
    }
}

// ---- gather, gather_elements (tests/gather_graphs.hpp): floating data in f32/f16/bf16, integer
// and bool data, fused and not; index inputs hold in-range values, negative ones included.
void add_gather_cases(std::vector<Case>& cases) {
  std::vector<test::GatherGraph> all = test::gather_int_graphs();
  for (DType dt : kDtypes)
    for (const test::GatherGraph& gg : test::gather_graphs(dt)) all.push_back(gg);
  for (const test::GatherGraph& gg : all)
    for (bool fusion : {true, false}) {
      Case c;
      c.name = gg.name + (fusion ? "" : "_unfused");
      c.fusion = fusion;
      c.runs = 2;
      for (const auto& [name, shape] : gg.inputs) {
        auto it = gg.index_size.find(name);
        if (it == gg.index_size.end())
          c.inputs[name] = {shape};
        else
          c.inputs[name] = {shape, -static_cast<double>(it->second),
                            static_cast<double>(it->second - 1)};
      }
      c.build = gg.build;
      cases.push_back(c);
    }
}

void add_pointwise_cases(std::vector<Case>& cases) {
  // ---- every pointwise op: one graph per dtype x layout x size, every op a separate output
  // (the planner fuses the siblings horizontally: one kernel), plus one unfused run.
  const std::vector<std::vector<int64_t>> pw_shapes = {{2, 3, 5, 7}, {1, 3, 1, 4097}, {1, 1, 1, 1}};
  for (DType dt : kDtypes)
    for (Layout l : {Layout::NCHW, Layout::NHWC})
      for (size_t si = 0; si < pw_shapes.size(); ++si)
        for (bool fusion : {true, false}) {
          if (!fusion && (si != 0 || l != Layout::NHWC)) continue;
          auto shape = pw_shapes[si];
          Case c;
          c.name = fmt::format("pointwise_all_{}_{}_s{}{}", dtype_name(dt), lname(l), si,
                               fusion ? "" : "_unfused");
          c.fusion = fusion;
          c.inputs = {{"x", {shape, -2.0, 2.0}}, {"p", {shape, 0.5, 2.0}}};
          c.build = [dt, l, shape] {
            auto g = std::make_shared<Graph>("pw");
            Shape s(shape.begin(), shape.end());
            Tensor x = g->input("x", dt, s, l), p = g->input("p", dt, s, l);
            Tensor per_c = cst(*g, "c", dt, {s[1], 1, 1});
            for (size_t k = 0; k < static_cast<size_t>(OpKind::Count); ++k) {
              const OpInfo& info = op_info(static_cast<OpKind>(k));
              if (info.category != OpCategory::Pointwise) continue;
              // The integer / bool ops have their own cases (int_bool_cases below).
              if (info.kind >= OpKind::Mod && info.kind <= OpKind::Where) continue;
              if (info.index_source) continue;  // range: its own cases (no operands)
              Attrs a;
              if (info.kind == OpKind::Cast)
                a["dtype"] = std::string(dt == DType::F32 ? "bf16" : "f32");
              if (info.kind == OpKind::Clamp) {
                a["min"] = -0.5;
                a["max"] = 0.75;
              }
              std::vector<Tensor> ins;
              for (int slot = 0; slot < info.max_inputs; ++slot)
                ins.push_back(needs_positive(info.kind, slot) ? p : x);
              g->output(g->add_node1(info.name, ins, a, info.name));
              if (info.max_inputs == 2)  // broadcast per-channel operand
                g->output(
                    g->add_node1(info.name, {ins[0], per_c}, a, std::string(info.name) + "_bcast"));
            }
            return g;
          };
          cases.push_back(c);
        }
}

void add_batchnorm_cases(std::vector<Case>& cases) {
  // ---- batchnorm (unfolded) in a chain, symbolic batch
  for (DType dt : kDtypes)
    for (Layout l : {Layout::NCHW, Layout::NHWC}) {
      Case c;
      c.name = fmt::format("batchnorm_relu_{}_{}", dtype_name(dt), lname(l));
      c.inputs = {{"x", {{5, 12, 7, 9}}}};
      c.build = [dt, l] {
        auto g = std::make_shared<Graph>("bn");
        Tensor x = g->input("x", dt, {"N", 12, 7, 9}, l);
        Tensor y = g->batchnorm(x, cst(*g, "s", dt, {12}), cst(*g, "b", dt, {12}, -0.5, 0.5),
                                cst(*g, "m", dt, {12}, -0.5, 0.5), cst(*g, "v", dt, {12}));
        g->output(g->relu(y));
        return g;
      };
      cases.push_back(c);
    }
}

void add_rownorm_cases(std::vector<Case>& cases) {
  // ---- row norms: layernorm/rmsnorm/softmax with add prologue, gelu epilogue, extra output
  for (DType dt : kDtypes)
    for (int64_t len : {1, 7, 32, 96, 192, 1000, 4096, 4097, 70000}) {
      for (const char* op : {"layernorm", "rmsnorm", "softmax"}) {
        Case c;
        c.name = fmt::format("{}_{}_r{}", op, dtype_name(dt), len);
        // Short rows share a warp (up to 32 rows per CTA): 77 rows end in a part-filled warp.
        const int64_t rows = len <= 256 ? 77 : 5;
        c.inputs = {{"x", {{rows, len}}}, {"r", {{rows, len}}}};
        std::string ops = op;
        c.build = [dt, len, ops] {
          auto g = std::make_shared<Graph>("rn");
          Tensor x = g->input("x", dt, {"N", len}), r = g->input("r", dt, {"N", len});
          Tensor h = g->add(x, r);
          Tensor y;
          if (ops == "layernorm")
            y = g->layernorm(h, cst(*g, "s", dt, {len}), cst(*g, "b", dt, {len}, -0.5, 0.5));
          else if (ops == "rmsnorm")
            y = g->rmsnorm(h, cst(*g, "s", dt, {len}));
          else
            y = g->softmax(h);
          g->output(g->gelu(y, GeluApprox::None));
          g->output(h);  // the prologue's result is also an output
          return g;
        };
        cases.push_back(c);
      }
    }
  // Row norms reading their rows in place in strided memory: an unpadding slice of H then of W
  // (Swin V2's window attention output) read by a layernorm with a residual epilogue, and q and
  // k of a head split ([N, T, 3, H, D] -> [3, N, H, T, D], sliced) read by an rmsnorm and a
  // softmax from the projection's output.
  for (DType dt : kDtypes) {
    Case c;
    c.name = fmt::format("layernorm_unpadded_rows_{}", dtype_name(dt));
    c.inputs = {{"x", {{3, 12, 12, 64}}}, {"r", {{3, 10, 10, 64}}}};
    c.build = [dt] {
      auto g = std::make_shared<Graph>("unpad");
      Tensor x = g->input("x", dt, {"N", 12, 12, 64}), r = g->input("r", dt, {"N", 10, 10, 64});
      Tensor h = g->slice(g->slice(x, {0}, {10}, {1}), {0}, {10}, {2});
      Tensor y = g->layernorm(h, cst(*g, "s", dt, {64}), cst(*g, "b", dt, {64}, -0.5, 0.5));
      g->output(g->add(y, r));
      return g;
    };
    cases.push_back(c);
    Case d;
    d.name = fmt::format("rownorm_head_split_rows_{}", dtype_name(dt));
    d.inputs = {{"x", {{3, 7, 48}}}};
    d.build = [dt] {
      auto g = std::make_shared<Graph>("heads");
      Tensor x = g->input("x", dt, {"N", 7, 48});
      Tensor qkv = g->matmul(x, cst(*g, "w", dt, {48, 192}, -0.2, 0.2));
      Tensor t = g->transpose(g->reshape(qkv, {"N", 7, 3, 2, 32}), {2, 0, 3, 1, 4});
      Tensor q = g->reshape(g->slice(t, {0}, {1}, {0}), {"N", 2, 7, 32});
      Tensor k = g->reshape(g->slice(t, {1}, {2}, {0}), {"N", 2, 7, 32});
      g->output(g->rmsnorm(q, cst(*g, "s", dt, {32})));
      g->output(g->softmax(k));
      return g;
    };
    cases.push_back(d);
  }
  // Whisper's stem: 1-D convs channels-last (a copy transposes the input), gelus in their
  // epilogues, the tokens a view read by the layernorm.
  for (DType dt : {DType::F16, DType::BF16}) {
    Case c;
    c.name = fmt::format("whisper_stem_{}", dtype_name(dt));
    c.inputs = {{"x", {{3, 16, 40}}}};
    c.build = [dt] { return test::whisper_stem(dt, 40); };
    cases.push_back(c);
  }
  // softmax over a middle axis / NHWC layernorm (strided rows), symbolic row length
  for (DType dt : kDtypes) {
    Case c;
    c.name = fmt::format("softmax_axis1_nhwc_{}", dtype_name(dt));
    c.inputs = {{"x", {{3, 7, 5, 4}}}};
    c.build = [dt] {
      auto g = std::make_shared<Graph>("sm1");
      Tensor x = g->input("x", dt, {3, 7, 5, 4}, Layout::NHWC);
      g->output(g->softmax(x, 1));
      g->output(g->layernorm(x, {}, {}, 2));
      return g;
    };
    cases.push_back(c);
    Case d;
    d.name = fmt::format("layernorm_symbolic_len_{}", dtype_name(dt));
    d.inputs = {{"x", {{3, 333}}}};
    d.build = [dt] {
      auto g = std::make_shared<Graph>("lnsym");
      Tensor x = g->input("x", dt, {"N", "L"});
      g->output(g->layernorm(x));
      g->output(g->softmax(x));
      return g;
    };
    cases.push_back(d);
  }
}

void add_channelnorm_cases(std::vector<Case>& cases) {
  // ---- channel norms
  for (DType dt : kDtypes)
    for (Layout l : {Layout::NCHW, Layout::NHWC}) {
      Case c;
      c.name = fmt::format("groupnorm_silu_{}_{}", dtype_name(dt), lname(l));
      c.inputs = {{"x", {{3, 12, 5, 7}, -1.0, 3.0}}};
      c.build = [dt, l] {
        auto g = std::make_shared<Graph>("gn");
        Tensor x = g->input("x", dt, {"N", 12, 5, 7}, l);
        Tensor y = g->groupnorm(x, 4, cst(*g, "s", dt, {12}), cst(*g, "b", dt, {12}, -0.5, 0.5));
        g->output(g->silu(y));
        return g;
      };
      cases.push_back(c);
      Case d;
      d.name = fmt::format("instancenorm_{}_{}", dtype_name(dt), lname(l));
      d.inputs = {{"x", {{2, 5, 33, 17}, 2.0, 4.0}}};  // a large mean: shifted statistics
      d.build = [dt, l] {
        auto g = std::make_shared<Graph>("in");
        Tensor x = g->input("x", dt, {2, 5, 33, 17}, l);
        Tensor p = g->mul(x, cst(*g, "c", dt, {5, 1, 1}));
        g->output(g->relu(g->instancenorm(p)));
        g->output(p);
        return g;
      };
      cases.push_back(d);
    }
  {
    Case c;
    c.name = "groupnorm_sd_bf16_nhwc_16x320x64x64";
    c.inputs = {{"x", {{2, 320, 64, 64}}}};
    c.runs = 2;
    c.build = [] {
      auto g = std::make_shared<Graph>("gnsd");
      Tensor x = g->input("x", DType::BF16, {"N", 320, 64, 64}, Layout::NHWC);
      Tensor y = g->groupnorm(x, 32, cst(*g, "s", DType::BF16, {320}),
                              cst(*g, "b", DType::BF16, {320}, -0.5, 0.5));
      g->output(g->silu(y));
      return g;
    };
    cases.push_back(c);
    c.name += "_split";  // 16 CTAs per sample of four chunks, self-resetting counters
    c.schedule = "channelnorm.algo=split";
    c.kernel = "_split_apply";
    cases.push_back(c);
  }
  // The cluster paths' one-pass statistics over values shifted by each group's first element: a
  // mean of 102 against a spread of about 1.2 would lose most digits of an unshifted E[x^2] -
  // E[x]^2 in f32. Under the rules (clusters of 8) and in the one-wave form (clusters of two,
  // half of each slice read again from L2), which is also forced on a partial last pixel row (100
  // pixels per CTA, 64 per row) and is the rule for the bench's batch of 16 (a static batch).
  for (DType dt : kDtypes) {
    Case c;
    c.inputs = {{"x", {{2, 320, 64, 64}, 100.0, 104.0}}};
    c.build = norm_silu_nhwc(dt, 320, 32, 64, 64);
    for (bool wave : {false, true}) {
      c.name = fmt::format("groupnorm320_silu_{}_nhwc_64x64_mean102{}", dtype_name(dt),
                           wave ? "_onewave" : "");
      c.schedule = wave ? "channelnorm.onewave=1" : "";
      c.kernel = wave ? "_cluster2_onewave" : "_cluster8";
      cases.push_back(c);
    }
    c.name = fmt::format("groupnorm320_silu_{}_nhwc_10x20_onewave", dtype_name(dt));
    c.inputs = {{"x", {{3, 320, 10, 20}}}};
    c.build = norm_silu_nhwc(dt, 320, 32, 10, 20);
    cases.push_back(c);
  }
  // The cluster forms' per-group fold of a thread's lanes, every case of it: lanes spanning up to
  // 3 groups of 6 channels, 4 whole groups of 2, and one channel per group (instancenorm); under
  // the rules (clusters of 8) and in one wave.
  for (DType dt : {DType::F32, DType::F16}) {
    for (auto [C, G] : {std::pair<int64_t, int64_t>{48, 8}, {64, 32}, {24, 24}}) {
      for (const char* sched : {"", "channelnorm.onewave=1"}) {
        Case c;
        c.name = fmt::format("{}{}_g{}_silu_{}_nhwc_32x20{}", C == G ? "instancenorm" : "groupnorm",
                             C, G, dtype_name(dt), *sched ? "_onewave" : "");
        c.inputs = {{"x", {{3, C, 32, 20}, -1.0, 3.0}}};
        c.schedule = sched;
        c.kernel = *sched ? "_cluster2_onewave" : "_cluster";
        c.build = norm_silu_nhwc(dt, C, G, 32, 20);
        cases.push_back(c);
      }
    }
  }
  {
    Case c;
    c.name = "groupnorm_silu_f16_nhwc_16x320x64x64_static_onewave";
    c.inputs = {{"x", {{16, 320, 64, 64}}}};
    c.kernel = "_cluster2_onewave";
    c.runs = 2;
    c.build = norm_silu_nhwc(DType::F16, 320, 32, 64, 64, 16);
    cases.push_back(c);
  }
}

void add_split_channelnorm_cases(std::vector<Case>& cases) {
  // ---- the split channel-norm path (the rule for NHWC, static C and image where the sm_90
  // cluster path does not apply; each case runs under the rules, split, split without L2
  // policies and under channelnorm.algo=cluster: cluster or per-group): several
  // statistics CTAs per sample meeting through counters (9x7: 2 per sample for 16-bit, 4 for f32,
  // a partial last chunk), one CTA per sample (1x2), a prologue with its output stored and a
  // large mean, channels not a multiple of the vector with two dense inputs and a residual
  // epilogue. Each runs twice on one engine (the counters must be back to zero after the first
  // launch).
  for (DType dt : kDtypes) {
    for (auto [h, w] : {std::pair<int64_t, int64_t>{9, 7}, {1, 2}}) {
      Case c;
      c.name = fmt::format("groupnorm320_silu_{}_nhwc_{}x{}", dtype_name(dt), h, w);
      c.inputs = {{"x", {{3, 320, h, w}, -1.0, 3.0}}};
      c.runs = 2;
      c.build = [dt, h, w] {
        auto g = std::make_shared<Graph>("gn320");
        Tensor x = g->input("x", dt, {"N", 320, h, w}, Layout::NHWC);
        Tensor y = g->groupnorm(x, 32, cst(*g, "s", dt, {320}), cst(*g, "b", dt, {320}, -0.5, 0.5));
        g->output(g->silu(y));
        return g;
      };
      cases.push_back(c);
    }
    Case d;
    d.name = fmt::format("instancenorm_prologue_{}_nhwc_24x33x17", dtype_name(dt));
    d.inputs = {{"x", {{2, 24, 33, 17}, 2.0, 4.0}}};
    d.runs = 2;
    d.build = [dt] {
      auto g = std::make_shared<Graph>("in24");
      Tensor x = g->input("x", dt, {2, 24, 33, 17}, Layout::NHWC);
      Tensor p = g->mul(x, cst(*g, "c", dt, {24, 1, 1}));
      g->output(g->relu(g->instancenorm(p)));
      g->output(p);
      return g;
    };
    cases.push_back(d);
    Case e;
    e.name = fmt::format("groupnorm12_add_residual_{}_nhwc", dtype_name(dt));
    e.inputs = {{"x", {{2, 12, 24, 40}}}, {"r", {{2, 12, 24, 40}}}};
    e.runs = 2;
    e.build = [dt] {
      auto g = std::make_shared<Graph>("gn12");
      Tensor x = g->input("x", dt, {"N", 12, 24, 40}, Layout::NHWC);
      Tensor r = g->input("r", dt, {"N", 12, 24, 40}, Layout::NHWC);
      Tensor y = g->groupnorm(g->add(x, r), 4, cst(*g, "s", dt, {12}), cst(*g, "b", dt, {12}));
      g->output(g->add(y, x));
      return g;
    };
    cases.push_back(e);
    const std::vector<Case> base(cases.end() - 4, cases.end());
    for (const Case& r : base) {
      Case split = r, plain = r, cluster = r;
      split.name += "_split";
      split.schedule = "channelnorm.algo=split";
      split.kernel = "_split_apply";
      cases.push_back(split);
      // Several statistics CTAs per sample of three chunks each, a partial last span.
      plain.name += "_split_vecs1_iters3";
      plain.schedule = "channelnorm.algo=split,channelnorm.vecs=1,channelnorm.iters=3";
      plain.kernel = "_split_apply";
      cases.push_back(plain);
      cluster.name += "_cluster";
      cluster.schedule = "channelnorm.algo=cluster";
      cases.push_back(cluster);
    }
  }
}

void add_reduction_cases(std::vector<Case>& cases) {
  // ---- reductions
  const std::vector<std::vector<int64_t>> axes_list = {{}, {0}, {1}, {3}, {2, 3}, {1, 2, 3}};
  for (DType dt : kDtypes)
    for (Layout l : {Layout::NCHW, Layout::NHWC})
      for (const char* op : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min"})
        for (size_t ai = 0; ai < axes_list.size(); ++ai) {
          // Every combination in f32; the 16-bit types share the code paths: sample them.
          std::string opn = op;
          if (dt != DType::F32 && (ai % 2 == 1 || opn == "reduce_mean" || opn == "reduce_min"))
            continue;
          Case c;
          bool keep = ai % 2 == 1;
          c.name =
              fmt::format("{}_{}_{}_a{}{}", op, dtype_name(dt), lname(l), ai, keep ? "_keep" : "");
          c.inputs = {{"x", {{3, 5, 7, 97}}}};
          std::string ops = op;
          auto axes = axes_list[ai];
          // Long f32 sums accumulate in a different order than the f64 reference.
          c.rtol_scale = ops == "reduce_sum" || ops == "reduce_mean" ? 10.0 : 1.0;
          // A sum is scaled to about a mean of x^2 (<= 4) before exp: unscaled, 16-bit exp
          // overflowed (every output inf, or flaky at the edge: the reference rounds the sum to
          // f16 first, the fused kernel keeps it in f32).
          int64_t count = 1;
          const int64_t dims[] = {3, 5, 7, 97};
          for (int d = 0; d < 4; ++d)
            if (axes.empty() || std::find(axes.begin(), axes.end(), d) != axes.end())
              count *= dims[d];
          c.build = [dt, l, ops, axes, keep, count] {
            auto g = std::make_shared<Graph>("red");
            Tensor x = g->input("x", dt, {"N", 5, 7, 97}, l);
            Tensor r = g->reduce(ops, g->mul(x, x), axes, keep);
            if (ops == "reduce_sum")
              r = g->mul(r, cst(*g, "k", dt, {1}, 0.9 / static_cast<double>(count),
                                1.0 / static_cast<double>(count)));
            g->output(g->exp(r));
            return g;
          };
          cases.push_back(c);
        }
}

void add_split_reduction_cases(std::vector<Case>& cases) {
  // ---- outer reductions split over CTAs (column tiles, a workspace and self-resetting counters:
  // three runs): a squeeze-excite pool of a large NHWC map (few outputs, long ranges) with its
  // prologue's result also an output, a symbolic batch, a partial tile of 32 outputs (C = 40), and
  // max / min / sum over non-innermost dims.
  for (DType dt : kDtypes) {
    Case c;
    c.name = fmt::format("reduce_split_columns_{}", dtype_name(dt));
    c.inputs = {{"x", {{2, 40, 48, 56}}}, {"y", {{3, 24, 40, 40}}}, {"z", {{1500, 7, 36}}}};
    c.runs = 3;
    c.rtol_scale = 10.0;
    c.kernel = "_cols32x8_s";
    c.build = [dt] {
      auto g = std::make_shared<Graph>("se_pool");
      Tensor x = g->input("x", dt, {2, 40, 48, 56}, Layout::NHWC);
      Tensor r = g->relu(x);
      g->output(r);
      g->output(g->sigmoid(g->global_avgpool(r)));
      Tensor y = g->input("y", dt, {"N", 24, 40, 40}, Layout::NHWC);
      g->output(g->reduce("reduce_max", y, {2, 3}, true));
      g->output(g->neg(g->reduce("reduce_min", g->exp(y), {1, 2}, false)));
      Tensor z = g->input("z", dt, {1500, 7, 36});
      g->output(g->mul(g->reduce("reduce_mean", g->mul(z, z), {0}, false),
                       cst(*g, "k", dt, {36}, 0.5, 1.5)));
      return g;
    };
    cases.push_back(c);
  }
}

void add_window_cases(std::vector<Case>& cases) {
  // ---- windows
  for (DType dt : kDtypes)
    for (Layout l : {Layout::NCHW, Layout::NHWC}) {
      Case c;
      c.name = fmt::format("pools_{}_{}", dtype_name(dt), lname(l));
      c.inputs = {{"x", {{3, 6, 13, 11}}}};
      c.build = [dt, l] {
        auto g = std::make_shared<Graph>("pool");
        Tensor x = g->input("x", dt, {"N", 6, 13, 11}, l);
        Pool2dOptions o;
        o.kernel = {3, 3};
        o.stride = {2, 2};
        o.padding = {1, 1};
        g->output(g->neg(g->maxpool2d(g->relu(x), o)));
        test::add_avgpools(*g, x);
        g->output(g->sigmoid(g->global_avgpool(x)));
        return g;
      };
      cases.push_back(c);
    }
  // The 8-channel pools (the rule for dense NHWC 16-bit, C % 8 == 0), and the scalar schedule of
  // the same graph (KILN_SCHEDULE window.vec=2).
  for (int vec : {1, 2})
    for (DType dt : {DType::F16, DType::BF16}) {
      Case c;
      c.name = fmt::format("pools_{}_{}_nhwc", vec == 1 ? "v8" : "scalar", dtype_name(dt));
      c.inputs = {{"x", {{3, 24, 13, 11}}}};
      c.schedule = vec == 1 ? "" : "window.vec=2";
      c.kernel = vec == 1 ? "_v8" : "";
      c.build = [dt] {
        auto g = std::make_shared<Graph>("pool8");
        Tensor x = g->input("x", dt, {"N", 24, 13, 11}, Layout::NHWC);
        Pool2dOptions o;
        o.kernel = {3, 3};
        o.stride = {2, 2};
        o.padding = {1, 1};
        g->output(g->maxpool2d(x, o));
        test::add_avgpools(*g, x);
        return g;
      };
      cases.push_back(c);
    }
}

void add_layout_movement_cases(std::vector<Case>& cases) {
  // ---- movement
  for (DType dt : kDtypes) {
    Case c;
    c.name = fmt::format("transpose_reshape_{}", dtype_name(dt));
    c.inputs = {{"x", {{3, 6, 5, 7}}}, {"y", {{3, 4, 5}}}};
    c.build = [dt] {
      auto g = std::make_shared<Graph>("mv");
      Tensor x = g->input("x", dt, {"N", 6, 5, 7}, Layout::NHWC);
      g->output(g->transpose(x, {0, 2, 3, 1}));
      g->output(g->reshape(x, {Dim("N"), Dim(-1)}));
      Tensor y = g->input("y", dt, {3, 4, 5});
      g->output(g->relu(g->transpose(g->exp(y), {2, 0, 1})));
      return g;
    };
    cases.push_back(c);
  }
}

void add_pad_cases(std::vector<Case>& cases) {
  // ---- pad: NHWC channels 3 -> 8 (one 16-byte vector per pixel), every dim with a fill value,
  // a scalar-path NCHW pad, and prologues (a cast from f32, an elementwise op) computed in the copy
  for (DType dt : kDtypes)
    for (bool fusion : {true, false}) {
      Case c;
      c.name = fmt::format("pad_{}{}", dtype_name(dt), fusion ? "" : "_unfused");
      c.fusion = fusion;
      c.inputs = {{"x", {{3, 3, 5, 7}}}, {"y", {{2, 3, 5, 7}}}, {"f", {{3, 3, 5, 7}}}};
      c.build = [dt] {
        auto g = std::make_shared<Graph>("pad");
        Tensor x = g->input("x", dt, {"N", 3, 5, 7}, Layout::NHWC);
        g->output(g->pad(x, {0, 0, 0, 0, 0, 5, 0, 0}));
        g->output(g->pad(x, {1, 2, 0, 3, 0, 11, 1, 2}, 0.5));
        Tensor y = g->input("y", dt, {2, 3, 5, 7});
        g->output(g->pad(g->exp(y), {0, 0, 1, 2, 0, 0, 3, 1}, -1.0));
        Tensor f = g->input("f", DType::F32, {"N", 3, 5, 7}, Layout::NHWC);
        Tensor h = g->add_node1("cast", {f}, {{"dtype", std::string(dtype_name(dt))}});
        g->output(g->pad(g->relu(h), {0, 0, 0, 0, 0, 5, 0, 0}));
        return g;
      };
      cases.push_back(c);
    }
}

void add_fusion_pattern_cases(std::vector<Case>& cases) {
  // ---- fusion patterns: a transformer-ish residual chain with multi-output groups
  for (DType dt : kDtypes) {
    Case c;
    c.name = fmt::format("pattern_residual_chain_{}", dtype_name(dt));
    c.inputs = {{"x", {{7, 256}}}, {"a", {{7, 256}}}};
    c.build = [dt] {
      auto g = std::make_shared<Graph>("chain");
      Tensor x = g->input("x", dt, {"N", 256}), a = g->input("a", dt, {"N", 256});
      Tensor h = g->add(x, a);
      Tensor y = g->layernorm(h);
      Tensor z = g->mul(g->sigmoid(y), cst(*g, "s", dt, {256}));
      Tensor o = g->add(h, z);
      Tensor m = g->reduce("reduce_max", o, {1}, true);
      g->output(g->softmax(g->sub(o, m)));
      g->output(y);
      return g;
    };
    cases.push_back(c);
  }
}

void add_movement_op_cases(std::vector<Case>& cases) {
  // ---- concat, split, slice, expand, tile, depth/space, pad modes, trilu
  // (tests/movement_graphs.hpp)
  for (DType dt : {DType::F32, DType::F16})
    for (const test::MovementGraph& mg : test::movement_graphs(dt))
      for (bool fusion : {true, false}) {
        Case c;
        c.name = mg.name + (fusion ? "" : "_unfused");
        c.fusion = fusion;
        for (const auto& [name, shape] : mg.inputs) c.inputs[name] = {shape};
        c.build = mg.build;
        cases.push_back(c);
      }
}

void add_resize_cases(std::vector<Case>& cases) {
  // ---- resize: nearest (gather copy) and linear in every mode, NCHW and NHWC
  // (tests/resize_graphs.hpp)
  for (DType dt : {DType::F32, DType::F16})
    for (const test::MovementGraph& mg : test::resize_graphs(dt))
      for (bool fusion : {true, false}) {
        Case c;
        c.name = mg.name + (fusion ? "" : "_unfused");
        c.fusion = fusion;
        for (const auto& [name, shape] : mg.inputs) c.inputs[name] = {shape};
        c.build = mg.build;
        cases.push_back(c);
      }
}

std::vector<Case> make_cases() {
  std::vector<Case> cases;
  append_int_bool_cases(&cases);
  add_pointwise_cases(cases);
  add_batchnorm_cases(cases);
  add_rownorm_cases(cases);
  add_channelnorm_cases(cases);
  add_split_channelnorm_cases(cases);
  add_reduction_cases(cases);
  add_split_reduction_cases(cases);
  add_window_cases(cases);
  add_layout_movement_cases(cases);
  add_pad_cases(cases);
  add_fusion_pattern_cases(cases);
  add_movement_op_cases(cases);
  add_resize_cases(cases);
  add_new_float_op_cases(cases);
  add_conv_transpose_cases(cases);
  add_arg_reduce_range_cases(cases);
  add_gather_cases(cases);
  return cases;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c = make_cases();
  return c;
}

Engine& engine() {
  static Engine e;
  return e;
}

// Relative (and absolute) tolerance by dtype: about two units in the last place of the stored
// type, since the reference rounds fused intermediates to the storage type and the kernel keeps
// them in f32: bf16 (8 significant bits) 2e-2, f16 (11 bits) 1e-2, f32 1e-5. NaN never passes
// (all_close).
double harness_rtol(DType t) {
  switch (t) {
    case DType::BF16:
      return 2e-2;
    case DType::F16:
      return 1e-2;
    case DType::F32:
      return 1e-5;
    default:  // integers and bools compare exactly
      return 0;
  }
  return 1e-5;
}

TEST(OpsGpuTolerance, PerDtype) {
  EXPECT_EQ(harness_rtol(DType::BF16), 2e-2);
  EXPECT_EQ(harness_rtol(DType::F16), 1e-2);
  EXPECT_EQ(harness_rtol(DType::F32), 1e-5);
  // 2 bf16 ulp at 9.8 (the instancenorm case) passes; 6% does not; NaN never does.
  HostTensor want = HostTensor::from_f64(DType::BF16, {3}, {9.8125, 1.0, 2.0});
  HostTensor got = HostTensor::from_f64(DType::BF16, {3}, {9.6875, 1.0, 2.0});
  EXPECT_TRUE(all_close(got, want, harness_rtol(DType::BF16)));
  HostTensor far = HostTensor::from_f64(DType::BF16, {3}, {9.8125, 1.0, 2.125});
  EXPECT_FALSE(all_close(far, want, harness_rtol(DType::BF16)));
  HostTensor nan = HostTensor::from_f64(DType::F32, {3}, {9.8125, 1.0, std::nan("")});
  HostTensor want32 = HostTensor::from_f64(DType::F32, {3}, {9.8125, 1.0, 2.0});
  EXPECT_FALSE(all_close(nan, want32, 1.0));
}

class OpsGpu : public ::testing::TestWithParam<size_t> {};

// Without a device: every case plans, generates and compiles to cubin (load_kernels = false).
TEST(OpsGpuCompile, EveryCaseCompilesToCubin) {
  EngineOptions eo;
  eo.load_kernels = false;
  eo.disk_cache = false;
  Engine eng(eo);
  for (const Case& c : cases()) {
    std::shared_ptr<Graph> g = c.build();
    try {
      std::optional<Engine> scheduled;  // only for the cases with an opt-in schedule
      if (!c.schedule.empty()) {
        EngineOptions so = eo;
        so.schedule = c.schedule;
        scheduled.emplace(so);
      }
      CompiledGraph cg = (scheduled ? *scheduled : eng).compile(*g);
      EXPECT_FALSE(cg.kernels().empty()) << c.name;
      if (!c.kernel.empty()) {
        bool found = false;
        for (const KernelInfo& k : cg.kernels())
          found |= k.name.find(c.kernel) != std::string::npos;
        EXPECT_TRUE(found) << c.name << ": no kernel named *" << c.kernel << "*";
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.name << ": " << e.what();
    }
  }
}

TEST_P(OpsGpu, MatchesReference) {
  KILN_REQUIRE_DEVICE();
  const Case& c = cases().at(GetParam());
  std::shared_ptr<Graph> g = c.build();
  std::optional<Engine> own;  // unfused or opt-in schedule: an Engine of its own
  if (!c.fusion || !c.schedule.empty()) {
    EngineOptions eo;
    eo.fusion = c.fusion;
    eo.schedule = c.schedule;
    own.emplace(eo);
  }
  Engine& eng = own ? *own : engine();
  CompiledGraph cg = eng.compile(*g);

  std::map<std::string, HostTensor> host_in;
  std::map<std::string, DeviceData> dev_in, dev_out;
  std::map<std::string, std::vector<int64_t>> shapes;
  uint64_t seed = 1000 + GetParam() * 17 +
                  static_cast<uint64_t>(::testing::UnitTest::GetInstance()->random_seed());
  for (int t : g->inputs()) {
    const TensorInfo& ti = g->tensor(t);
    const InputSpec& is = c.inputs.at(ti.name);
    HostTensor h = random_tensor(ti.desc.dtype, is.shape, seed++, is.lo, is.hi);
    dev_in[ti.name] = upload(h, ti.desc.layout);
    host_in[ti.name] = h;
    shapes[ti.name] = is.shape;
  }
  Bindings bind = g->bind(shapes);
  ReferenceOptions ro;
  std::map<std::string, HostTensor> want = run_reference(*g, host_in, ro);
  auto out_shapes = cg.output_shapes(bind);
  for (int run = 0; run < c.runs; ++run) {
    for (int t : g->outputs()) {
      const TensorInfo& ti = g->tensor(t);
      dev_out[ti.name] = alloc_poisoned(ti.desc.dtype, out_shapes.at(ti.name), ti.desc.layout);
    }
    cg.run(tensors_of(dev_in), tensors_of(dev_out));
    for (int t : g->outputs()) {
      const TensorInfo& ti = g->tensor(t);
      HostTensor got = download(dev_out.at(ti.name));
      if (!is_float(ti.desc.dtype)) {  // integers and bools: the exact bytes (bool 0/1)
        EXPECT_TRUE(got.relayout(Layout::NCHW).data == want.at(ti.name).relayout(Layout::NCHW).data)
            << c.name << ": output '" << ti.name << "' differs from the reference, run " << run;
        continue;
      }
      // The loosest dtype the value passed through decides the tolerance.
      double rtol = harness_rtol(ti.desc.dtype);
      for (int i : g->inputs()) rtol = std::max(rtol, harness_rtol(g->tensor(i).desc.dtype));
      rtol *= c.rtol_scale;
      EXPECT_TRUE(
          all_close(got.relayout(Layout::NCHW), want.at(ti.name).relayout(Layout::NCHW), rtol))
          << c.name << ": output '" << ti.name << "', run " << run;
    }
  }
}

// The lookup the gather error tests run: 'wte_lookup' of a [50, 40] f16 table at i64 'ids' [S].
void build_lookup(Graph& g) {
  Tensor w = cst(g, "wte", DType::F16, {50, 40}, -1, 1);
  Tensor ids = g.input("ids", DType::I64, {"S"});
  g.output(g.add_node1("gather", {w, ids}, {}, "wte_lookup"));
}

// An index out of range on the device never reads out of bounds: the run is a located user
// error naming the gather node, and the next run with good indices is correct (the error word
// is zeroed before every run), launched directly and through a captured CUDA graph.
TEST(GatherGpu, OutOfRangeIndexIsALocatedErrorThenAGoodRun) {
  KILN_REQUIRE_DEVICE();
  for (bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "cuda graphs" : "direct launches");
    Graph g("emb");
    build_lookup(g);
    EngineOptions eo;
    eo.cuda_graphs = graphs;
    Engine eng(eo);
    CompiledGraph cg = eng.compile(g);
    auto run = [&](std::vector<int64_t> v) {
      HostTensor h = HostTensor::from_i64(DType::I64, {static_cast<int64_t>(v.size())}, v);
      std::map<std::string, DeviceData> in, out;
      in["ids"] = upload(h);
      out[g.tensor(g.outputs()[0]).name] =
          alloc_poisoned(DType::F16, {static_cast<int64_t>(v.size()), 40});
      cg.run(tensors_of(in), tensors_of(out));
      HostTensor got = download(out.begin()->second);
      HostTensor want = run_reference(g, {{"ids", h}}).begin()->second;
      EXPECT_TRUE(got.data == want.data);
    };
    for (std::vector<int64_t> bad : {std::vector<int64_t>{0, 50, 3}, {-51, 1, 2}}) {
      try {
        run(bad);
        ADD_FAILURE() << "an index out of range ran without an error";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::User) << e.what();
        const std::string m = e.what();
        EXPECT_NE(m.find("node 'wte_lookup': index out of range"), std::string::npos) << m;
      }
      run({0, 49, -50, -1, 7});  // correct again, same shapes and a new one
      run({1, 2, 3});
    }
  }
}

// EngineOptions.deferred_errors: a run with a bad index returns (its words are read back behind
// it); check_errors() throws for it, naming the node; a bad run whose readback has completed is
// reported by the start of the next run, which does not launch; good runs are correct between.
TEST(GatherGpu, DeferredErrorsReportAtTheNextCallOrCheck) {
  KILN_REQUIRE_DEVICE();
  for (bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "cuda graphs" : "direct launches");
    Graph g("emb_deferred");
    build_lookup(g);
    EngineOptions eo;
    eo.cuda_graphs = graphs;
    eo.deferred_errors = true;
    Engine eng(eo);
    CompiledGraph cg = eng.compile(g);
    const std::string oname = g.tensor(g.outputs()[0]).name;
    auto launch = [&](const std::vector<int64_t>& v, bool compare) {
      HostTensor h = HostTensor::from_i64(DType::I64, {static_cast<int64_t>(v.size())}, v);
      std::map<std::string, DeviceData> in, out;
      in["ids"] = upload(h);
      out[oname] = alloc_poisoned(DType::F16, {static_cast<int64_t>(v.size()), 40});
      cg.run(tensors_of(in), tensors_of(out));
      HostTensor got = download(out.at(oname));  // waits for the run (and its readback)
      if (compare) {
        EXPECT_TRUE(got.data == run_reference(g, {{"ids", h}}).at(oname).data);
      }
    };
    auto expect_error = [&](const std::function<void()>& f, const char* what) {
      try {
        f();
        ADD_FAILURE() << what << ": no error for an index out of range";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::User) << e.what();
        const std::string m = e.what();
        EXPECT_NE(m.find("an earlier run"), std::string::npos) << m;
        EXPECT_NE(m.find("node 'wte_lookup': index out of range"), std::string::npos) << m;
      }
    };
    launch({0, 49, -50}, true);
    EXPECT_NO_THROW(cg.check_errors());
    EXPECT_NO_THROW(launch({0, 50, 3}, false));  // the bad run itself returns
    expect_error([&] { cg.check_errors(); }, "check_errors");
    EXPECT_NO_THROW(cg.check_errors());  // reported once
    launch({1, 2, 3, -1}, true);
    EXPECT_NO_THROW(launch({-51, 1}, false));
    expect_error([&] { launch({1, 2}, false); }, "the next run");
    launch({7, 8, 9}, true);
    EXPECT_NO_THROW(cg.check_errors());
  }
}

// Lookups fused into a layernorm's prologue report through the row-norm kernel's error words:
// the token-type lookup's bad index names that node, and a good run matches the reference.
TEST(GatherGpu, FusedLookupOutOfRangeNamesItsNode) {
  KILN_REQUIRE_DEVICE();
  for (const test::GatherGraph& gg : test::gather_graphs(DType::F16)) {
    if (gg.name != "gather_embedding_layernorm_d37_f16") continue;
    std::shared_ptr<Graph> g = gg.build();
    CompiledGraph cg = engine().compile(*g);
    ASSERT_EQ(cg.kernels().size(), 1u);
    // The token-type lookup: the gather reading input 'it' (node order follows the builder's
    // argument evaluation, which C++ leaves unspecified).
    std::string tt_node;
    for (const Node& n : g->nodes())
      for (int t : n.inputs)
        if (g->tensor(t).name == "it") tt_node = n.name;
    ASSERT_FALSE(tt_node.empty());
    auto run = [&](std::vector<int32_t> tt) {
      std::vector<int64_t> tt64(tt.begin(), tt.end()), ids(tt.size());
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 37 % 300) - 150;
      const int64_t n = static_cast<int64_t>(tt.size());
      std::map<std::string, HostTensor> h = {
          {"ids", HostTensor::from_i64(DType::I64, {1, n}, ids)},
          {"it", HostTensor::from_i64(DType::I32, {1, n}, tt64)}};
      std::map<std::string, DeviceData> in, out;
      for (const auto& [k, v] : h) in[k] = upload(v);
      const std::string oname = g->tensor(g->outputs()[0]).name;
      out[oname] = alloc_poisoned(DType::F16, {1, n, 37});
      cg.run(tensors_of(in), tensors_of(out));
      EXPECT_TRUE(all_close(download(out.at(oname)), run_reference(*g, h).at(oname), 1e-2));
    };
    try {
      run({0, 1, 2, 1});
      ADD_FAILURE() << "an index out of range ran without an error";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(fmt::format("node '{}': index out of range", tt_node)), std::string::npos)
          << m;
    }
    run({0, 1, -2, -1, 1});
  }
}

// The same through the C ABI: kiln_run returns KILN_ERROR_USER naming the node, then runs again;
// with deferred_errors, kiln_run returns and kiln_check_errors reports it.
TEST(GatherGpu, CAbiReturnsTheUserError) {
  KILN_REQUIRE_DEVICE();
  kiln_graph g = nullptr;
  ASSERT_EQ(kiln_graph_load_string(R"({"kiln": 1,
    "inputs": {"ids": {"dtype": "i32", "shape": ["S"]}},
    "constants": {"w": {"dtype": "f32", "shape": [3, 4], "data": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                                                  10, 11]}},
    "nodes": [{"op": "gather", "name": "rows", "inputs": ["w", "ids"], "outputs": ["e"]}],
    "outputs": ["e"]})",
                                   nullptr, &g),
            KILN_OK)
      << kiln_last_error();
  for (int32_t deferred : {0, 1}) {
    SCOPED_TRACE(deferred ? "deferred_errors" : "errors at the run");
    kiln_engine_options o;
    kiln_engine_options_init(&o, sizeof o);
    o.deferred_errors = deferred;
    kiln_engine e = nullptr;
    ASSERT_EQ(kiln_engine_create_sized(&o, sizeof o, &e), KILN_OK) << kiln_last_error();
    kiln_compiled c = nullptr;
    ASSERT_EQ(kiln_compile(e, g, &c), KILN_OK) << kiln_last_error();
    uint64_t din = 0, dout = 0;
    ASSERT_EQ(kiln_device_alloc(8, &din), KILN_OK);
    ASSERT_EQ(kiln_device_alloc(32, &dout), KILN_OK);
    kiln_tensor in{"ids", din, 1, {2}}, out{"e", dout, 2, {2, 4}};
    std::vector<int32_t> ids = {2, 3};
    ASSERT_EQ(kiln_memcpy_htod(din, ids.data(), 8), KILN_OK);
    if (deferred) {
      EXPECT_EQ(kiln_run(c, &in, 1, &out, 1, nullptr, 0), KILN_OK) << kiln_last_error();
      EXPECT_EQ(kiln_check_errors(c), KILN_ERROR_USER);
    } else {
      EXPECT_EQ(kiln_run(c, &in, 1, &out, 1, nullptr, 0), KILN_ERROR_USER);
    }
    EXPECT_NE(std::string(kiln_last_error()).find("node 'rows': index out of range"),
              std::string::npos)
        << kiln_last_error();
    ids = {-1, 0};
    ASSERT_EQ(kiln_memcpy_htod(din, ids.data(), 8), KILN_OK);
    EXPECT_EQ(kiln_run(c, &in, 1, &out, 1, nullptr, 0), KILN_OK) << kiln_last_error();
    std::vector<float> got(8);
    ASSERT_EQ(kiln_memcpy_dtoh(got.data(), dout, 32), KILN_OK);
    EXPECT_EQ(got, (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3}));
    EXPECT_EQ(kiln_check_errors(c), KILN_OK) << kiln_last_error();
    kiln_device_free(din);
    kiln_device_free(dout);
    kiln_compiled_destroy(c);
    kiln_engine_destroy(e);
  }
  kiln_graph_destroy(g);
}

INSTANTIATE_TEST_SUITE_P(All, OpsGpu, ::testing::Range<size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return cases().at(info.param).name;
                         });

}  // namespace
}  // namespace kiln
