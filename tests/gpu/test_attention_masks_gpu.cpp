// The fused attention kernels (mma.sync, and on sm_90 the wgmma one the rule picks) with masks,
// causal skipping, grouped-query K / V, symbolic and differing lengths and head dims 8..256,
// against the CPU reference (f64) on random inputs.
// Rows whose every key is masked: the reference's softmax gives NaN there (plain math over all
// -inf); the kernel gives zeros (docs/graph_format.md, "Attention"), checked separately.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "kiln/engine.hpp"
#include "kiln/reference.hpp"
#include "runtime/cuda_driver.hpp"
#include "tests/attention_masks.hpp"
#include "tests/gpu/gpu_test_util.hpp"

namespace kiln {
namespace {

using test::MaskCase;
using test::MaskKind;
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<int64_t> concrete(const std::vector<Dim>& s, const std::map<std::string, int64_t>& b) {
  std::vector<int64_t> out;
  for (const Dim& d : s) out.push_back(d.is_static() ? d.value() : b.at(d.str()));
  return out;
}

// The reference stores the unfused scores in the graph's dtype before its softmax; in bf16 that
// moves a score of 8 by up to 2^-6, so its probabilities (and the output) are a few bf16 units
// off the kernel's, which keeps the scores in f32: two units of bf16's 8 bits, as the op harness
// allows 16-bit types (tests/gpu/test_ops_gpu.cpp).
double attention_rtol(DType dt) {
  return dt == DType::BF16 ? 2e-2 : gputest::default_rtol(dt);
}

// Mask values: per batch element a kept key length (the first element keeps none when
// `padded_row`), `pad` past it; masks of other shapes random in [-3, 0] with a few `pad`s.
HostTensor mask_values(const MaskCase& c, const std::vector<int64_t>& shape, double pad,
                       bool padded_row, uint64_t seed) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(n);
  const int64_t cols = shape.back();
  uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 7;
  auto rnd = [&] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<double>(s % 100000) / 100000.0;
  };
  const bool bool_mask = c.mask == MaskKind::WhereInput;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = i / cols, col = i % cols;
    bool keep;
    if (shape.size() >= 3 && shape[shape.size() - 2] == 1) {  // key padding [N, 1, 1, Sk]
      const int64_t len = (padded_row && row == 0) ? 0 : cols / 2 + (row * 7919) % (cols / 2 + 1);
      keep = col < len;
    } else {
      keep = rnd() > 0.2 && !(padded_row && row % 5 == 1);  // every fifth row fully masked
    }
    v[i] = bool_mask ? (keep ? 1.0 : 0.0) : (keep ? -3.0 * rnd() : pad);
  }
  return HostTensor::from_f64(bool_mask ? DType::Bool : c.mask_dtype, shape, v);
}

struct GpuCase {
  MaskCase c;
  std::map<std::string, int64_t> bind{{"N", 2}, {"S", 100}, {"Sq", 37}, {"Sk", 150}};
  double pad = -10000.0;
  bool padded_row = false;
  int min_masked_rows = 0;  // rows the reference leaves NaN (all keys masked)
  int split = -1;           // 1: the kernel must split its keys (flash-decoding), 0 must not
  int runs = 1;             // runs of the compiled graph on fresh poisoned outputs, each checked
};

// Fully masked rows (NaN in the reference) must be zeros; the rest match the reference.
void check_output(const MaskCase& c, const GpuCase& gc, const HostTensor& want,
                  const HostTensor& got) {
  std::vector<double> w = want.to_f64(), gv = got.to_f64();
  int masked_rows = 0;
  std::vector<double> w2 = w, g2 = gv;
  for (size_t r0 = 0; r0 < w.size(); r0 += c.d) {
    bool nan_row = false;
    for (int64_t j = 0; j < c.d; ++j) nan_row |= std::isnan(w[r0 + j]);
    if (!nan_row) continue;
    ++masked_rows;
    for (int64_t j = 0; j < c.d; ++j) {
      EXPECT_EQ(gv[r0 + j], 0.0) << "fully masked row " << r0 / c.d;
      w2[r0 + j] = g2[r0 + j] = 0.0;
    }
  }
  EXPECT_GE(masked_rows, gc.min_masked_rows);
  HostTensor gt = HostTensor::from_f64(DType::F32, got.shape, g2);
  HostTensor wt = HostTensor::from_f64(DType::F32, want.shape, w2);
  EXPECT_TRUE(gputest::all_close(gt, wt, attention_rtol(c.dt)));
}

