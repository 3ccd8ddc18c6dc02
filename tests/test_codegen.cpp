// Codegen tests (CPU only): every pointwise / reduction / norm / window / movement op and every
// fusion pattern, over f32/f16/bf16, NCHW/NHWC and odd sizes, generates source that NVRTC
// compiles for sm_80 and sm_90; kernel specs (names, symbolic args, grids, bytes) are checked;
// and one golden-source test catches codegen drift (UPDATE_GOLDEN=1 rewrites the file).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <tuple>

#include "codegen/kernel_spec.hpp"
#include "codegen/nvrtc.hpp"
#include "engine/ir/op_table.hpp"
#include "engine/planner/plan.hpp"
#include "heuristics/schedule.hpp"
#include "kiln/error.hpp"
#include "kiln/graph.hpp"
#include "tests/golden_file.hpp"
#include "tests/pool_graphs.hpp"
#include "tests/test_paths.hpp"

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
  return g.constant_random(name, desc(t, std::move(s)), "uniform", 0.5, 1.5, 3);
}

const DType kDtypes[] = {DType::F32, DType::F16, DType::BF16};

// Collects kernels of many graphs and compiles them as few NVRTC programs (one prelude, every
// kernel body renamed to a unique entry), for both archs. Also compiles a few kernels alone to
// check that each source is self-contained.
class Batch {
 public:
  explicit Batch(ScheduleOverrides ov = {}) : ov_(ov) {}
  void add(const Graph& g, bool fusion = true) {
    PlanOptions po;
    po.fusion = fusion;
    Plan p = plan_fusion(g, po);
    for (int sm : {80, 90}) {
      CodegenOptions co;
      co.sm = sm;
      co.schedule = ov_;
      std::vector<KernelSpec> ks = generate_kernels(g, p, co);
      size_t two = 0;  // groups of two kernels: the split channel norm's statistics + apply
      for (const KernelSpec& k : ks) two += k.name.find("_split_stats") != std::string::npos;
      EXPECT_EQ(ks.size(), p.groups.size() + two);
      for (const KernelSpec& k : ks) add_kernel(g, k, sm);
    }
  }
  void compile() {
    const std::string& prelude = device_file("kiln_prelude.cuh");
    for (int sm : {80, 90}) {
      std::string& src = bodies_[sm];
      if (src.empty()) continue;
      std::string arch = fmt::format("sm_{}", sm);
      try {
        NvrtcResult r = nvrtc_compile(prelude + src, "codegen_batch", arch);
        EXPECT_FALSE(r.cubin.empty());
      } catch (const Error& e) {
        ADD_FAILURE() << arch << ": " << e.what();
      }
    }
  }
  int kernels() const { return count_; }

 private:
  void add_kernel(const Graph& g, const KernelSpec& k, int sm) {
    const std::string& prelude = device_file("kiln_prelude.cuh");
    ASSERT_EQ(k.source.compare(0, prelude.size(), prelude), 0) << k.name << ": no prelude";
    EXPECT_EQ(k.source.find("#include"), std::string::npos) << k.name;
    EXPECT_NE(k.source.find("extern \"C\" __global__"), std::string::npos) << k.name;
    EXPECT_FALSE(k.name.empty());
    EXPECT_GT(k.block[0], 0);
    std::string body = k.source.substr(prelude.size());
    std::string unique = fmt::format("{}_b{}", k.entry, count_++);
    size_t at = body.find(" " + k.entry + "(");
    ASSERT_NE(at, std::string::npos) << k.entry;
    body.replace(at + 1, k.entry.size(), unique);
    bodies_[sm] += body;
    // Every Int argument is symbolic; every tensor argument is a tensor of the graph.
    for (const KernelArg& a : k.args) {
      if (a.kind == KernelArg::Kind::Int) {
        EXPECT_FALSE(a.value.is_static()) << k.name;
      } else if (a.kind == KernelArg::Kind::Tensor || a.kind == KernelArg::Kind::TensorMap) {
        EXPECT_TRUE(a.tensor >= 0 && a.tensor < static_cast<int>(g.tensors().size()));
      }
    }
  }
  ScheduleOverrides ov_;
  std::map<int, std::string> bodies_;
  int count_ = 0;
};

// ---------------------------------------------------------------- pointwise ops
TEST(Codegen, EveryPointwiseOpCompiles) {
  Batch b;
  for (size_t k = 0; k < static_cast<size_t>(OpKind::Count); ++k) {
    const OpInfo& info = op_info(static_cast<OpKind>(k));
    if (info.category != OpCategory::Pointwise) continue;
    // The integer / bool ops (bool results, bool operands, where) compile in test_int_bool.cpp.
    if (info.kind >= OpKind::Mod && info.kind <= OpKind::Where) continue;
    // Index sources take no operand (range: tests/test_index_ops.cpp).
    if (info.index_source) continue;
    for (DType dt : kDtypes)
      for (Layout l : {Layout::NCHW, Layout::NHWC}) {
        Graph g(fmt::format("{}_{}", info.name, dtype_name(dt)));
        Tensor x = g.input("x", dt, {2, 3, 5, 7}, l);  // odd sizes: scalar tail path
        Attrs attrs;
        if (info.kind == OpKind::Cast)
          attrs["dtype"] = std::string(dt == DType::F32 ? "bf16" : "f32");
        Tensor y;
        if (info.max_inputs == 2) {
          Tensor per_channel = cst(g, "c", dt, {3, 1, 1});
          y = g.add_node1(info.name, {x, per_channel}, attrs);
          Tensor z = g.add_node1(info.name, {y, x}, attrs);  // same-shape operand
          g.output(z);
        } else {
          y = g.add_node1(info.name, {x}, attrs);
          g.output(y);
        }
        b.add(g);
      }
  }
  b.compile();
  EXPECT_GT(b.kernels(), 100);
}

