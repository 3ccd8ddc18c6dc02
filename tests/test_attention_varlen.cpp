// attention_varlen (ragged batches): shape inference and its located errors, the graph-file
// form, the CPU reference against an independent per-sequence computation of the plain attention
// chain (causal bottom-right aligned, windows, GQA, empty sequences, differing key lengths), bad
// offsets as located errors, the planner's own group, the layout rule, the kernel's name, error
// word and grid, a golden source, and NVRTC compiles for sm_80 and sm_90a.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>

#include "codegen/kernel_spec.hpp"
#include "codegen/nvrtc.hpp"
#include "engine/ir/op_table.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/plan.hpp"
#include "heuristics/attention_varlen_layout.hpp"
#include "kiln/error.hpp"
#include "kiln/graph.hpp"
#include "kiln/io.hpp"
#include "kiln/kiln.h"
#include "kiln/reference.hpp"
#include "tests/attention_varlen_graphs.hpp"
#include "tests/golden_file.hpp"
#include "tests/user_error.hpp"

namespace kiln {
namespace {

using test::user_error;
using test::VarlenCase;

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// ---------------------------------------------------------------- shapes
TEST(AttentionVarlen, ShapeInference) {
  Graph g("shapes");
  Tensor q = g.input("q", DType::F16, {"T", 8, 64});
  Tensor k = g.input("k", DType::F16, {"Tk", 2, 64});
  Tensor v = g.input("v", DType::F16, {"Tk", 2, 32});
  Tensor cq = g.input("cq", DType::I32, {"Bp1"});
  Tensor ck = g.input("ck", DType::I32, {"Bp1"});
  Tensor o = g.attention_varlen(q, k, v, cq, ck, {.causal = true});
  EXPECT_EQ(shape_str(g.desc(o).shape), "[T, 8, 32]");
  EXPECT_EQ(g.desc(o).dtype, DType::F16);
  const Node& n = g.nodes().back();
  EXPECT_EQ(n.attr_float("scale"), 0.0);
  EXPECT_EQ(n.attr_int("causal"), 1);
  EXPECT_EQ(n.attr_int("window_left"), -1);
  EXPECT_EQ(op_info(OpKind::AttentionVarlen).category, OpCategory::Attention);
}

TEST(AttentionVarlen, ShapeErrorsAreLocated) {
  Graph g("bad");
  Tensor q = g.input("q", DType::F16, {"T", 8, 64});
  Tensor k = g.input("k", DType::F16, {"Tk", 2, 64});
  Tensor v = g.input("v", DType::F16, {"Tk", 2, 64});
  Tensor cq = g.input("cq", DType::I32, {"Bp1"});
  Tensor ck = g.input("ck", DType::I32, {"Bp1"});
  auto err = [&](std::vector<Tensor> in, Attrs at = {}) {
    return user_error([&] { g.add_node("attention_varlen", in, at, "att"); });
  };
  Tensor q2 = g.input("q2", DType::F16, {"T", 64});
  EXPECT_TRUE(has(err({q2, k, v, cq, ck}),
                  "node 'att' (attention_varlen).inputs[0]: "
                  "attention_varlen's q 'q2' must be [tokens, heads, "
                  "head_dim] (rank 3), found [T, 64]"));
  Tensor k3 = g.input("k3", DType::F16, {"Tk", 3, 64});
  Tensor v3 = g.input("v3", DType::F16, {"Tk", 3, 64});
  EXPECT_TRUE(has(err({q, k3, v3, cq, ck}), "q's 8 heads are not a multiple of k's 3"));
  Tensor kd = g.input("kd", DType::F16, {"Tk", 2, 32});
  EXPECT_TRUE(has(err({q, kd, v, cq, ck}), ".inputs[1]: the head_dim of k 'kd'"));
  Tensor vt = g.input("vt", DType::F16, {"Tv", 2, 64});
  EXPECT_TRUE(has(err({q, k, vt, cq, ck}), ".inputs[2]: v 'vt' [Tv, 2, 64] must have the tokens"));
  Tensor kf = g.input("kf", DType::F32, {"Tk", 2, 64});
  EXPECT_TRUE(has(err({q, kf, v, cq, ck}), ".inputs[1]: attention_varlen's k 'kf' is f32 but q"));
  Tensor qi = g.input("qi", DType::I32, {"T", 8, 64});
  EXPECT_TRUE(has(err({qi, k, v, cq, ck}), ".inputs[0]: attention_varlen's q must be floating"));
  Tensor c64 = g.input("c64", DType::I64, {"Bp1"});
  EXPECT_TRUE(has(err({q, k, v, c64, ck}),
                  ".inputs[3]: attention_varlen's cu_seqlens_q must be "
                  "i32 offsets, got i64 'c64'"));
  Tensor c2 = g.input("c2", DType::I32, {"B", 1});
  EXPECT_TRUE(has(err({q, k, v, cq, c2}), ".inputs[4]: attention_varlen's cu_seqlens_k 'c2'"));
  Tensor c5 = g.input("c5", DType::I32, {5});
  EXPECT_TRUE(has(err({q, k, v, cq, c5}), "cu_seqlens_k 'c5' [5] must have as many offsets"));
  Tensor qh = g.input("qh", DType::F16, {"T", "H", 64});
  EXPECT_TRUE(has(err({qh, k, v, cq, ck}), "heads and head_dim must be static"));
  EXPECT_TRUE(has(err({q, k, v, cq, ck}, {{"window_left", int64_t{-2}}}),
                  "node 'att' (attention_varlen).window_left: -1 (none) or a key count >= 0"));
  EXPECT_TRUE(has(err({q, k, v, cq, ck}, {{"causal", int64_t{2}}}), ".causal: 0 or 1, got 2"));
  EXPECT_TRUE(has(err({q, k, v, cq}), "op attention_varlen takes 5 inputs, found 4"));
}

TEST(AttentionVarlen, GraphFileRoundTrip) {
  VarlenCase c;
  c.opt = {.scale = 0.5, .causal = true, .window_left = 7, .window_right = -1};
  Graph g = test::varlen_graph(c);
  const std::string s = save_graph_string(g);
  EXPECT_TRUE(has(s, "\"op\": \"attention_varlen\"")) << s;
  EXPECT_TRUE(has(s, "\"window_left\": 7")) << s;
  Graph g2 = load_graph_string(s, "varlen.json");
  EXPECT_EQ(save_graph_string(g2), s);
  EXPECT_EQ(g2.nodes().back().attr_float("scale"), 0.5);
}

// ---------------------------------------------------------------- reference
void expect_reference_matches(const VarlenCase& c, uint64_t seed) {
  SCOPED_TRACE(c.name);
  Graph g = test::varlen_graph(c);
  const auto in = test::varlen_inputs(c, seed);
  const std::vector<double> got = run_reference(g, in).begin()->second.to_f64();
  const std::vector<double> want = test::padded_attention(c, in);
  ASSERT_EQ(got.size(), want.size());
  int nonzero = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    // The output is rounded to f16 / bf16 once; the per-sequence graph rounds to f32 per op.
    const double tol = (c.dt == DType::F32   ? 1e-5
                        : c.dt == DType::F16 ? 1e-3
                                             : 8e-3) *
                       (1.0 + std::abs(want[i]));
    EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
    nonzero += want[i] != 0.0;
  }
  EXPECT_GT(nonzero, static_cast<int>(got.size() / 2));  // the comparison is not vacuous
}

TEST(AttentionVarlen, ReferenceMatchesPerSequenceAttention) {
  uint64_t seed = 10;
  VarlenCase c;
  c.name = "plain";
  c.lq = {1, 17, 64, 30, 0};
  expect_reference_matches(c, seed++);
  c.name = "causal_bottom_right";  // keys longer and shorter than queries
  c.lk = {5, 9, 64, 40, 3};
  c.opt.causal = true;
  expect_reference_matches(c, seed++);
  c.name = "window_gqa";
  c.hq = 6;
  c.hkv = 2;
  c.dt = DType::BF16;
  c.opt = {.scale = 0.3, .causal = false, .window_left = 4, .window_right = 2};
  expect_reference_matches(c, seed++);
  c.name = "causal_window_dv_f32";
  c.dt = DType::F32;
  c.dv = 24;
  c.d = 40;
  c.opt = {.scale = 0.0, .causal = true, .window_left = 3, .window_right = 5};
  expect_reference_matches(c, seed++);
}

// A query row with no visible key (causal with fewer keys than queries, bottom-right aligned;
// a sequence with no keys) is 0; a sequence with no queries has no rows.
TEST(AttentionVarlen, RowsWithoutKeysAreZero) {
  VarlenCase c;
  c.dt = DType::F32;
  c.hq = c.hkv = 1;
  c.d = 8;
  c.lq = {4, 2, 0};
  c.lk = {2, 0, 3};
  c.opt.causal = true;
  Graph g = test::varlen_graph(c);
  const auto in = test::varlen_inputs(c, 3);
  const std::vector<double> o = run_reference(g, in).begin()->second.to_f64();
  ASSERT_EQ(o.size(), 6u * 8u);
  for (int64_t r = 0; r < 6; ++r) {
    double mag = 0.0;
    for (int64_t x = 0; x < 8; ++x) mag += std::abs(o[r * 8 + x]);
    // Sequence 0: queries 0 and 1 sit before key 0 (the diagonal starts at key -2); 2 and 3
    // see keys. Sequence 1 has no keys.
    if (r == 0 || r == 1 || r >= 4)
      EXPECT_EQ(mag, 0.0) << "row " << r;
    else
      EXPECT_GT(mag, 0.0) << "row " << r;
  }
}

TEST(AttentionVarlen, BadOffsetsAreLocatedErrors) {
  VarlenCase c;
  c.dt = DType::F32;
  c.lq = {3, 2};
  Graph g = test::varlen_graph(c);
  auto in = test::varlen_inputs(c, 5);
  auto run_with = [&](const char* which, std::vector<int64_t> cu) {
    auto bad = in;
    bad[which] = HostTensor::from_i64(DType::I32, {3}, cu);
    return user_error([&] { run_reference(g, bad); });
  };
  EXPECT_TRUE(has(run_with("cu_q", {0, 4, 3}),
                  "(attention_varlen): cu_seqlens_q[2] = 3 is below cu_seqlens_q[1] = 4"));
  EXPECT_TRUE(has(run_with("cu_k", {0, 3, 4}), "cu_seqlens_k[2] = 4 must be the token count of k"));
  EXPECT_TRUE(has(run_with("cu_q", {-1, 3, 5}), "cu_seqlens_q[0] is -1: the offsets must start"));
}

// The C ABI reaches the op through a graph file: i32 offsets are host tensors like any other.
TEST(AttentionVarlen, CApiRunHost) {
  VarlenCase c;
  c.dt = DType::F32;
  c.d = 16;
  c.lq = {3, 0, 5};
  c.opt.causal = true;
  const Graph g = test::varlen_graph(c);
  kiln_graph cg = nullptr;
  ASSERT_EQ(kiln_graph_load_string(save_graph_string(g).c_str(), nullptr, &cg), KILN_OK)
      << kiln_last_error();
  auto in = test::varlen_inputs(c, 9);
  std::vector<kiln_host_tensor> ins;
  std::vector<std::vector<std::byte>> keep;
  keep.reserve(in.size());  // the host tensors point into it
  for (auto& [name, t] : in) {
    kiln_host_tensor h{};
    keep.push_back(t.data);
    h.name = name.c_str();
    h.data = keep.back().data();
    h.bytes = keep.back().size();
    h.rank = static_cast<int32_t>(t.shape.size());
    for (size_t i = 0; i < t.shape.size(); ++i) h.shape[i] = t.shape[i];
    ins.push_back(h);
  }
  const std::string out_name = g.tensor(g.outputs()[0]).name;
  std::vector<float> y(8 * 4 * 16, NAN);
  kiln_host_tensor out{};
  out.name = out_name.c_str();
  out.data = y.data();
  out.bytes = y.size() * sizeof(float);
  ASSERT_EQ(kiln_run_host(cg, ins.data(), static_cast<int32_t>(ins.size()), &out, 1), KILN_OK)
      << kiln_last_error();
  const std::vector<double> want = test::padded_attention(c, in);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-5) << i;
  const int32_t bad[] = {0, 4, 3, 8};
  for (kiln_host_tensor& h : ins)
    if (std::string(h.name) == "cu_q") h.data = const_cast<int32_t*>(bad);
  EXPECT_EQ(kiln_run_host(cg, ins.data(), static_cast<int32_t>(ins.size()), &out, 1),
            KILN_ERROR_USER);
  EXPECT_TRUE(has(kiln_last_error(), "cu_seqlens_q[2] = 3 is below")) << kiln_last_error();
  kiln_graph_destroy(cg);
}