// `wgmma`: 1 when the fused kernel must be the sm_90a wgmma one (its name has "_wg"), 0 when it
// must be the mma.sync one, -1 either.
void run_case(Engine& eng, const GpuCase& gc, uint64_t seed, int wgmma = -1) {
  const MaskCase& c = gc.c;
  SCOPED_TRACE(fmt::format("{} {} d{}", c.name, dtype_name(c.dt), c.d));
  Graph g = test::mask_graph(c);
  CompiledGraph cg = eng.compile(g);
  int fused = 0;
  for (const KernelInfo& k : cg.kernels()) {
    if (k.name.rfind("attention_", 0) != 0) continue;
    ++fused;
    if (wgmma >= 0) {
      EXPECT_EQ(k.name.find("_wg") != std::string::npos, wgmma == 1) << k.name;
    }
    if (gc.split >= 0) {
      EXPECT_EQ(k.name.find("_split") != std::string::npos, gc.split == 1) << k.name;
    }
  }
  EXPECT_EQ(fused, 1) << "the fused kernel";
  std::map<std::string, HostTensor> in;
  in["q"] = gputest::random_tensor(
      c.dt, concrete(test::concat_dims(c.q_batch, {c.sq, Dim(c.d)}), gc.bind), seed, -2.0, 2.0);
  in["k"] = gputest::random_tensor(
      c.dt, concrete(test::concat_dims(c.kv_batch, {c.sk, Dim(c.d)}), gc.bind), seed + 1, -2.0,
      2.0);
  in["v"] = gputest::random_tensor(
      c.dt, concrete(test::concat_dims(c.kv_batch, {c.sk, Dim(c.d)}), gc.bind), seed + 2);
  if (c.mask == MaskKind::AddInput || c.mask == MaskKind::WhereInput)
    in[c.mask == MaskKind::AddInput ? "mask" : "cond"] =
        mask_values(c, concrete(c.mask_shape, gc.bind), gc.pad, gc.padded_row, seed + 3);
  std::map<std::string, gputest::DeviceData> din, dout;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (auto& [n, t] : in) {
    din[n] = gputest::upload(t);
    shapes[n] = t.shape;
  }
  Bindings b = g.bind(shapes);
  // A sequence padded with a finite value (BERT's -10000) at every key is, in exact math, the
  // unmasked row (softmax is shift-invariant), which the kernel computes; the unfused f16 graph
  // instead rounds s + pad to f16 (a spacing of 8 at 10000), which leaves noise. The reference
  // for that sequence therefore gets a zero mask: the kernel must equal the exact result.
  std::map<std::string, HostTensor> ref_in = in;
  if (gc.padded_row && std::isfinite(gc.pad) && in.count("mask") && c.mask_shape.size() >= 3 &&
      c.mask_shape[c.mask_shape.size() - 2] == Dim(1)) {
    const HostTensor& m = in.at("mask");
    std::vector<double> mv = m.to_f64();
    const int64_t cols = m.shape.back();
    for (int64_t j = 0; j < cols; ++j) mv[j] = 0.0;  // batch element 0: every key padded
    ref_in["mask"] = HostTensor::from_f64(m.dtype, m.shape, mv);
  }
  std::map<std::string, HostTensor> ref = run_reference(g, ref_in);
  ASSERT_EQ(ref.size(), 1u);
  const HostTensor& want = ref.begin()->second;
  // Several runs of one compiled graph: the split kernel's counters must be back at zero after
  // each (the last split CTA resets its tile's), with CUDA graphs replaying the capture too.
  for (int run = 0; run < gc.runs; ++run) {
    SCOPED_TRACE(fmt::format("run {}", run));
    for (auto& [n, s] : cg.output_shapes(b))
      dout[n] = gputest::alloc_poisoned(g.tensor(g.find(n)).desc.dtype, s);
    cg.run(gputest::tensors_of(din), gputest::tensors_of(dout));
    check_output(c, gc, want, gputest::download(dout.at(ref.begin()->first)));
  }
}