TEST(Codegen, PointwiseSpecVectorizedWithSymbolicBatch) {
  Graph g("bias_gelu");
  Tensor x = g.input("x", DType::F16, {"N", 3072});
  Tensor y = g.add_node1("add", {x, cst(g, "b", DType::F16, {3072})}, {}, "bias");
  g.output(g.add_node1("gelu", {y}, {}, "gelu"));
  auto ks = generate_kernels(g, plan_fusion(g));
  ASSERT_EQ(ks.size(), 1u);
  const KernelSpec& k = ks[0];
  EXPECT_EQ(k.name, "pointwise_f16_add_gelu");
  // 16-byte vectors: plain coherent loads and stores for the dense x and the output, the
  // read-only path for the bias.
  const std::string body = k.source.substr(k.source.find("__global__"));
  EXPECT_NE(body.find("kiln_ldv_plain(t"), std::string::npos);
  EXPECT_NE(body.find("kiln_stv(t"), std::string::npos);
  EXPECT_EQ(body.find("_stream("), std::string::npos);
  EXPECT_NE(body.find("kiln_ldv(t"), std::string::npos);
  // f16 result: the fast gelu (relative error < 2e-5), all loads (x twice, the bias as vectors
  // too) before the math.
  EXPECT_NE(k.source.find("kiln_gelu_erf_fast("), std::string::npos);
  std::string vec_path = k.source.substr(k.source.find("__global__"));
  vec_path = vec_path.substr(0, vec_path.find("for (int u"));  // before the scalar tail
  EXPECT_EQ(vec_path.find("kiln_ld("), std::string::npos) << vec_path;
  size_t first_math = k.source.find("kiln_gelu_erf_fast(", k.source.find("__global__"));
  EXPECT_LT(k.source.rfind("kiln_ldv("), first_math);
  EXPECT_LT(k.source.rfind("kiln_ldv_plain("), first_math);
  // N*3072 elements is a runtime argument; grid covers 1 vector of 8 elements per thread.
  int ints = 0;
  for (const KernelArg& a : k.args) ints += a.kind == KernelArg::Kind::Int;
  EXPECT_EQ(ints, 1);
  Bindings bind{{"N", 5}};
  EXPECT_EQ(k.grid[0].eval(bind), (5 * 3072 + 8 * 256 - 1) / (8 * 256));
  EXPECT_EQ(k.block[0], 256);
  // x read, b read, out written (f16).
  EXPECT_EQ(k.bytes_moved.eval(bind), (5 * 3072 + 3072 + 5 * 3072) * 2);
  EXPECT_NO_THROW(nvrtc_compile(k.source, k.name, "sm_90"));
}

// Pointwise and row-norm kernels move their dense data with plain coherent 16-byte loads and
// stores (the only form: the streaming hints' knob is gone, and refused as an unknown key).
TEST(Codegen, PlainLoadsAndStores) {
  Graph g("plain");
  Tensor x = g.input("x", DType::BF16, {64, 4096});
  Tensor y = g.add_node1("add", {x, cst(g, "b", DType::BF16, {4096})}, {}, "bias");
  Tensor z = g.add_node1("gelu", {y}, {}, "gelu");
  g.output(g.add_node1("rmsnorm", {z, cst(g, "w", DType::BF16, {4096})}, {{"eps", 1e-6}}, "rms"));
  PlanOptions po;
  po.fusion = false;  // one pointwise and one row-norm kernel at least
  Plan plan = plan_fusion(g, po);
  CodegenOptions co;
  co.sm = 90;
  std::vector<KernelSpec> ks = generate_kernels(g, plan, co);
  ASSERT_GE(ks.size(), 2u);
  for (const KernelSpec& k : ks) {
    const std::string body = k.source.substr(k.source.find("__global__"));
    EXPECT_EQ(body.find("_stream("), std::string::npos) << k.name;
    EXPECT_NE(body.find("kiln_ldv_plain(t"), std::string::npos) << k.name;
    EXPECT_NE(body.find("kiln_stv(t"), std::string::npos) << k.name;
    EXPECT_NO_THROW(nvrtc_compile(k.source, k.name, "sm_90")) << k.name;
  }
  for (const char* gone : {"stream.hints=1", "stream.hints=2", "channelnorm.hints=2"})
    EXPECT_THROW(parse_schedule_overrides(gone), Error) << gone;
}