// ---------------------------------------------------------------- planner and codegen
struct Planned {
  std::shared_ptr<const Graph> g;
  Plan plan;
};
Planned plan_of(const Graph& src) {
  Planned p;
  p.g = apply_engine_passes(std::make_shared<const Graph>(src), true);
  p.plan = plan_fusion(*p.g);
  return p;
}
std::vector<KernelSpec> kernels_of(const Planned& p, int sm, bool arch_specific = false) {
  CodegenOptions co;
  co.sm = sm;
  co.arch_specific = arch_specific;
  return generate_kernels(*p.g, p.plan, co);
}

// Elementwise producers and consumers stay out of the group: the kernel reads and writes memory
// as stored.
TEST(AttentionVarlen, OwnGroup) {
  Graph g("own");
  Tensor q = g.input("q", DType::F16, {"T", 4, 64});
  Tensor k = g.input("k", DType::F16, {"T", 4, 64});
  Tensor v = g.input("v", DType::F16, {"T", 4, 64});
  Tensor cu = g.input("cu", DType::I32, {"Bp1"});
  Tensor o = g.attention_varlen(g.relu(q), k, v, cu, cu);
  g.output(g.gelu(o));
  Planned p = plan_of(g);
  ASSERT_EQ(p.plan.groups.size(), 3u) << plan_to_string(*p.g, p.plan);
  const FusionGroup& a = p.plan.groups[1];
  EXPECT_EQ(a.kind, GroupKind::AttentionVarlen);
  EXPECT_EQ(a.nodes.size(), 1u);
  EXPECT_EQ(a.name, "attention_varlen_f16_attention_varlen");
  EXPECT_TRUE(has(plan_to_string(*p.g, p.plan),
                  "attention_varlen reads and writes memory as "
                  "stored"))
      << plan_to_string(*p.g, p.plan);
}