MaskCase keypad(DType dt, DType mdt, int64_t d = 64) {
  MaskCase c;
  c.name = "keypad";
  c.dt = dt;
  c.d = d;
  c.mask = MaskKind::AddInput;
  c.mask_shape = {Dim("N"), Dim(1), Dim(1), Dim("S")};
  c.mask_dtype = mdt;
  return c;
}

TEST(AttentionMasksGpu, AdditiveMasks) {
  KILN_REQUIRE_DEVICE();
  Engine eng;
  std::vector<GpuCase> cases;
  GpuCase gc;
  gc.c = keypad(DType::F16, DType::F32);  // BERT: (1 - mask) * -10000, one sequence all padding
  gc.padded_row = true;
  cases.push_back(gc);
  gc.c = keypad(DType::BF16, DType::BF16);  // where(mask, 0, -inf): NaN rows in the reference
  gc.pad = -kInf;
  gc.min_masked_rows = 100;
  cases.push_back(gc);
  gc = GpuCase{};
  gc.c = keypad(DType::F16, DType::F16, 128);  // [S, S]: a causal-shaped additive mask
  gc.c.name = "square";
  gc.c.mask_shape = {Dim("S"), Dim("S")};
  gc.pad = -kInf;
  gc.padded_row = true;
  gc.min_masked_rows = 2 * 2 * 20;
  cases.push_back(gc);
  gc = GpuCase{};
  gc.c = keypad(DType::BF16, DType::F32, 80);  // full [N, H, S, S], finfo(f32).min
  gc.c.name = "full";
  gc.c.mask_shape = {Dim("N"), Dim(2), Dim("S"), Dim("S")};
  gc.pad = -3.4028234663852886e38;
  cases.push_back(gc);
  gc = GpuCase{};
  gc.c = keypad(DType::F16, DType::F16);
  gc.c.name = "add_then_scale";
  gc.c.add_first = true;
  cases.push_back(gc);
  uint64_t seed = 100;
  for (const GpuCase& c : cases) run_case(eng, c, seed += 10);
}

TEST(AttentionMasksGpu, CausalAndWhereMasks) {
  KILN_REQUIRE_DEVICE();
  Engine eng;
  struct C {
    MaskKind kind;
    int64_t k;
    double fill;
    int64_t s;
  };
  uint64_t seed = 300;
  for (DType dt : {DType::F16, DType::BF16})
    for (C cc : {C{MaskKind::WhereConst, 0, -kInf, 130}, C{MaskKind::WhereTrilu, -1, -kInf, 200},
                 C{MaskKind::WhereTrilu, 3, -1e9, 64}, C{MaskKind::MaskedFill, 0, -3.4e38, 129},
                 C{MaskKind::AddCausal, 0, 0.0, 77}, C{MaskKind::WhereConst, 0, -1.0, 50}}) {
      GpuCase gc;
      gc.c.name = fmt::format("causal{}_k{}", static_cast<int>(cc.kind), cc.k);
      gc.c.dt = dt;
      gc.c.mask = cc.kind;
      gc.c.causal_k = cc.k;
      gc.c.fill = cc.fill;
      gc.c.sq = gc.c.sk = Dim(cc.s);
      if (cc.k < 0) gc.min_masked_rows = 2 * 2 * static_cast<int>(-cc.k);  // the first rows
      run_case(eng, gc, seed += 10);
    }
  // A general boolean condition, read as a mask, with fully masked rows.
  GpuCase gc;
  gc.c.name = "where_input";
  gc.c.mask = MaskKind::WhereInput;
  gc.c.mask_shape = {Dim("N"), Dim(1), Dim("S"), Dim("S")};
  gc.padded_row = true;
  gc.min_masked_rows = 2 * 2 * 20;
  run_case(eng, gc, 500);
}