TEST(Codegen, PointwiseMixedLayoutsAndBatchnormChain) {
  Batch b;
  for (DType dt : kDtypes) {
    Graph g("bn_chain");
    Tensor x = g.input("x", dt, {"N", 24, 9, 11}, Layout::NHWC);
    Tensor bn = g.add_node1("batchnorm", {x, cst(g, "s", dt, {24}), cst(g, "bb", dt, {24}),
                                          cst(g, "m", dt, {24}), cst(g, "v", dt, {24})});
    Tensor r = g.add_node1("relu", {bn});
    Tensor c = g.add_node1("cast", {r}, {{"dtype", std::string("f32")}});
    Tensor s = g.add_node1("sigmoid", {x});  // horizontal sibling, second output
    g.output(c);
    g.output(s);
    b.add(g);
    // An NCHW input against an NHWC one: the second is indexed through its strides.
    Graph h("mixed");
    Tensor a = h.input("a", dt, {2, 5, 3, 3}, Layout::NCHW);
    Tensor bb = h.input("b", dt, {2, 5, 3, 3}, Layout::NHWC);
    h.output(h.add_node1("mul", {a, bb}));
    b.add(h);
    b.add(g, /*fusion=*/false);
  }
  b.compile();
}

// ---------------------------------------------------------------- row norms
TEST(Codegen, RowNormsEverySizeAndPattern) {
  Batch b;
  for (DType dt : kDtypes)
    for (Dim len : {Dim(1), Dim(7), Dim(64), Dim(1000), Dim(4096), Dim(4097), Dim(8192),
                    Dim(100000), Dim("L")}) {
      Graph g("ln");
      Tensor x = g.input("x", dt, {"N", len});
      Tensor r = g.input("r", dt, {"N", len});
      Tensor h = g.add_node1("add", {x, r}, {}, "add");
      Tensor y = g.layernorm(h, len.is_static() ? cst(g, "s", dt, {len}) : Tensor{},
                             len.is_static() ? cst(g, "bias", dt, {len}) : Tensor{});
      Tensor z = g.gelu(y, GeluApprox::Tanh);
      g.output(z);
      g.output(h);  // extra output from the prologue
      Tensor sm = g.softmax(g.add_node1("mul", {x, r}));
      g.output(sm);
      Tensor rms = g.rmsnorm(x);
      g.output(g.add_node1("add", {rms, r}));  // residual epilogue
      b.add(g);
    }
  b.compile();
}

TEST(Codegen, RowNormScheduleChoice) {
  RowSchedule w = choose_rownorm(1024, 2, true, 90);
  EXPECT_TRUE(w.warp_per_row && w.registers);
  EXPECT_EQ(w.vec, 8);
  EXPECT_EQ(w.vecs_per_thread, 4);
  EXPECT_EQ(w.row_threads, 32);
  EXPECT_TRUE(w.exact && w.equal_counts);  // 32 lanes x 4 vectors x 8 elements
  RowSchedule c = choose_rownorm(4096, 2, true, 90);
  EXPECT_FALSE(c.warp_per_row);
  EXPECT_EQ(c.threads * c.vecs_per_thread * c.vec, 4096);
  EXPECT_EQ(c.row_threads, c.threads);
  EXPECT_TRUE(c.exact && c.equal_counts);
  RowSchedule odd = choose_rownorm(4097, 2, true, 90);
  EXPECT_EQ(odd.vec, 1);
  EXPECT_GE(odd.threads * odd.vecs_per_thread, 4097);
  EXPECT_FALSE(odd.exact || odd.equal_counts);  // bounds checks, a counting Welford merge
  RowSchedule warp_odd = choose_rownorm(7, 4, true, 90);
  EXPECT_TRUE(warp_odd.warp_per_row);
  EXPECT_FALSE(warp_odd.exact);
  // Short rows share a warp, about 3-4 vectors per lane: Swin V2's 32-element f16 rows (4
  // vectors) take 4 lanes, 32 rows per CTA; Swin's 96 (12 vectors) 4 lanes x 3, 192 8 x 3,
  // 768 a warp x 3.
  for (auto [len, lanes, vecs] :
       {std::tuple{32, 4, 1}, {96, 4, 3}, {192, 8, 3}, {768, 32, 3}, {8, 1, 1}, {16, 2, 1}}) {
    RowSchedule s = choose_rownorm(len, 2, true, 90);
    EXPECT_EQ(s.row_threads, lanes) << len;
    EXPECT_EQ(s.vecs_per_thread, vecs) << len;
    EXPECT_EQ(s.rows_per_cta * s.row_threads, s.threads) << len;
    EXPECT_TRUE(s.exact && s.equal_counts) << len;
  }
  ScheduleOverrides whole;
  whole.rownorm_lanes = 32;
  EXPECT_EQ(choose_rownorm(96, 2, true, 90, whole).rows_per_cta, 4);
  RowSchedule sym = choose_rownorm(-1, 2, true, 90);
  EXPECT_FALSE(sym.registers);
  EXPECT_EQ(sym.row_threads, sym.threads);
  RowSchedule huge = choose_rownorm(1 << 20, 4, true, 90);
  EXPECT_FALSE(huge.registers);
  EXPECT_FALSE(huge.exact);
  EXPECT_EQ(huge.row_threads, 1024);
}