TEST(AttentionVarlenLayout, Rule) {
  AttentionVarlenProblem p;
  p.head_dim = p.v_head_dim = 128;
  AttentionVarlenLayout l = choose_attention_varlen_layout(p);
  EXPECT_EQ(l.path, AttentionVarlenPath::MmaSync);
  EXPECT_EQ(l.tile.warps, 4);
  EXPECT_EQ(l.tile.query_rows, 64);
  EXPECT_EQ(l.tile.key_rows, 64);
  EXPECT_EQ(l.tile.smem_bytes, 87040);  // the fixed-length kernel's
  p.mean_q_len = 16;
  EXPECT_EQ(choose_attention_varlen_layout(p).tile.warps, 1);
  p.mean_q_len = 17;
  EXPECT_EQ(choose_attention_varlen_layout(p).tile.warps, 2);
  EXPECT_EQ(choose_attention_varlen_layout(p).tile.smem_bytes, (32 + 4 * 64) * 136 * 2);
  p.mean_q_len = 33;
  EXPECT_EQ(choose_attention_varlen_layout(p).tile.warps, 4);
  p.head_dim = p.v_head_dim = 256;
  EXPECT_EQ(choose_attention_varlen_layout(p).tile.key_rows, 32);
  auto refused = [&](AttentionVarlenProblem b, const char* why) {
    AttentionVarlenLayout r = choose_attention_varlen_layout(b);
    EXPECT_EQ(r.path, AttentionVarlenPath::None);
    EXPECT_TRUE(has(r.why, why)) << r.why;
  };
  AttentionVarlenProblem b;
  b.head_dim = b.v_head_dim = 64;
  b.sm = 75;
  refused(b, "sm_80+");
  b.sm = 90;
  b.half = false;
  refused(b, "f16 or bf16");
  b.half = true;
  b.head_dim = b.v_head_dim = 36;
  refused(b, "multiples of 8 up to 256, got 36");
  b.head_dim = 64;
  b.v_head_dim = 32;
  refused(b, "v's head dim (32) equal to q's (64)");
}