TEST(AttentionMasksGpu, GroupedQuerySymbolicLengthsAndHeadDims) {
  KILN_REQUIRE_DEVICE();
  Engine eng;
  GpuCase gc;
  gc.c = keypad(DType::F16, DType::F32);  // GQA: 2 K / V heads for 8 query heads
  gc.c.name = "gqa";
  gc.c.q_batch = {Dim("N"), Dim(2), Dim(4)};
  gc.c.kv_batch = {Dim("N"), Dim(2), Dim(1)};
  gc.c.mask_shape = {Dim("N"), Dim(1), Dim(1), Dim(1), Dim("S")};
  run_case(eng, gc, 600);
  gc.c.kv_batch = {Dim("N"), Dim(1), Dim(1)};  // MQA
  gc.c.name = "mqa";
  run_case(eng, gc, 610);
  gc = GpuCase{};
  gc.c = keypad(DType::BF16, DType::BF16);  // Sq != Sk, both symbolic
  gc.c.name = "sq_ne_sk";
  gc.c.sq = Dim("Sq");
  gc.c.sk = Dim("Sk");
  gc.c.mask_shape = {Dim("N"), Dim(1), Dim(1), Dim("Sk")};
  run_case(eng, gc, 620);
  gc.bind = {{"N", 3}, {"Sq", 200}, {"Sk", 9}};  // new binding, same kernel
  run_case(eng, gc, 630);
  uint64_t seed = 700;
  for (DType dt : {DType::F16, DType::BF16})
    for (int64_t d : {8, 40, 64, 80, 96, 128, 160, 192, 256}) {
      GpuCase hd;
      hd.c.name = "plain";
      hd.c.dt = dt;
      hd.c.d = d;
      hd.bind["S"] = 70 + d % 50;
      run_case(eng, hd, seed += 10);
      hd.c.name = "causal";
      hd.c.mask = MaskKind::WhereTrilu;
      hd.c.sq = hd.c.sk = Dim(150);
      run_case(eng, hd, seed += 10);
    }
}

// The sm_90a wgmma kernel (the rule on an H200: head dims 64 to 256; 96 padded to 128, 192 and
// 256 on 64-key tiles) and the mma.sync kernel forced by the schedule key attention.wgmma=2, on the
// same cases: plain and causal (several key tiles, the stage ring wrapping, lengths not multiples
// of the 128-row tiles), a causal diagonal below zero (fully masked first rows), key padding with a
// sequence all padding, a bool mask, grouped-query K / V and symbolic query and key lengths that
// differ, rebound.
// One test per schedule (the rule's wgmma kernel, its ping-pong consumers, the mma.sync kernel),
// so that each runs in a process of its own.
class WgmmaAndMmaSync : public ::testing::TestWithParam<std::string> {};