TEST(Codegen, ScheduleOverridesParseAndClamp) {
  ScheduleOverrides o = parse_schedule_overrides(
      " pointwise.vecs=8,pointwise.threads=512, rownorm.threads=1024,channelnorm.cb=40,");
  EXPECT_EQ(o.pointwise_vecs, 8);
  EXPECT_EQ(o.pointwise_threads, 512);
  EXPECT_EQ(o.rownorm_threads, 1024);
  EXPECT_EQ(o.channelnorm_cb, 40);
  EXPECT_FALSE(o.empty());
  ScheduleOverrides cn = parse_schedule_overrides(
      "channelnorm.algo=cluster,channelnorm.vecs=8,channelnorm.threads=160");
  EXPECT_EQ(cn.channelnorm_algo, kChannelNormCluster);
  EXPECT_EQ(cn.channelnorm_vecs, 8);
  EXPECT_EQ(cn.channelnorm_threads, 160);
  EXPECT_EQ(parse_schedule_overrides("channelnorm.algo=split").channelnorm_algo, kChannelNormSplit);
  EXPECT_EQ(parse_schedule_overrides("channelnorm.algo=pergroup").channelnorm_algo,
            kChannelNormPerGroup);
  EXPECT_TRUE(parse_schedule_overrides("channelnorm.algo=0").empty());
  EXPECT_TRUE(parse_schedule_overrides("").empty());
  for (const char* bad :
       {"pointwise.vecs", "pointwise.vecs=0", "pointwise.vecs=9", "pointwise.threads=100",
        "rownorm.threads=96", "channelnorm.cluster=3", "channelnorm.slice_kb=x",
        "pointwise.vecs=-1", "nope=1", "channelnorm.algo=fast", "channelnorm.algo=4",
        "channelnorm.vecs=17", "channelnorm.threads=16"})
    EXPECT_THROW(parse_schedule_overrides(bad), Error) << bad;
  PointwiseSchedule p = choose_pointwise(2, 90, o);
  EXPECT_EQ(p.vecs, 8);
  EXPECT_EQ(p.threads, 512);
  // A 4096-element bf16 row has 512 vectors: 1024 threads would leave half idle.
  RowSchedule r = choose_rownorm(4096, 2, true, 90, o);
  EXPECT_EQ(r.threads, 512);
  EXPECT_EQ(r.threads * r.vecs_per_thread * r.vec, 4096);
  // A 32768-element f32 row needs 8192 vectors: 64 threads would hold 512 elements each.
  ScheduleOverrides small = parse_schedule_overrides("rownorm.threads=64");
  RowSchedule big = choose_rownorm(32768, 4, true, 90, small);
  EXPECT_LE(big.vecs_per_thread * big.vec, 64);
}

// Every override setting of the measured cases generates a different kernel that NVRTC compiles.
TEST(Codegen, ScheduleOverrideVariantsCompile) {
  auto graphs = [] {
    std::vector<std::unique_ptr<Graph>> gs;
    gs.push_back(std::make_unique<Graph>("bias_gelu"));
    {
      Graph& g = *gs.back();
      Tensor x = g.input("x", DType::BF16, {"R", 4096});
      g.output(g.add_node1("gelu", {g.add_node1("add", {x, cst(g, "b", DType::BF16, {4096})})}));
    }
    gs.push_back(std::make_unique<Graph>("rmsnorm"));
    {
      Graph& g = *gs.back();
      g.output(g.rmsnorm(g.input("x", DType::BF16, {"R", 4096})));
    }
    gs.push_back(std::make_unique<Graph>("softmax"));
    {
      Graph& g = *gs.back();
      g.output(g.softmax(g.input("x", DType::F16, {"R", 8192})));
    }
    gs.push_back(std::make_unique<Graph>("gn"));
    {
      Graph& g = *gs.back();
      Tensor x = g.input("x", DType::F16, {"N", 320, 64, 64}, Layout::NHWC);
      Tensor n = g.add_node1("groupnorm",
                             {x, cst(g, "g", DType::F16, {320}), cst(g, "b", DType::F16, {320})},
                             {{"groups", int64_t{32}}, {"eps", 1e-5}});
      g.output(g.add_node1("silu", {n}));
    }
    return gs;
  };
  auto sources = [&](const ScheduleOverrides& ov) {
    std::vector<std::string> out;
    for (auto& g : graphs()) {
      CodegenOptions co;
      co.sm = 90;
      co.schedule = ov;
      for (const KernelSpec& k : generate_kernels(*g, plan_fusion(*g, {}), co))
        out.push_back(k.source);
    }
    return out;
  };
  // Each setting against the rules (sm_90: the cluster channel norm), and the split one against
  // channelnorm.algo=split alone (two kernels).
  for (auto [base_spec, spec] : std::vector<std::pair<const char*, const char*>>{
           {"channelnorm.algo=split",
            "pointwise.vecs=8,pointwise.threads=128,rownorm.threads=128,channelnorm.algo=split,"
            "channelnorm.vecs=4"},
           {"",
            "pointwise.vecs=1,pointwise.threads=512,rownorm.threads=1024,channelnorm.algo=cluster,"
            "channelnorm.cluster=4,channelnorm.slice_kb=160"},
           {"",
            "pointwise.vecs=2,pointwise.threads=128,rownorm.threads=64,channelnorm.algo=cluster,"
            "channelnorm.cb=40"}}) {
    const std::vector<std::string> base = sources(parse_schedule_overrides(base_spec));
    ScheduleOverrides ov = parse_schedule_overrides(spec);
    std::vector<std::string> v = sources(ov);
    ASSERT_EQ(v.size(), base.size());
    for (size_t i = 0; i < v.size(); ++i) EXPECT_NE(v[i], base[i]) << spec << " kernel " << i;
    Batch b(ov);
    for (auto& g : graphs()) b.add(*g);
    b.compile();
  }
}