TEST(AttentionVarlen, KernelNameArgsAndGrid) {
  VarlenCase c;
  c.hq = 8;
  c.hkv = 2;
  c.opt.causal = true;
  Planned p = plan_of(test::varlen_graph(c));
  std::vector<KernelSpec> ks = kernels_of(p, 90, true);
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].name, "attention_varlen_f16_d64_q64_causal_gqa");
  EXPECT_EQ(ks[0].grid[0].str(), "Bp1+T/64");
  EXPECT_EQ(ks[0].grid[1].str(), "8");
  EXPECT_EQ(ks[0].block[0], 128);
  EXPECT_EQ(ks[0].arch, "");  // mma.sync: the plan's own arch, sm_90 included
  int words = 0;
  for (const KernelArg& a : ks[0].args) words += a.kind == KernelArg::Kind::ErrorWord;
  EXPECT_EQ(words, 1);
  EXPECT_TRUE(has(ks[0].source, "kc_varlen_block<KA::BQ>"));
  EXPECT_TRUE(has(ks[0].source, "const long long h = blockIdx.y, kh = h / 4;"));
  // Static lengths with short sequences: fewer query rows a CTA.
  c.symbolic = false;
  c.lq = {3, 9, 1, 20};
  c.opt = {.scale = 0.0, .causal = false, .window_left = 8, .window_right = 0};
  c.hkv = 8;
  ks = kernels_of(plan_of(test::varlen_graph(c)), 80);
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].name, "attention_varlen_f16_d64_q16_right_window");
  EXPECT_EQ(ks[0].grid[0].str(), "7");  // 33 / 16 + 5
}