TEST_P(WgmmaAndMmaSync, Kernels) {
  KILN_REQUIRE_DEVICE();
  if (cuda::query_device_info().sm != 90) GTEST_SKIP() << "the wgmma kernel needs sm_90a";
  {
    const std::string sched = GetParam();
    const bool wg = sched != "attention.wgmma=2";
    EngineOptions eo;
    eo.schedule = sched;
    Engine eng(eo);
    SCOPED_TRACE(sched.empty() ? "wgmma" : sched);
    uint64_t seed = 2000;
    for (DType dt : {DType::F16, DType::BF16})
      for (int64_t d : {64, 96, 128, 192, 256}) {
        GpuCase gc;
        gc.c.name = "plain";
        gc.c.dt = dt;
        gc.c.d = d;
        gc.bind["S"] = 700;  // 6 key tiles: the 2- and 3-stage rings wrap
        run_case(eng, gc, seed += 10, wg);
        gc.bind["S"] = 1;
        run_case(eng, gc, seed += 10, wg);
        gc.c.name = "causal";
        gc.c.mask = MaskKind::WhereTrilu;
        gc.c.sq = gc.c.sk = Dim(555);
        run_case(eng, gc, seed += 10, wg);
        gc.c.name = "causal_below";
        gc.c.causal_k = -3;
        gc.c.sq = gc.c.sk = Dim(260);
        gc.min_masked_rows = 2 * 2 * 3;
        run_case(eng, gc, seed += 10, wg);
        GpuCase kp;
        kp.c = keypad(dt, DType::F32, d);  // BERT's -10000 padding, one sequence all padding
        kp.padded_row = true;
        kp.bind["S"] = 300;
        run_case(eng, kp, seed += 10, wg);
        kp.c = keypad(dt, dt, d);  // -inf padding: rows of zeros
        kp.pad = -kInf;
        kp.min_masked_rows = 300;
        run_case(eng, kp, seed += 10, wg);
        GpuCase wi;
        wi.c.name = "where_input";
        wi.c.dt = dt;
        wi.c.d = d;
        wi.c.mask = MaskKind::WhereInput;
        wi.c.mask_shape = {Dim("N"), Dim(1), Dim("S"), Dim("S")};
        wi.padded_row = true;
        wi.bind["S"] = 200;
        wi.min_masked_rows = 2 * 2 * 40;
        run_case(eng, wi, seed += 10, wg);
        GpuCase gq;
        gq.c = keypad(dt, DType::F32, d);
        gq.c.name = "gqa";
        gq.c.q_batch = {Dim("N"), Dim(2), Dim(4)};
        gq.c.kv_batch = {Dim("N"), Dim(2), Dim(1)};
        gq.c.mask_shape = {Dim("N"), Dim(1), Dim(1), Dim(1), Dim("S")};
        gq.bind["S"] = 333;
        run_case(eng, gq, seed += 10, wg);
        GpuCase sq;
        sq.c.name = "sq_ne_sk";
        sq.c.dt = dt;
        sq.c.d = d;
        sq.c.sq = Dim("Sq");
        sq.c.sk = Dim("Sk");
        sq.bind = {{"N", 2}, {"Sq", 37}, {"Sk", 450}};
        run_case(eng, sq, seed += 10, wg);
        sq.bind = {{"N", 3}, {"Sq", 300}, {"Sk", 9}};  // rebound: the same kernel
        run_case(eng, sq, seed += 10, wg);
      }
  }
}

INSTANTIATE_TEST_SUITE_P(AttentionMasksGpu, WgmmaAndMmaSync,
                         ::testing::Values(std::string(), std::string("attention.pingpong=1"),
                                           std::string("attention.wgmma=2")),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return i.param.empty()                  ? std::string("rule")
                                  : i.param == "attention.wgmma=2" ? std::string("mma_sync")
                                                                   : std::string("pingpong");
                         });

// Sliding windows on both kernels (the wgmma one where the device takes it): a band constant,
// an `and` of trilus over a symbolic length (key tiles skipped below and above the band), and
// a sum of additive trilus whose causal diagonal below zero masks the first row fully.
TEST(AttentionMasksGpu, SlidingWindows) {
  KILN_REQUIRE_DEVICE();
  const bool hopper = cuda::query_device_info().sm == 90;
  for (int wg : {1, 0}) {
    if (wg && !hopper) continue;
    EngineOptions eo;
    if (!wg) eo.schedule = "attention.wgmma=2";
    Engine eng(eo);
    SCOPED_TRACE(wg ? "wgmma" : "mma.sync");
    uint64_t seed = 4000;
    for (DType dt : {DType::F16, DType::BF16})
      for (int64_t d : {64, 128}) {
        GpuCase gc;
        gc.c.name = "window_const";
        gc.c.dt = dt;
        gc.c.d = d;
        gc.c.mask = MaskKind::WindowConst;
        gc.c.sq = gc.c.sk = Dim(300);
        gc.c.window_k = -100;
        run_case(eng, gc, seed += 10, hopper ? wg : -1);
        gc.c.name = "window_trilu";
        gc.c.mask = MaskKind::WindowTrilu;
        gc.c.sq = gc.c.sk = Dim("S");
        gc.c.window_k = -200;
        gc.bind["S"] = 700;
        run_case(eng, gc, seed += 10, hopper ? wg : -1);
        gc.bind["S"] = 130;  // rebound: the same kernel
        run_case(eng, gc, seed += 10, hopper ? wg : -1);
        gc.c.name = "window_add";
        gc.c.mask = MaskKind::WindowAdd;
        gc.c.sq = gc.c.sk = Dim(555);
        gc.c.causal_k = -1;
        gc.c.window_k = -300;
        gc.min_masked_rows = 2 * 2;  // row 0 sees no key
        run_case(eng, gc, seed += 10, hopper ? wg : -1);
      }
  }
}

