// attention_varlen on the GPU against the CPU reference (f64): mixed sequence lengths in one
// launch (1, 17, 64, 300 and an empty one), key lengths that differ from the query lengths
// (causal bottom-right aligned), sliding windows, grouped-query heads, head dims 64 and 128,
// f16 and bf16, the short-sequence layouts (16 and 32 query rows a CTA); a new mix of lengths
// on the same compiled graph; bad offsets as a located user error followed by a good run.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "kiln/engine.hpp"
#include "kiln/error.hpp"
#include "kiln/reference.hpp"
#include "tests/attention_varlen_graphs.hpp"
#include "tests/gpu/gpu_test_util.hpp"

namespace kiln {
namespace {

using test::VarlenCase;

// The kernel rounds P to 16 bits before P V and keeps the scores in f32; the reference is exact.
double varlen_rtol(DType dt) {
  return dt == DType::BF16 ? 2e-2 : gputest::default_rtol(dt);
}

// Runs `cg` (compiled from `c`'s graph) on inputs for the lengths of `c` into poisoned outputs
// and compares with the CPU reference.
void run_and_check(const CompiledGraph& cg, const Graph& g, const VarlenCase& c, uint64_t seed) {
  SCOPED_TRACE(
      fmt::format("{} {} d{} lengths {}", c.name, dtype_name(c.dt), c.d, fmt::join(c.lq, ",")));
  const auto in = test::varlen_inputs(c, seed);
  std::map<std::string, gputest::DeviceData> din, dout;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& [n, t] : in) {
    din[n] = gputest::upload(t);
    shapes[n] = t.shape;
  }
  const Bindings b = g.bind(shapes);
  for (auto& [n, s] : cg.output_shapes(b))
    dout[n] = gputest::alloc_poisoned(g.tensor(g.find(n)).desc.dtype, s);
  cg.run(gputest::tensors_of(din), gputest::tensors_of(dout));
  const auto ref = run_reference(g, in);
  const HostTensor got = gputest::download(dout.at(ref.begin()->first));
  EXPECT_TRUE(gputest::all_close(got, ref.begin()->second, varlen_rtol(c.dt)));
}

void run_case(Engine& eng, const VarlenCase& c, uint64_t seed) {
  const Graph g = test::varlen_graph(c);
  const CompiledGraph cg = eng.compile(g);
  int fused = 0;
  for (const KernelInfo& k : cg.kernels()) fused += k.name.rfind("attention_varlen_", 0) == 0;
  EXPECT_EQ(fused, 1) << c.name;
  run_and_check(cg, g, c, seed);
  if (!c.symbolic) return;
  // Another mix on the same compiled graph: new bindings, no recompile.
  VarlenCase other = c;
  other.lq = {129, 0, 2, 65, 33, 7};
  if (!c.lk.empty()) other.lk = {100, 5, 0, 65, 40, 1};
  run_and_check(cg, g, other, seed + 7);
}

TEST(AttentionVarlenGpu, MixedLengths) {
  KILN_REQUIRE_DEVICE();
  Engine eng;
  uint64_t seed = 1000;
  for (DType dt : {DType::F16, DType::BF16})
    for (int64_t d : {64, 128})
      for (bool causal : {false, true}) {
        VarlenCase c;
        c.name = causal ? "causal" : "plain";
        c.dt = dt;
        c.d = d;
        c.opt.causal = causal;
        run_case(eng, c, seed += 10);
      }
}

TEST(AttentionVarlenGpu, GroupedQueryWindowsAndKeyLengths) {
  KILN_REQUIRE_DEVICE();
  Engine eng;
  std::vector<VarlenCase> cases;
  VarlenCase c;
  c.name = "gqa_causal_keys_differ";  // bottom-right: rows before key 0 are zeros
  c.hq = 8;
  c.hkv = 2;
  c.lk = {40, 5, 64, 310, 3};
  c.opt.causal = true;
  cases.push_back(c);
  c = VarlenCase{};
  c.name = "window_both_sides";
  c.dt = DType::BF16;
  c.d = 128;
  c.opt = {.scale = 0.05, .causal = false, .window_left = 70, .window_right = 10};
  cases.push_back(c);
  c = VarlenCase{};
  c.name = "causal_window_mqa";
  c.hq = 4;
  c.hkv = 1;
  c.d = 96;
  c.opt = {.scale = 0.0, .causal = true, .window_left = 33, .window_right = -1};
  cases.push_back(c);
  c = VarlenCase{};
  c.name = "short_static_q16";  // mean 6 queries: 16 rows a CTA
  c.symbolic = false;
  c.lq = {1, 9, 16, 0, 4};
  cases.push_back(c);
  c.name = "short_static_q32";  // mean 25: 32 rows a CTA
  c.lq = {1, 17, 64, 30, 13};
  c.opt.causal = true;
  cases.push_back(c);
  uint64_t seed = 2000;
  for (const VarlenCase& vc : cases) run_case(eng, vc, seed += 10);
}

// Bad offsets never read out of bounds: the run is a located user error, and the next run with
// good offsets is correct (the error word is zeroed before every run).
TEST(AttentionVarlenGpu, BadOffsetsAreALocatedErrorThenAGoodRun) {
  KILN_REQUIRE_DEVICE();
  Engine eng;
  VarlenCase c;
  c.lq = {5, 70, 1};
  const Graph g = test::varlen_graph(c);
  const CompiledGraph cg = eng.compile(g);
  auto in = test::varlen_inputs(c, 77);
  for (std::vector<int64_t> cu :
       {std::vector<int64_t>{0, 80, 75, 76}, {0, 5, 75, 1000}, {-40, 5, 75, 76}, {3, 5, 75, 76}}) {
    SCOPED_TRACE(fmt::format("{}", fmt::join(cu, ",")));
    std::map<std::string, gputest::DeviceData> din, dout;
    auto bad = in;
    bad["cu_q"] = HostTensor::from_i64(DType::I32, {4}, cu);
    for (const auto& [n, t] : bad) din[n] = gputest::upload(t);
    dout[g.tensor(g.outputs()[0]).name] = gputest::alloc_poisoned(c.dt, {76, c.hq, c.d});
    try {
      cg.run(gputest::tensors_of(din), gputest::tensors_of(dout));
      ADD_FAILURE() << "bad offsets ran without an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::User) << e.what();
      const std::string m = e.what();
      EXPECT_NE(m.find("node 'attention_varlen"), std::string::npos) << m;
      EXPECT_NE(m.find("bad sequence offsets"), std::string::npos) << m;
    }
    run_and_check(cg, g, c, 77);
  }
}

}  // namespace
}  // namespace kiln