TEST(AttentionVarlen, KernelRefusalsAreUserErrors) {
  VarlenCase c;
  c.dt = DType::F32;
  EXPECT_TRUE(has(user_error([&] { kernels_of(plan_of(test::varlen_graph(c)), 90); }),
                  "node 'attention_varlen"));
  c.dt = DType::F16;
  c.dv = 32;
  EXPECT_TRUE(has(user_error([&] { kernels_of(plan_of(test::varlen_graph(c)), 90); }),
                  "v's head dim (32) equal to q's (64)"));
}

// D 64 / 128, causal or not, windows, GQA, both dtypes: sm_80 and sm_90a (what an H200 builds).
TEST(AttentionVarlen, VariantsCompile) {
  int compiled = 0;
  for (int64_t d : {64, 128})
    for (int variant = 0; variant < 4; ++variant) {
      VarlenCase c;
      c.d = d;
      c.dt = variant % 2 ? DType::BF16 : DType::F16;
      c.opt.causal = variant == 1 || variant == 3;
      if (variant >= 2) {
        c.hq = 8;
        c.hkv = 2;
      }
      if (variant == 3) c.opt.window_left = 32;
      if (variant == 2) {  // short static sequences: the 1-warp kernel
        c.symbolic = false;
        c.lq = {2, 5, 9};
      }
      Planned p = plan_of(test::varlen_graph(c));
      for (const char* arch : {"sm_80", "sm_90a"}) {
        const bool hopper = arch[3] == '9';
        for (const KernelSpec& k : kernels_of(p, hopper ? 90 : 80, hopper)) {
          SCOPED_TRACE(fmt::format("{} {}", arch, k.name));
          try {
            EXPECT_FALSE(nvrtc_compile(k.source, k.name, arch).cubin.empty());
            ++compiled;
          } catch (const Error& e) {
            ADD_FAILURE() << e.what();
          }
        }
      }
    }
  EXPECT_EQ(compiled, 16);
}

// The generated source after the embedded device files (UPDATE_GOLDEN=1 rewrites the file).
TEST(AttentionVarlen, GoldenSource) {
  std::string text;
  VarlenCase c;
  c.hq = 8;
  c.hkv = 2;
  c.opt.causal = true;
  VarlenCase w;
  w.dt = DType::BF16;
  w.d = 128;
  w.opt = {.scale = 0.1, .causal = false, .window_left = 16, .window_right = 16};
  for (const VarlenCase& vc : {c, w})
    for (const KernelSpec& k : kernels_of(plan_of(test::varlen_graph(vc)), 90, true)) {
      const size_t at = k.source.find("struct KcScores");
      ASSERT_NE(at, std::string::npos) << k.name;
      text +=
          fmt::format("// ---- {} grid=({}, {}) block={} smem={} args={}\n", k.name,
                      k.grid[0].str(), k.grid[1].str(), k.block[0], k.smem_bytes, k.args.size());
      text += k.source.substr(at);
    }
  test::expect_golden("attention_varlen.cu", text);
}

}  // namespace
}  // namespace kiln