// A decode-shaped case: `sq` query rows against `sk` keys, 4 heads (N bound to 2), split keys.
GpuCase decode(DType dt, int64_t d, int64_t sq, int64_t sk) {
  GpuCase gc;
  gc.c.name = fmt::format("decode_q{}_k{}", sq, sk);
  gc.c.dt = dt;
  gc.c.d = d;
  gc.c.q_batch = gc.c.kv_batch = {Dim("N"), Dim(4)};
  gc.c.sq = Dim(sq);
  gc.c.sk = Dim(sk);
  gc.bind = {{"N", 2}};
  gc.split = 1;
  return gc;
}

// Flash-decoding (heuristics/attention_layout.hpp: choose_attention_split): 1, 4 and 16 query
// rows against 1000 to 33000 keys (not multiples of the 64-key block nor of a split), head dims
// 64 and 128, f16 and bf16; each split CTA's partial combined by the last to arrive.
TEST(AttentionMasksGpu, DecodeSplitKeys) {
  KILN_REQUIRE_DEVICE();
  Engine eng;
  uint64_t seed = 3000;
  for (DType dt : {DType::F16, DType::BF16})
    for (int64_t d : {64, 128})
      for (int64_t sq : {1, 4, 16})
        for (int64_t sk : {1000, 4133, 33000}) run_case(eng, decode(dt, d, sq, sk), seed += 10);
  for (int64_t d : {40, 80, 256}) run_case(eng, decode(DType::BF16, d, 4, 5000), seed += 10);
}