TEST(Codegen, RowNormKernelShape) {
  Graph g("ln");
  Tensor x = g.input("x", DType::BF16, {"N", 4096});
  Tensor r = g.input("r", DType::BF16, {"N", 4096});
  Tensor y = g.layernorm(g.add_node1("add", {x, r}), cst(g, "s", DType::BF16, {4096}),
                         cst(g, "b", DType::BF16, {4096}));
  g.output(g.gelu(y, GeluApprox::None));
  auto ks = generate_kernels(g, plan_fusion(g));
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].name, "rownorm_bf16_r4096_add_layernorm_gelu");
  EXPECT_EQ(ks[0].grid[0].eval({{"N", 77}}), 77);  // one CTA per row
  // 256 threads per row (two vectors, 16 elements per thread); one block reduction (Welford
  // triples, one barrier); row data by plain 16-byte loads and stores, scale and bias read as
  // 16-byte vectors; the bf16 result takes the fast gelu.
  EXPECT_EQ(ks[0].block[0], 256);
  EXPECT_NE(ks[0].source.find("kiln_block_welford_equal<256>(st.mean, st.m2, 16.0f, kiln_red)"),
            std::string::npos);
  const std::string body = ks[0].source.substr(ks[0].source.find("extern \"C\""));
  EXPECT_EQ(body.find("kiln_block_sum"), std::string::npos);
  EXPECT_EQ(body.find("__syncthreads"), std::string::npos);  // the only barrier is the reduction's
  EXPECT_NE(body.find("kiln_ldv_plain(t"), std::string::npos);
  EXPECT_NE(body.find("kiln_stv(t"), std::string::npos);
  EXPECT_NE(ks[0].source.find(" + q * 8, pr1);"), std::string::npos);
  EXPECT_NE(ks[0].source.find(" + q * 8, pr2);"), std::string::npos);
  EXPECT_NE(ks[0].source.find("kiln_gelu_erf_fast("), std::string::npos);
  // Short rows: 4 lanes per row (7 scalars: 2 each), 32 rows per CTA, reduced by 4-lane
  // shuffles.
  Graph h("short");
  Tensor a = h.input("a", DType::F32, {"N", 7});
  h.output(h.softmax(a));
  auto ks2 = generate_kernels(h, plan_fusion(h));
  EXPECT_EQ(ks2[0].grid[0].eval({{"N", 9}}), 1);
  EXPECT_EQ(ks2[0].grid[0].eval({{"N", 33}}), 2);
  EXPECT_NE(ks2[0].source.find("kiln_warp_maxsum<4>("), std::string::npos);
  EXPECT_NE(ks2[0].source.find("threadIdx.x >> 2"), std::string::npos);
  EXPECT_NO_THROW(nvrtc_compile(ks2[0].source, ks2[0].name, "sm_90"));
  // Short rows covered exactly (256 f32 = 16 lanes x 4 vectors): equal-count merges within
  // each half warp.
  Graph e("exact");
  Tensor c = e.input("c", DType::F32, {"N", 256});
  e.output(e.layernorm(c));
  auto ks4 = generate_kernels(e, plan_fusion(e));
  EXPECT_NE(ks4[0].source.find("kiln_block_welford_equal<16>(st.mean, st.m2, 16.0f, nullptr)"),
            std::string::npos);
  EXPECT_NO_THROW(nvrtc_compile(ks4[0].source, ks4[0].name, "sm_90"));
  // Long softmax rows: one (max, sum) block reduction, exponentiated once per element.
  Graph s("long");
  Tensor b = s.input("b", DType::F16, {"N", 8192});
  s.output(s.softmax(b));
  auto ks3 = generate_kernels(s, plan_fusion(s));
  EXPECT_EQ(ks3[0].block[0], 512);
  EXPECT_NE(ks3[0].source.find("kiln_block_maxsum_once<512>(ms, kiln_red + 0)"), std::string::npos);
  EXPECT_EQ(ks3[0].source.find("kiln_block_max_once", ks3[0].source.find("extern \"C\"")),
            std::string::npos);
  EXPECT_NO_THROW(nvrtc_compile(ks3[0].source, ks3[0].name, "sm_90"));
}

TEST(Codegen, SoftmaxOverOtherAxesAndLayouts) {
  Batch b;
  for (DType dt : kDtypes)
    for (int64_t axis : {0, 1, 2, 3, -1}) {
      Graph g("sm");
      Tensor x = g.input("x", dt, {3, 5, 7, 9}, Layout::NHWC);
      g.output(g.softmax(g.exp(x), axis));
      b.add(g);
      Graph h("ln_nhwc");
      Tensor y = h.input("y", dt, {2, 6, 5, 3}, Layout::NHWC);
      h.output(h.layernorm(y, {}, {}, axis == 0 ? 1 : axis));
      b.add(h);
    }
  b.compile();
}