// Decode with masks: causal with the query rows at the end of the keys (offset Sk - Sq), a
// small offset (the later splits see no key: they contribute nothing), a negative one (the first
// rows see none: zeros, never NaN, across every split), key padding (-inf: a sequence all
// padding gives zeros; BERT's finite -10000), a full additive mask and a bool mask with fully
// masked rows.
TEST(AttentionMasksGpu, DecodeSplitMasks) {
  KILN_REQUIRE_DEVICE();
  Engine eng;
  uint64_t seed = 4000;
  for (DType dt : {DType::F16, DType::BF16}) {
    struct C {
      MaskKind kind;
      int64_t sq, sk, k;
    };
    for (C cc :
         {C{MaskKind::WhereTrilu, 4, 4133, 4133 - 4}, C{MaskKind::WhereTrilu, 1, 32768, 32767},
          C{MaskKind::WhereTrilu, 16, 5000, 1000}, C{MaskKind::WhereTrilu, 16, 3000, -3},
          C{MaskKind::AddCausal, 16, 2000, 2000 - 16}, C{MaskKind::MaskedFill, 4, 3000, 100}}) {
      GpuCase gc = decode(dt, 128, cc.sq, cc.sk);
      gc.c.name = fmt::format("decode_causal{}_q{}_k{}_off{}", static_cast<int>(cc.kind), cc.sq,
                              cc.sk, cc.k);
      gc.c.mask = cc.kind;
      gc.c.causal_k = cc.k;
      if (cc.k < 0) gc.min_masked_rows = 2 * 4 * static_cast<int>(-cc.k);
      run_case(eng, gc, seed += 10);
    }
    for (int64_t sq : {1, 16}) {
      GpuCase kp = decode(dt, 128, sq, 9000);
      kp.c.name = "decode_keypad_inf";
      kp.c.mask = MaskKind::AddInput;
      kp.c.mask_shape = {Dim("N"), Dim(1), Dim(1), Dim(9000)};
      kp.c.mask_dtype = dt;
      kp.pad = -kInf;
      kp.padded_row = true;  // batch element 0: every key padded, its rows zeros
      kp.min_masked_rows = 4 * static_cast<int>(sq);
      run_case(eng, kp, seed += 10);
      kp.c.name = "decode_keypad_bert";
      kp.c.mask_dtype = DType::F32;
      kp.pad = -10000.0;
      kp.min_masked_rows = 0;
      run_case(eng, kp, seed += 10);
      GpuCase full = decode(dt, 64, sq, 3333);
      full.c.name = "decode_full_mask";
      full.c.mask = MaskKind::AddInput;
      full.c.mask_shape = {Dim("N"), Dim(4), Dim(sq), Dim(3333)};
      full.c.mask_dtype = DType::F32;
      full.pad = -kInf;
      full.padded_row = true;  // every fifth row fully masked
      full.min_masked_rows = sq == 1 ? 1 : 20;
      run_case(eng, full, seed += 10);
      GpuCase wi = decode(dt, 64, sq, 3333);
      wi.c.name = "decode_where_input";
      wi.c.mask = MaskKind::WhereInput;
      wi.c.mask_shape = {Dim("N"), Dim(1), Dim(sq), Dim(3333)};
      wi.padded_row = true;
      wi.min_masked_rows = sq == 1 ? 0 : 4 * 6;
      run_case(eng, wi, seed += 10);
    }
  }
}

// Decode with grouped- and multi-query K / V (broadcast over the query heads), a symbolic key
// length (a KV cache: the split count follows the bound length, the same kernel rebound from
// fewer keys than one split to 33000), and the acceptance shape of flash-decoding: 1 query x
// 32768 keys x 32 heads x D 128, run three times on one compiled graph with and without CUDA
// graphs (the counters reset by the last CTA of each tile).
TEST(AttentionMasksGpu, DecodeSplitGroupedSymbolicAndRepeated) {
  KILN_REQUIRE_DEVICE();
  uint64_t seed = 5000;
  for (bool graphs : {false, true}) {
    EngineOptions eo;
    eo.cuda_graphs = graphs;
    Engine eng(eo);
    SCOPED_TRACE(graphs ? "cuda graphs" : "plain runs");
    for (DType dt : {DType::F16, DType::BF16}) {
      for (int64_t sq : {1, 16}) {
        GpuCase gq = decode(dt, 128, sq, 7777);
        gq.c.name = "decode_gqa";
        gq.c.q_batch = {Dim("N"), Dim(2), Dim(4)};
        gq.c.kv_batch = {Dim("N"), Dim(2), Dim(1)};
        gq.runs = 2;
        run_case(eng, gq, seed += 10);
        gq.c.name = "decode_mqa";
        gq.c.kv_batch = {Dim("N"), Dim(1), Dim(1)};
        gq.c.mask = MaskKind::AddInput;
        gq.c.mask_shape = {Dim("N"), Dim(1), Dim(1), Dim(1), Dim(7777)};
        gq.pad = -kInf;
        gq.padded_row = true;
        gq.min_masked_rows = 8 * static_cast<int>(sq);
        run_case(eng, gq, seed += 10);
      }
      GpuCase sym = decode(dt, 128, 4, 0);
      sym.c.name = "decode_symbolic_sk";
      sym.c.sk = Dim("Sk");
      sym.c.mask = MaskKind::AddInput;
      sym.c.mask_shape = {Dim("N"), Dim(1), Dim(1), Dim("Sk")};
      sym.runs = 2;
      for (int64_t sk : {50, 1000, 9000, 33000}) {
        sym.bind = {{"N", 2}, {"Sk", sk}};
        run_case(eng, sym, seed += 10);
      }
      GpuCase big = decode(dt, 128, 1, 32768);
      big.c.name = "decode_32heads_32k";
      big.c.q_batch = big.c.kv_batch = {Dim(1), Dim(32)};
      big.bind = {};
      big.runs = 3;
      run_case(eng, big, seed += 10);
    }
  }
}

// torch's SDPA is_causal export (scaled q and k^T, a computed causal mask: skipped blocks).
TEST(AttentionMasksGpu, SdpaCausalExport) {
  KILN_REQUIRE_DEVICE();
  Engine eng;
  for (DType dt : {DType::F16, DType::BF16}) {
    Graph g = test::sdpa_causal(dt, 64);
    CompiledGraph cg = eng.compile(g);
    int fused = 0;
    for (const KernelInfo& k : cg.kernels()) fused += k.name.rfind("attention_", 0) == 0;
    EXPECT_EQ(fused, 1);
    for (int64_t s : {5, 150}) {
      SCOPED_TRACE(fmt::format("{} S={}", dtype_name(dt), s));
      std::map<std::string, HostTensor> in;
      for (const char* n : {"q", "k", "v"})
        in[n] = gputest::random_tensor(dt, {2, 2, s, 64}, 950 + s + n[0], -2.0, 2.0);
      std::map<std::string, gputest::DeviceData> din, dout;
      std::map<std::string, std::vector<int64_t>> shapes;
      for (auto& [n, t] : in) {
        din[n] = gputest::upload(t);
        shapes[n] = t.shape;
      }
      for (auto& [n, sh] : cg.output_shapes(g.bind(shapes)))
        dout[n] = gputest::alloc_poisoned(dt, sh);
      cg.run(gputest::tensors_of(din), gputest::tensors_of(dout));
      for (auto& [n, want] : run_reference(g, in))
        EXPECT_TRUE(gputest::all_close(gputest::download(dout.at(n)), want, attention_rtol(dt)));
    }
  }
}

// The imported BERT / GPT-2 form (symbolic S, head splits read in place, a computed mask).
TEST(AttentionMasksGpu, ImportedSymbolicAttention) {
  KILN_REQUIRE_DEVICE();
  Engine eng;
  for (DType dt : {DType::F16, DType::BF16}) {
    Graph g = test::imported_attention(dt, 2, 32);
    CompiledGraph cg = eng.compile(g);
    int fused = 0;
    for (const KernelInfo& k : cg.kernels()) fused += k.name.rfind("attention_", 0) == 0;
    EXPECT_EQ(fused, 1);
    for (int64_t s : {9, 130}) {
      SCOPED_TRACE(fmt::format("{} S={}", dtype_name(dt), s));
      std::map<std::string, HostTensor> in;
      in["x"] = gputest::random_tensor(dt, {2, s, 64}, 900 + s, -2.0, 2.0);
      std::vector<double> keep(2 * s * s);
      for (int64_t i = 0; i < 2 * s * s; ++i) keep[i] = (i % s) < (i / (s * s) == 0 ? s : s / 2);
      in["keep"] = HostTensor::from_f64(DType::Bool, {2, 1, s, s}, keep);
      std::map<std::string, gputest::DeviceData> din, dout;
      std::map<std::string, std::vector<int64_t>> shapes;
      for (auto& [n, t] : in) {
        din[n] = gputest::upload(t);
        shapes[n] = t.shape;
      }
      for (auto& [n, sh] : cg.output_shapes(g.bind(shapes)))
        dout[n] = gputest::alloc_poisoned(dt, sh);
      cg.run(gputest::tensors_of(din), gputest::tensors_of(dout));
      for (auto& [n, want] : run_reference(g, in))
        EXPECT_TRUE(gputest::all_close(gputest::download(dout.at(n)), want, attention_rtol(dt)));
    }
  }
}

}  // namespace
}  // namespace kiln