// ---------------------------------------------------------------- channel norms
TEST(Codegen, ChannelNorms) {
  Batch b;
  for (DType dt : kDtypes)
    for (Layout l : {Layout::NCHW, Layout::NHWC}) {
      Graph g("gn");
      Tensor x = g.input("x", dt, {"N", 320, 64, 64}, l);
      Tensor y = g.groupnorm(x, 32, cst(g, "s", dt, {320}), cst(g, "b", dt, {320}));
      g.output(g.silu(y));
      b.add(g);
      Graph h("in");
      Tensor a = h.input("a", dt, {3, 7, 5, 3}, l);
      Tensor p = h.add_node1("add", {a, cst(h, "c", dt, {7, 1, 1})});
      h.output(p);
      h.output(h.add_node1("relu", {h.instancenorm(p)}));
      b.add(h);
      Graph k("gn1");
      Tensor c = k.input("c", dt, {2, 6, 1, 1}, l);
      k.output(k.groupnorm(c, 3));
      b.add(k);
    }
  b.compile();
}

// ---------------------------------------------------------------- reductions and windows
TEST(Codegen, ReductionsAnyAxes) {
  Batch b;
  const std::vector<std::vector<int64_t>> axes_list = {{},     {0},       {1},   {3},
                                                       {2, 3}, {1, 2, 3}, {0, 2}};
  for (DType dt : kDtypes)
    for (Layout l : {Layout::NCHW, Layout::NHWC})
      for (const char* op : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min"})
        for (const auto& axes : axes_list)
          for (bool keep : {false, true}) {
            // Every combination in f32; the 16-bit types share the code paths, sample them.
            if (dt != DType::F32 && (keep || std::string(op) == "reduce_min")) continue;
            Graph g("red");
            Tensor x = g.input("x", dt, {"N", 5, 7, 4097}, l);
            Tensor sq = g.add_node1("mul", {x, x});
            Tensor r = g.reduce(op, sq, axes, keep);
            g.output(g.sqrt(r));
            b.add(g);
          }
  b.compile();
  EXPECT_GT(b.kernels(), 150);
}

TEST(Codegen, ReductionScheduleFollowsMemoryOrder) {
  Graph g("red");
  Tensor x = g.input("x", DType::F16, {8, 64, 32, 32}, Layout::NHWC);
  g.output(g.reduce("reduce_mean", x, {2, 3}, true));  // channel innermost kept
  auto ks = generate_kernels(g, plan_fusion(g));
  size_t body = device_file("kiln_prelude.cuh").size();
  EXPECT_EQ(ks[0].source.find("kiln_warp_sum", body), std::string::npos) << ks[0].source;
  Graph h("red2");
  Tensor y = h.input("y", DType::F16, {8, 64, 32, 32});
  h.output(h.reduce("reduce_mean", y, {2, 3}, true));  // NCHW: reduced dims innermost
  auto ks2 = generate_kernels(h, plan_fusion(h));
  EXPECT_NE(ks2[0].source.find("kiln_warp_sum", body), std::string::npos);
}

// Outer reductions with few outputs over long ranges split the range over CTAs (the squeeze-excite
// pool of a 112x112 NHWC map: 32 x 32 outputs of 12544 elements), with a workspace and counters;
// many outputs keep a thread each; a symbolic range keeps one CTA per tile.
TEST(Codegen, OuterReductionsSplitOverCtas) {
  auto kernels_of = [](const Shape& shape, std::vector<int64_t> axes,
                       Layout layout = Layout::NHWC) {
    Graph g("red");
    Tensor x = g.input("x", DType::F16, shape, layout);
    g.output(g.reduce("reduce_mean", x, axes, true));
    return generate_kernels(g, plan_fusion(g));
  };
  auto count = [](const KernelSpec& k, KernelArg::Kind kind) {
    int n = 0;
    for (const KernelArg& a : k.args) n += a.kind == kind;
    return n;
  };
  auto se = kernels_of({32, 32, 112, 112}, {2, 3});
  ASSERT_EQ(se.size(), 1u);
  EXPECT_NE(se[0].name.find("_r12544_cols32x8_s32"), std::string::npos) << se[0].name;
  EXPECT_EQ(count(se[0], KernelArg::Kind::Scratch), 1);
  EXPECT_EQ(count(se[0], KernelArg::Kind::Counters), 1);
  EXPECT_EQ(se[0].grid[0].value(), 32 * 32);           // 32 tiles of 32 outputs, 32 splits each
  auto wide = kernels_of({64, 1280, 16, 16}, {2, 3});  // 81920 outputs: a thread each
  EXPECT_EQ(wide[0].name.find("_cols"), std::string::npos) << wide[0].name;
  // A symbolic range (the reduced leading dim S of [S, 7, 36]): one CTA per tile.
  auto sym = kernels_of({Dim("S"), Dim(7), Dim(36)}, {0}, Layout::NCHW);
  EXPECT_NE(sym[0].name.find("_rdyn_cols32x8_s1"), std::string::npos) << sym[0].name;
  EXPECT_EQ(count(sym[0], KernelArg::Kind::Counters), 0);
  Batch b;  // NVRTC compiles each form
  for (const Shape& sh : {Shape{32, 32, 112, 112}, Shape{Dim("N"), Dim(40), Dim(48), Dim(56)},
                          Shape{Dim("N"), Dim(64), Dim(9), Dim(32)}}) {
    Graph g("red");
    Tensor x = g.input("x", DType::F16, sh, Layout::NHWC);
    Tensor r = g.relu(x);
    g.output(r);
    g.output(g.sigmoid(g.global_avgpool(r)));
    g.output(g.reduce("reduce_max", x, {1, 2}, false));
    b.add(g);
  }
  b.compile();
}

TEST(Codegen, WindowsAndGlobalPool) {
  Batch b;
  for (DType dt : kDtypes)
    for (Layout l : {Layout::NCHW, Layout::NHWC}) {
      Graph g("pool");
      Tensor x = g.input("x", dt, {"N", 5, 13, 11}, l);
      Tensor r = g.relu(x);
      Pool2dOptions o;
      o.kernel = {3, 3};
      o.stride = {2, 2};
      o.padding = {1, 1};
      g.output(g.add_node1("neg", {g.maxpool2d(r, o)}));
      test::add_avgpools(g, x);
      g.output(g.sigmoid(g.global_avgpool(g.exp(x))));
      b.add(g);
    }
  b.compile();
}

// Dense NHWC 16-bit pools with C % 8 == 0 and nothing fused take 8 channels per thread (16-byte
// loads and stores; the rule, and KILN_SCHEDULE window.vec=1); others, and window.vec=2, keep one.
TEST(Codegen, VectorWindows) {
  ScheduleOverrides vec = parse_schedule_overrides("window.vec=1");
  ScheduleOverrides off = parse_schedule_overrides("window.vec=2");
  Batch b;
  for (DType dt : {DType::F16, DType::BF16}) {
    Graph g("pool8");
    Tensor x = g.input("x", dt, {"N", 24, 13, 11}, Layout::NHWC);
    Pool2dOptions o;
    o.kernel = {3, 3};
    o.stride = {2, 2};
    o.padding = {1, 1};
    g.output(g.maxpool2d(x, o));
    test::add_avgpools(g, x);
    CodegenOptions co;
    co.schedule = vec;
    std::vector<KernelSpec> ks = generate_kernels(g, plan_fusion(g), co);
    ASSERT_EQ(ks.size(), 3u);
    for (const KernelSpec& k : ks) {
      EXPECT_NE(k.name.find("_v8"), std::string::npos) << k.name;
      EXPECT_NE(k.source.find("kiln_ldv("), std::string::npos) << k.name;
      EXPECT_NE(k.source.find("kiln_stv("), std::string::npos) << k.name;
    }
    // 3 x 24 x 7 x 6 outputs, 8 channels per thread, 256 threads per CTA.
    EXPECT_EQ(ks[0].grid[0].eval({{"N", 3}}), (3 * 24 * 7 * 6 / 8 + 255) / 256);
    for (const KernelSpec& k : generate_kernels(g, plan_fusion(g)))
      EXPECT_NE(k.name.find("_v8"), std::string::npos) << "the rule: " << k.name;
    co.schedule = off;
    for (const KernelSpec& k : generate_kernels(g, plan_fusion(g), co))
      EXPECT_EQ(k.name.find("_v8"), std::string::npos) << "window.vec=2: " << k.name;
    b.add(g);
  }
  // Not taken: C % 8 != 0, f32, NCHW, or a fused prologue.
  for (int variant = 0; variant < 4; ++variant) {
    Graph g("pool_scalar");
    DType dt = variant == 1 ? DType::F32 : DType::F16;
    Tensor x = g.input("x", dt, {"N", variant == 0 ? 12 : 16, 9, 9},
                       variant == 2 ? Layout::NCHW : Layout::NHWC);
    Pool2dOptions o;
    o.kernel = {3, 3};
    g.output(g.maxpool2d(variant == 3 ? g.relu(x) : x, o));
    CodegenOptions co;
    co.schedule = vec;
    for (const KernelSpec& k : generate_kernels(g, plan_fusion(g), co))
      EXPECT_EQ(k.name.find("_v8"), std::string::npos) << variant << " " << k.name;
  }
  b.compile();
}

TEST(Codegen, CopiesTransposeReshape) {
  Batch b;
  for (DType dt : kDtypes) {
    Graph g("mv");
    Tensor x = g.input("x", dt, {"N", 6, 5, 7}, Layout::NHWC);
    g.output(g.transpose(x, {0, 2, 3, 1}));
    g.output(g.reshape(x, {Dim("N"), Dim(-1)}));
    Tensor y = g.input("y", dt, {3, 4, 5});
    g.output(g.relu(g.transpose(g.exp(y), {2, 0, 1})));
    b.add(g);
  }
  b.compile();
}

// Pad (and the other copies) with and without a fused prologue, on the 16-byte vector path
// (the output's innermost memory dim a multiple of the vector width) and the scalar one.
TEST(Codegen, CopiesPadAndPrologues) {
  Batch b;
  for (DType dt : kDtypes) {
    Graph g("pad");
    Tensor x = g.input("x", dt, {"N", 3, 5, 7}, Layout::NHWC);
    g.output(g.pad(x, {0, 0, 0, 0, 0, 5, 0, 0}));        // channels 3 -> 8: vectors
    g.output(g.pad(x, {1, 2, 0, 3, 0, 11, 1, 2}, 0.5));  // every dim: vectors of 16
    Tensor y = g.input("y", dt, {"N", 3, 5, 7});         // NCHW, W 7 -> 10: scalar
    g.output(g.pad(y, {0, 0, 1, 2, 0, 0, 3, 1}, -INFINITY));
    Tensor f = g.input("f", DType::F32, {"N", 3, 5, 7}, Layout::NHWC);
    Tensor h = g.add_node1("cast", {f}, {{"dtype", std::string(dtype_name(dt))}});
    g.output(g.pad(g.relu(h), {0, 0, 0, 0, 0, 5, 0, 0}));  // prologue, vectors
    g.output(g.pad(g.exp(y), {0, 0, 1, 2, 0, 0, 3, 1}));   // prologue, scalar
    Tensor t = g.input("t", dt, {"N", 6, 5, 8});
    g.output(g.transpose(g.neg(t), {0, 2, 1, 3}));  // transpose, vectors
    g.output(g.reshape(g.sigmoid(g.input("r", dt, {"N", 6, 5, 8}, Layout::NHWC)), {"N", -1}));
    b.add(g);
    b.add(g, /*fusion=*/false);
  }
  b.compile();
  EXPECT_GT(b.kernels(), 40);
}

// The stem's pad: one thread per NHWC pixel loads its 3 channels and stores 8 as one 16-byte
// vector; the 5 zero lanes are constants.
TEST(Codegen, PadKernelForTheStem) {
  Graph g("stem_pad");
  Tensor x = g.input("x", DType::F16, {"N", 3, 224, 224}, Layout::NHWC);
  g.output(g.add_node1("pad", {x}, {{"pads", std::vector<int64_t>{0, 0, 0, 0, 0, 5, 0, 0}}},
                       "conv1_pad_c8"));
  auto ks = generate_kernels(g, plan_fusion(g));
  ASSERT_EQ(ks.size(), 1u);
  const KernelSpec& k = ks[0];
  EXPECT_EQ(k.name, "copy_f16_pad");
  const std::string body = k.source.substr(k.source.find("extern \"C\""));
  EXPECT_NE(body.find("kiln_stv(t"), std::string::npos) << body;
  size_t loads = 0;
  for (size_t at = 0; (at = body.find("kiln_ld(", at)) != std::string::npos; ++at) ++loads;
  EXPECT_EQ(loads, 3u) << body;
  EXPECT_EQ(body.find("if ("), body.find("if (i >= ")) << body;  // no per-lane branches
  Bindings bind{{"N", 3}};
  EXPECT_EQ(k.grid[0].eval(bind), (3 * 224 * 224 + 255) / 256);
  EXPECT_EQ(k.block[0], 256);
  EXPECT_EQ(k.bytes_moved.eval(bind), 3 * 224 * 224 * (3 + 8) * 2);
  EXPECT_EQ(k.flops.eval(bind), 0);
  EXPECT_NO_THROW(nvrtc_compile(k.source, k.name, "sm_80"));
}

TEST(Codegen, MultiOutputAndRepeatedPatternsGetUniqueNames) {
  Graph g("rep");
  Tensor x = g.input("x", DType::F32, {4, 16});
  Tensor a = g.softmax(x);
  Tensor b2 = g.softmax(g.reduce("reduce_sum", x, {0}, true));
  Tensor c = g.softmax(g.add_node1("add", {a, b2}));
  g.output(c);
  auto ks = generate_kernels(g, plan_fusion(g));
  std::set<std::string> names;
  for (const KernelSpec& k : ks) {
    EXPECT_TRUE(names.insert(k.name).second) << k.name;
    EXPECT_NE(k.source.find(" " + k.entry + "("), std::string::npos);
    EXPECT_NO_THROW(nvrtc_compile(k.source, k.name, "sm_90")) << k.name;
  }
}

// ---------------------------------------------------------------- golden source
TEST(Codegen, GoldenSource) {
  Graph g("golden");
  Tensor x = g.input("x", DType::F16, {"N", 64, 7, 7}, Layout::NHWC);
  Tensor b = cst(g, "bias", DType::F16, {64, 1, 1});
  Tensor y = g.add_node1("add", {x, b}, {}, "bias");
  g.output(g.add_node1("gelu", {y}, {}, "gelu"));
  Tensor z = g.input("z", DType::BF16, {"N", 96});
  g.output(g.add_node1("gelu", {g.layernorm(g.add_node1("add", {z, z}, {}, "twice"))}, {}, "g2"));
  auto ks = generate_kernels(g, plan_fusion(g));
  const std::string& prelude = device_file("kiln_prelude.cuh");
  std::string text;
  for (const KernelSpec& k : ks) {
    text += fmt::format("// ---- {} grid=({}) block={} args={}\n", k.name, k.grid[0].str(),
                        k.block[0], k.args.size());
    text += k.source.substr(prelude.size());
  }
  test::expect_golden("codegen_bias_gelu_layernorm.cu", text);
  for (const KernelSpec& k : ks) EXPECT_NO_THROW(nvrtc_compile(k.source, k.name, "sm_80"));
}

}  // namespace
}  // namespace kiln
