// GPU correctness of the conv2d / matmul kernels against the CPU reference (f64), on fresh
// random inputs with outputs poisoned (NaN) before each launch. Two levels:
//  - ContractionGpu.Kernel*: emit_contraction's kernel alone (NVRTC, load, launch here), so a
//    codegen bug is found even without the rest of the runtime;
//  - ContractionGpu.Engine*: the same graphs through Engine::compile / CompiledGraph::run.
// Skipped (GTEST_SKIP) when there is no CUDA device.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include <unistd.h>

#include "codegen/contraction_common.hpp"
#include "codegen/emit.hpp"
#include "codegen/nvrtc.hpp"
#include "engine/ir/graph_key.hpp"
#include "heuristics/device_info.hpp"
#include "kiln/engine.hpp"
#include "kiln/error.hpp"
#include "kiln/graph.hpp"
#include "kiln/reference.hpp"
#include "runtime/cuda_driver.hpp"
#include "runtime/tensor_map.hpp"
#include "tests/attention_graph.hpp"

using namespace kiln;

namespace {

#define REQUIRE_GPU()                                                             \
  do {                                                                            \
    std::string why;                                                              \
    if (!cuda::driver_available(&why)) GTEST_SKIP() << "no CUDA device: " << why; \
  } while (0)

HostTensor random_tensor(DType dt, const std::vector<int64_t>& shape, Layout l, uint64_t seed,
                         double scale = 1.0) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<double> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 12345;
  for (auto& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = scale * (static_cast<double>(s % 200001) / 100000.0 - 1.0);
  }
  return HostTensor::from_f64(dt, shape, v, l);
}

double tolerance(DType dt) {
  return dt == DType::F32 ? 1e-5 : 1e-2;
}

// |got - ref| <= tol * (|ref| + rms(ref)); NaN never passes. Returns a message or "".
std::string compare(const HostTensor& got, const HostTensor& ref, double tol) {
  auto a = got.to_f64(), b = ref.to_f64();
  if (a.size() != b.size()) return "size mismatch";
  double rms = 0;
  for (double x : b) rms += x * x;
  rms = std::sqrt(rms / std::max<size_t>(1, b.size())) + 1e-30;
  int bad = 0;
  std::string first;
  for (size_t i = 0; i < a.size(); ++i) {
    bool ok = !std::isnan(a[i]) && std::abs(a[i] - b[i]) <= tol * (std::abs(b[i]) + rms);
    if (!ok && bad++ == 0) first = fmt::format("element {}: got {} expected {}", i, a[i], b[i]);
  }
  if (!bad) return "";
  return fmt::format("{} of {} elements differ (tol {}); first: {}", bad, a.size(), tol, first);
}

// The group a planner would make: anchor + the pointwise nodes after it, outputs = graph outputs.
FusionGroup contraction_group(const Graph& g) {
  FusionGroup grp;
  grp.kind = GroupKind::Contraction;
  std::set<int> produced;
  for (int i = 0; i < static_cast<int>(g.nodes().size()); ++i) {
    const Node& n = g.nodes()[i];
    if (grp.anchor < 0 && (n.op == OpKind::Conv2d || n.op == OpKind::Matmul)) grp.anchor = i;
    if (grp.anchor < 0) continue;
    grp.nodes.push_back(i);
    for (int t : n.inputs)
      if (!produced.count(t)) grp.inputs.push_back(t);
    for (int t : n.outputs) produced.insert(t);
  }
  grp.outputs = g.outputs();
  return grp;
}

size_t nbytes(const HostTensor& t) {
  return t.data.size();
}

// Runs the contraction kernel of `g` (one group) directly; returns the outputs by name. With
// `cfg` the kernel of that config (contraction::emit_with_config), else emit_contraction's choice
// (arch-specific code allowed: wgmma on sm_90).
std::map<std::string, HostTensor> run_kernel(const Graph& g,
                                             const std::map<std::string, HostTensor>& inputs,
                                             std::string* kernel_name,
                                             const ContractionConfig* cfg = nullptr) {
  cuda::retain_primary();
  DeviceInfo dev = cuda::query_device_info();
  CodegenOptions o;
  o.sm = dev.sm;
  o.arch_specific = true;
  EmitContext cx{g, o};
  FusionGroup grp = contraction_group(g);
  KernelSpec k = cfg ? contraction::emit_with_config(contraction::describe(g, grp), *cfg, dev.sm)
                     : emit_contraction(cx, grp);
  *kernel_name = k.name;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (auto& [n, t] : inputs) shapes[n] = t.shape;
  Bindings b = g.bind(shapes);
  NvrtcResult r = nvrtc_compile(k.source, k.name, k.arch.empty() ? dev.arch : k.arch);
  void* mod = cuda::module_load(r.cubin);
  void* fn = cuda::module_function(mod, k.entry);
  if (k.smem_bytes > 0)
    cuda::func_set_max_dynamic_smem(fn, k.smem_bytes);  // static smem counts too

  std::map<int, cuda::DeviceBuffer> bufs;
  std::map<int, HostTensor> outs;
  for (int t : grp.inputs) {
    const TensorInfo& ti = g.tensor(t);
    HostTensor h =
        ti.role == TensorRole::Constant ? ti.data->relayout(ti.desc.layout) : inputs.at(ti.name);
    bufs.emplace(t, cuda::DeviceBuffer(std::max<size_t>(16, nbytes(h))));
    cuda::memcpy_htod(bufs.at(t).ptr(), h.data.data(), nbytes(h));
  }
  for (int t : grp.outputs) {
    const TensorInfo& ti = g.tensor(t);
    HostTensor h = HostTensor::zeros(ti.desc.dtype, eval_shape(ti.desc.shape, b), ti.desc.layout);
    bufs.emplace(t, cuda::DeviceBuffer(std::max<size_t>(16, nbytes(h))));
    cuda::memset_d8(bufs.at(t).ptr(), 0xFF, nbytes(h));  // NaN poison
    outs.emplace(t, std::move(h));
  }
  std::vector<uint64_t> ptrs(k.args.size());
  std::vector<long long> ints(k.args.size());
  std::vector<void*> params(k.args.size());
  std::vector<cuda::DeviceBuffer> scratch;  // split-K workspace and counters (zeroed once)
  std::vector<cuda::TensorMapBytes> maps(k.args.size());  // TMA descriptors, by value
  for (size_t i = 0; i < k.args.size(); ++i) {
    if (k.args[i].kind == KernelArg::Kind::TensorMap) {
      int t = k.args[i].tensor;
      cuda::encode_kernel_tensor_map(&maps[i], k.args[i], g.tensor(t).desc.dtype, bufs.at(t).ptr(),
                                     b);
      params[i] = maps[i].v;
    } else if (k.args[i].kind == KernelArg::Kind::Tensor) {
      ptrs[i] = bufs.at(k.args[i].tensor).ptr();
      params[i] = &ptrs[i];
    } else if (k.args[i].kind == KernelArg::Kind::Scratch ||
               k.args[i].kind == KernelArg::Kind::Counters) {
      int64_t n = k.args[i].value.eval(b);
      if (k.args[i].kind == KernelArg::Kind::Counters) n *= 4;
      scratch.emplace_back(static_cast<size_t>(std::max<int64_t>(n, 16)));
      cuda::memset_d8(scratch.back().ptr(), k.args[i].kind == KernelArg::Kind::Counters ? 0 : 0xFF,
                      scratch.back().bytes());
      ptrs[i] = scratch.back().ptr();
      params[i] = &ptrs[i];
    } else {
      ints[i] = k.args[i].value.eval(b);
      params[i] = &ints[i];
    }
  }
  uint32_t grid[3], block[3];
  for (int i = 0; i < 3; ++i) {
    grid[i] = static_cast<uint32_t>(k.grid[i].eval(b));
    block[i] = static_cast<uint32_t>(k.block[i]);
  }
  cuda::launch(fn, grid, block, k.smem_bytes, nullptr, params.data(), k.name);
  cuda::ctx_synchronize();
  if (!scratch.empty()) {
    // Split-K counters must have reset themselves: a second launch on re-poisoned outputs has to
    // store every tile again.
    for (auto& [t, h] : outs) cuda::memset_d8(bufs.at(t).ptr(), 0xFF, nbytes(h));
    cuda::launch(fn, grid, block, k.smem_bytes, nullptr, params.data(), k.name);
    cuda::ctx_synchronize();
  }
  std::map<std::string, HostTensor> res;
  for (auto& [t, h] : outs) {
    cuda::memcpy_dtoh(h.data.data(), bufs.at(t).ptr(), nbytes(h));
    res.emplace(g.tensor(t).name, h);
  }
  cuda::module_unload(mod);
  return res;
}

void check_kernel(const Graph& g, const std::map<std::string, HostTensor>& in, DType dt,
                  const ContractionConfig* cfg = nullptr) {
  std::string name;
  auto got = run_kernel(g, in, &name, cfg);
  auto ref = run_reference(g, in);
  for (auto& [n, t] : ref) {
    ASSERT_TRUE(got.count(n)) << n;
    std::string msg = compare(got.at(n), t, tolerance(dt));
    EXPECT_EQ(msg, "") << name << " output " << n;
  }
}

struct ConvCase {
  DType dt;
  int64_t n, c, h, w, k, r, s;
  std::array<int64_t, 2> stride;
  std::vector<int64_t> pad;
  std::array<int64_t, 2> dil;
  int64_t groups;
  Layout layout;
  bool bias;
  std::string act;  // "", "relu", "gelu_tanh", "silu", "add_relu"
};

Graph conv_graph(const ConvCase& c) {
  Graph g("conv");
  Tensor x = g.input("x", c.dt, {"N", c.c, c.h, c.w}, c.layout);
  Tensor w = g.constant_random("w", {c.dt, {c.k, c.c / c.groups, c.r, c.s}, c.layout, {}}, "normal",
                               0, 1.0 / std::sqrt(double(c.c / c.groups * c.r * c.s)), 1);
  Tensor b = c.bias ? g.constant_random("b", {c.dt, {c.k}, Layout::NCHW, {}}, "normal", 0, 0.5, 2)
                    : Tensor{};
  Conv2dOptions o;
  o.stride = c.stride;
  o.padding = c.pad;
  o.dilation = c.dil;
  o.groups = c.groups;
  Tensor y = g.conv2d(x, w, b, o);
  if (c.act == "relu") y = g.relu(y);
  if (c.act == "gelu_tanh") y = g.gelu(y, GeluApprox::Tanh);
  if (c.act == "silu") y = g.silu(y);
  if (c.act == "add_relu") {
    Tensor res = g.input("res", g.desc(y));
    y = g.relu(g.add(y, res));
  }
  g.output(y);
  return g;
}

std::map<std::string, HostTensor> conv_inputs(const Graph& g, const ConvCase& c, uint64_t seed) {
  std::map<std::string, HostTensor> in;
  for (int t : g.inputs()) {
    const TensorInfo& ti = g.tensor(t);
    std::vector<int64_t> shape = eval_shape(ti.desc.shape, {{"N", c.n}});
    in.emplace(ti.name, random_tensor(ti.desc.dtype, shape, ti.desc.layout, seed++));
  }
  return in;
}

std::vector<ConvCase> conv_cases() {
  const Layout H = Layout::NHWC, C = Layout::NCHW;
  return {
      {DType::F16, 2, 64, 14, 14, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, H, true, "relu"},
      {DType::BF16, 3, 32, 9, 11, 96, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, H, true, "gelu_tanh"},
      {DType::F16, 2, 256, 7, 7, 64, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, H, false, ""},
      {DType::F16, 1, 3, 32, 32, 64, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, H, true, "relu"},
      {DType::F16, 2, 16, 13, 10, 24, 3, 3, {2, 2}, {0, 1, 1, 0}, {1, 1}, 1, H, true, "add_relu"},
      {DType::BF16, 2, 16, 12, 12, 32, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1, H, true, "silu"},
      {DType::F16, 2, 5, 9, 9, 7, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, H, true, "relu"},
      {DType::F16, 2, 4, 30, 29, 64, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, H, true, "relu"},  // _c4
      {DType::F16, 3, 64, 14, 14, 256, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, H, true, "add_relu"},
      {DType::BF16, 2, 12, 9, 11, 24, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, H, true, "silu"},
      // Through the Engine these three take the channel-padded input (C -> 8, 8, 24).
      {DType::BF16, 2, 3, 30, 29, 32, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, H, false, "relu"},
      {DType::F16, 2, 1, 9, 9, 16, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1, H, true, ""},
      {DType::F16, 2, 20, 12, 12, 40, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, H, true, "silu"},
      {DType::F16, 2, 32, 10, 10, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 4, H, true, "relu"},
      {DType::F16, 2, 32, 10, 10, 32, 3, 3, {2, 2}, {1, 1}, {1, 1}, 32, H, true, "relu"},
      {DType::F16, 2, 16, 10, 10, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, C, true, "relu"},
      {DType::F32, 2, 16, 10, 10, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, H, true, "relu"},
      {DType::F32, 2, 3, 11, 11, 8, 5, 5, {2, 2}, {2, 2}, {1, 1}, 1, C, false, ""},
      // Big enough for many CTAs, partial tiles in M and N.
      {DType::F16, 3, 64, 28, 28, 200, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, H, true, "relu"},
      // Stride 2, odd sizes, C = 64: the spatially tiled TMA kernel's strided boxes and edges.
      {DType::F16, 2, 64, 15, 13, 64, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, H, true, "relu"},
      // C = 64 with asymmetric padding, a 3x5 filter, unequal strides (im2col TMA's bounding
      // box per dim), and dilation 2 (its tap offsets).
      {DType::F16, 2, 64, 11, 9, 64, 3, 5, {1, 2}, {0, 2, 1, 1}, {1, 1}, 1, H, true, "relu"},
      {DType::BF16, 2, 64, 12, 12, 64, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1, H, true, "silu"},
      // 1x1: TMA operands with a k tail (C = 40 < one 64-wide k tile) and partial M / N tiles.
      {DType::F16, 2, 40, 9, 9, 24, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, H, true, "relu"},
      // Row-folded A (C x stride_w = 8; S x C = 32, 32, 64, 16 values per filter row): the stem
      // as the Engine widens it (7x8, left padding 4); C = 8 at stride 1 with row dilation 2 and
      // a partial N tile; 16 chunks of left padding 6 over a 74-pixel output row (the 128-wide
      // tile row); two filter rows of a 4-row slot, row stride 3.
      {DType::F16, 2, 4, 30, 28, 64, 7, 8, {2, 2}, {3, 4, 3, 3}, {1, 1}, 1, H, true, "relu"},
      {DType::BF16, 2, 8, 9, 12, 40, 3, 4, {1, 1}, {1, 0, 1, 1}, {2, 1}, 1, H, true, "silu"},
      {DType::F16, 1, 4, 9, 150, 24, 3, 16, {2, 2}, {1, 6, 1, 6}, {1, 1}, 1, H, true, "add_relu"},
      {DType::F16, 2, 4, 10, 20, 16, 2, 4, {3, 2}, {0, 0, 1, 0}, {1, 1}, 1, H, false, ""},
  };
}

struct MatmulCase {
  DType dt;
  Shape a, b;
  bool ta, tb, bias;
  std::string act;
  Bindings binds;
};

std::vector<MatmulCase> matmul_cases() {
  return {
      {DType::BF16, {"M", 256}, {256, 512}, false, false, true, "gelu_tanh", {{"M", 200}}},
      {DType::F16, {128, "M"}, {128, 64}, true, false, false, "", {{"M", 96}}},
      {DType::F16, {"M", 96}, {80, 96}, false, true, true, "relu", {{"M", 77}}},
      {DType::BF16, {64, "M"}, {40, 64}, true, true, false, "silu", {{"M", 50}}},
      {DType::F16, {"M", 37}, {37, 19}, false, false, true, "", {{"M", 33}}},
      {DType::F16, {"B", "M", 64}, {64, 32}, false, false, false, "relu", {{"B", 3}, {"M", 40}}},
      {DType::BF16, {2, "B", 16, 64}, {1, "B", 48, 64}, false, true, true, "", {{"B", 2}}},
      {DType::F32, {"M", 64}, {64, 32}, false, false, true, "relu", {{"M", 70}}},
      {DType::F16, {"M", 1024}, {1024, 1024}, false, false, true, "gelu_tanh", {{"M", 1000}}},
  };
}

Graph matmul_graph(const MatmulCase& c) {
  Graph g("mm");
  Tensor a = g.input("a", c.dt, c.a);
  Tensor b = g.input("b", c.dt, c.b);
  Dim n = c.tb ? c.b[c.b.size() - 2] : c.b.back();
  Tensor bias = c.bias ? g.constant_random("bias", {c.dt, {n}, Layout::NCHW, {}}, "normal", 0, 1, 3)
                       : Tensor{};
  Tensor y = g.matmul(a, b, bias, c.ta, c.tb);
  if (c.act == "relu") y = g.relu(y);
  if (c.act == "gelu_tanh") y = g.gelu(y, GeluApprox::Tanh);
  if (c.act == "silu") y = g.silu(y);
  g.output(y);
  return g;
}

std::map<std::string, HostTensor> matmul_inputs(const Graph& g, const MatmulCase& c) {
  std::map<std::string, HostTensor> in;
  uint64_t seed = 100;
  for (int t : g.inputs()) {
    const TensorInfo& ti = g.tensor(t);
    in.emplace(ti.name, random_tensor(ti.desc.dtype, eval_shape(ti.desc.shape, c.binds),
                                      ti.desc.layout, seed++, 0.5));
  }
  return in;
}

}  // namespace

TEST(ContractionGpu, KernelConvVariants) {
  REQUIRE_GPU();
  int i = 0;
  for (const auto& c : conv_cases()) {
    SCOPED_TRACE(fmt::format("conv case {}", i++));
    Graph g = conv_graph(c);
    check_kernel(g, conv_inputs(g, c, 7), c.dt);
  }
}

namespace {

// Grouped and depthwise convs (NHWC): the grouped kernel (codegen/contraction/grouped.cpp) on
// every layout variant: channel multipliers, 1 to 64 input channels per group, odd channel
// counts, strides 1 / 2, filters 3x3 to 9x9, padding, dilation 2, partial pixel and channel
// tiles, batch 1 to 3, f32 / f16 / bf16, bias + activation + residual epilogues; the
// tensor-core variant (8 | channels per group, 16-bit) with k8 and k16 steps and 8 to 32
// output channels per CTA; the tiled depthwise kernel (16-bit, 8 | C). The last case has 128
// channels per group: the direct kernel.
std::vector<ConvCase> grouped_conv_cases() {
  const Layout H = Layout::NHWC;
  return {
      {DType::F16, 3, 32, 14, 13, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 32, H, true, "relu"},
      {DType::F16, 1, 24, 15, 15, 24, 3, 3, {2, 2}, {1, 1}, {1, 1}, 24, H, true, "add_relu"},
      {DType::F16, 2, 36, 11, 9, 36, 5, 5, {1, 1}, {2, 2}, {1, 1}, 36, H, true, "silu"},
      {DType::BF16, 2, 16, 17, 19, 16, 7, 7, {1, 1}, {3, 3}, {1, 1}, 16, H, true, ""},
      {DType::F16, 2, 40, 20, 20, 40, 9, 9, {2, 2}, {4, 4}, {1, 1}, 40, H, false, "relu"},
      {DType::F32, 3, 20, 10, 12, 20, 3, 3, {1, 1}, {2, 2}, {2, 2}, 20, H, true, "add_relu"},
      {DType::F16, 2, 16, 9, 10, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 16, H, true, "relu"},
      {DType::F32, 2, 8, 9, 9, 24, 5, 5, {2, 2}, {2, 2}, {1, 1}, 8, H, true, ""},
      {DType::F16, 2, 7, 9, 9, 7, 3, 3, {1, 1}, {1, 1}, {1, 1}, 7, H, true, "relu"},
      {DType::F16, 2, 64, 12, 11, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 16, H, true, "relu"},
      {DType::F16, 3, 128, 10, 10, 128, 3, 3, {2, 2}, {1, 1}, {1, 1}, 32, H, true, "add_relu"},
      {DType::F16, 1, 64, 9, 9, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 8, H, true, "relu"},
      {DType::BF16, 2, 64, 9, 7, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 4, H, true, "silu"},
      {DType::F16, 2, 96, 7, 7, 96, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, H, true, "add_relu"},
      {DType::F16, 2, 128, 8, 8, 128, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, H, true, "relu"},
      {DType::F32, 2, 36, 9, 9, 36, 3, 3, {1, 1}, {1, 1}, {2, 2}, 6, H, true, "add_relu"},
      {DType::F16, 2, 48, 11, 11, 24, 3, 3, {2, 2}, {1, 1}, {1, 1}, 4, H, true, "relu"},
      {DType::F32, 2, 64, 10, 10, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 32, H, true, "relu"},
      {DType::F16, 2, 32, 10, 10, 64, 3, 5, {1, 2}, {0, 2, 1, 1}, {1, 1}, 4, H, true, "relu"},
      {DType::F16, 2, 144, 28, 28, 144, 3, 3, {1, 1}, {1, 1}, {1, 1}, 144, H, true, "relu"},
      // The tiled depthwise kernel over several tiles: dilation 2, a 7x7 with a residual, a
      // stride-2 5x5 on 18 channel vectors, 960 channels on 7x7.
      {DType::F16, 3, 24, 10, 12, 24, 3, 3, {1, 1}, {2, 2}, {2, 2}, 24, H, true, "add_relu"},
      {DType::F16, 2, 96, 30, 29, 96, 7, 7, {1, 1}, {3, 3}, {1, 1}, 96, H, true, "add"},
      {DType::BF16, 2, 144, 27, 28, 144, 5, 5, {2, 2}, {2, 2}, {1, 1}, 144, H, true, "silu"},
      {DType::F16, 3, 960, 7, 7, 960, 3, 3, {1, 1}, {1, 1}, {1, 1}, 960, H, true, "relu"},
      // Tensor cores: 32 / 16 channels per group, stride 2, dilation 2, partial M tiles.
      {DType::BF16, 3, 128, 9, 9, 128, 3, 3, {2, 2}, {1, 1}, {1, 1}, 4, H, true, "add_relu"},
      {DType::F16, 2, 320, 9, 11, 320, 3, 3, {1, 1}, {2, 2}, {2, 2}, 20, H, true, "relu"},
      {DType::F16, 1, 64, 7, 7, 128, 5, 5, {1, 1}, {2, 2}, {1, 1}, 8, H, false, ""},
      {DType::F16, 2, 256, 7, 7, 256, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, H, true, "relu"},
  };
}

}  // namespace

TEST(ContractionGpu, KernelGroupedConv) {
  REQUIRE_GPU();
  const auto cases = grouped_conv_cases();
  for (size_t i = 0; i < cases.size(); ++i) {
    const ConvCase& c = cases[i];
    SCOPED_TRACE(fmt::format("grouped conv case {}", i));
    Graph g = conv_graph(c);
    auto in = conv_inputs(g, c, 31 + i);
    std::string name;
    auto got = run_kernel(g, in, &name, nullptr);
    const bool direct = c.c / c.groups > 64;
    EXPECT_EQ(name.find("_direct") != std::string::npos, direct) << name;
    auto ref = run_reference(g, in);
    for (auto& [n, t] : ref) {
      ASSERT_TRUE(got.count(n)) << n;
      EXPECT_EQ(compare(got.at(n), t, tolerance(c.dt)), "") << name << " output " << n;
    }
  }
}

TEST(ContractionGpu, KernelMatmulVariants) {
  REQUIRE_GPU();
  int i = 0;
  for (const auto& c : matmul_cases()) {
    SCOPED_TRACE(fmt::format("matmul case {}", i++));
    Graph g = matmul_graph(c);
    check_kernel(g, matmul_inputs(g, c), c.dt);
  }
}

TEST(ContractionGpu, KernelBatchSizeChangesWithoutRecompile) {
  REQUIRE_GPU();
  ConvCase c = conv_cases()[0];
  Graph g = conv_graph(c);
  for (int64_t n : {1, 5}) {
    c.n = n;
    check_kernel(g, conv_inputs(g, c, 3 + n), c.dt);
  }
}

// Compiles `g` with `eng`, runs it on `in` and compares every output with the reference.
void run_engine_check(Engine& eng, const Graph& g, const std::map<std::string, HostTensor>& in,
                      DType dt) {
  CompiledGraph cg = eng.compile(g);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (auto& [n, t] : in) shapes[n] = t.shape;
  Bindings b = g.bind(shapes);
  std::vector<cuda::DeviceBuffer> keep;
  std::map<std::string, DeviceTensor> din, dout;
  for (auto& [n, t] : in) {
    HostTensor h = t.relayout(g.tensor(g.find(n)).desc.layout);
    keep.emplace_back(std::max<size_t>(16, h.data.size()));
    cuda::memcpy_htod(keep.back().ptr(), h.data.data(), h.data.size());
    din[n] = {keep.back().ptr(), h.shape};
  }
  auto oshapes = cg.output_shapes(b);
  std::map<std::string, HostTensor> got;
  for (auto& [n, s] : oshapes) {
    const TensorDesc& d = g.tensor(g.find(n)).desc;
    HostTensor h = HostTensor::zeros(d.dtype, s, d.layout);
    keep.emplace_back(std::max<size_t>(16, h.data.size()));
    cuda::memset_d8(keep.back().ptr(), 0xFF, h.data.size());
    dout[n] = {keep.back().ptr(), s};
    got.emplace(n, std::move(h));
  }
  cg.run(din, dout);
  cuda::ctx_synchronize();
  for (auto& [n, h] : got) cuda::memcpy_dtoh(h.data.data(), dout[n].ptr, h.data.size());
  auto ref = run_reference(g, in);
  for (auto& [n, t] : ref) EXPECT_EQ(compare(got.at(n), t, tolerance(dt)), "") << n;
}

TEST(ContractionGpu, EngineConvAndMatmul) {
  REQUIRE_GPU();
  Engine eng;
  auto run_engine = [&](const Graph& g, const std::map<std::string, HostTensor>& in, DType dt) {
    run_engine_check(eng, g, in, dt);
  };
  for (const auto& c : conv_cases()) {
    Graph g = conv_graph(c);
    run_engine(g, conv_inputs(g, c, 21), c.dt);
  }
  for (const auto& c : matmul_cases()) {
    Graph g = matmul_graph(c);
    run_engine(g, matmul_inputs(g, c), c.dt);
  }
}

TEST(ContractionGpu, EngineGroupedConv) {
  REQUIRE_GPU();
  Engine eng;
  for (const auto& c : grouped_conv_cases()) {
    Graph g = conv_graph(c);
    run_engine_check(eng, g, conv_inputs(g, c, 41), c.dt);
  }
}

namespace {

// Every kernel variant a problem can get: the mma.sync fallback and, on sm_90 (wgmma needs
// sm_90a), each wgmma tile. Lets one run tell pass / fail per variant.
// The warp-specialized wgmma tiles (at most two consumer warpgroups), with TMA loads or not.
std::vector<ContractionConfig> ws_configs(bool tma) {
  std::vector<ContractionConfig> out;
  for (auto [bm, bn, st] : std::vector<std::array<int, 3>>{
           {128, 256, 4}, {128, 128, 5}, {128, 64, 4}, {64, 128, 4}, {64, 64, 4}}) {
    ContractionConfig c = wgmma_tile(bm, bn, st);
    c.ws = true;
    c.tma = tma;
    out.push_back(c);
  }
  return out;
}

// The TMA variants a problem takes (none where its operands do not allow TMA). Their own tests:
// the device script runs them apart, under a short timeout (a wrong transaction count hangs).
std::vector<ContractionConfig> tma_configs(const Graph& g, int sm) {
  FusionGroup grp = contraction_group(g);
  // (a batched matmul with one B matrix as the GEMM of its folded rows)
  contraction::Problem p = contraction::fold_matmul_batch(contraction::describe(g, grp));
  if (sm != 90) return {};
  std::vector<ContractionConfig> out;
  if (contraction::tma_rowfold_supported(p)) {  // the row-folded tiles, and nothing else
    for (auto [bm, bn, st] :
         std::vector<std::array<int, 3>>{{128, 64, 4}, {128, 128, 3}, {64, 64, 4}, {64, 256, 3}})
      out.push_back(wgmma_rowfold_tile(bm, bn, st));
    return out;
  }
  if (sm != 90 || !(contraction::tma_supported(p) || contraction::tma_spatial_supported(p)))
    return {};
  out = ws_configs(true);
  if (contraction::tma_im2col_supported(p))  // the im2col form of each tile too
    for (ContractionConfig c : ws_configs(true)) {
      c.im2col = true;
      out.push_back(c);
    }
  return out;
}

std::vector<ContractionConfig> forced_configs(const Graph& g, int sm) {
  FusionGroup grp = contraction_group(g);
  contraction::Problem p = contraction::describe(g, grp);
  std::vector<ContractionConfig> out;
  ContractionProblemInfo info = contraction::problem_info(p, sm, true);
  ContractionConfig m = choose_mma_config(info);
  if (m.kind == ContractionConfig::Kind::Mma) out.push_back(m);
  if (m.kind == ContractionConfig::Kind::Mma && (p.is_conv || p.mm.batch.empty())) {
    ContractionConfig c = m;  // split-K on the mma.sync path
    c.split_k = 3;
    out.push_back(c);
  }
  if (sm != 90 || !contraction::wgmma_supported(p)) return out;
  for (auto [bm, bn, st] : std::vector<std::array<int, 3>>{{128, 256, 4},
                                                           {256, 128, 4},
                                                           {128, 128, 5},
                                                           {128, 64, 4},
                                                           {64, 128, 4},
                                                           {64, 64, 4},
                                                           {64, 256, 3}}) {
    out.push_back(wgmma_tile(bm, bn, st));
  }
  // Warp-specialized (producer warpgroup, mbarriers, cp.async loads).
  for (const ContractionConfig& c : ws_configs(false)) out.push_back(c);
  // Split-K (partials in scratch, last CTA of a tile reduces): wgmma tiles and the mma.sync
  // fallback, including splits with no k tiles when K is small.
  if (p.is_conv || p.mm.batch.empty()) {
    for (auto [bm, bn, st, sk] : std::vector<std::array<int, 4>>{
             {128, 128, 5, 2}, {128, 256, 4, 3}, {64, 128, 4, 5}, {256, 128, 4, 2}}) {
      out.push_back(wgmma_tile(bm, bn, st, sk));
    }
  }
  return out;
}

}  // namespace

TEST(ContractionGpu, KernelForcedVariantsConv) {
  REQUIRE_GPU();
  cuda::retain_primary();
  int sm = cuda::query_device_info().sm;
  int i = 0;
  for (const auto& c : conv_cases()) {
    Graph g = conv_graph(c);
    for (const ContractionConfig& cfg : forced_configs(g, sm)) {
      SCOPED_TRACE(fmt::format("conv case {} config {}", i, cfg.str()));
      check_kernel(g, conv_inputs(g, c, 11), c.dt, &cfg);
    }
    ++i;
  }
}

TEST(ContractionGpu, TmaForcedVariants) {
  REQUIRE_GPU();
  cuda::retain_primary();
  int sm = cuda::query_device_info().sm;
  if (sm != 90) GTEST_SKIP() << "TMA kernels are sm_90a";
  int i = 0, ran = 0;
  for (const auto& c : conv_cases()) {
    Graph g = conv_graph(c);
    for (const ContractionConfig& cfg : tma_configs(g, sm)) {
      SCOPED_TRACE(fmt::format("conv case {} config {}", i, cfg.str()));
      check_kernel(g, conv_inputs(g, c, 11), c.dt, &cfg);
      ++ran;
    }
    ++i;
  }
  i = 0;
  for (const auto& c : matmul_cases()) {
    Graph g = matmul_graph(c);
    for (const ContractionConfig& cfg : tma_configs(g, sm)) {
      SCOPED_TRACE(fmt::format("matmul case {} config {}", i, cfg.str()));
      check_kernel(g, matmul_inputs(g, c), c.dt, &cfg);
      ++ran;
    }
    ++i;
  }
  std::printf("TMA variants checked: %d\n", ran);
  EXPECT_GE(ran, 25);  // 1x1, 3x3 (C = 64), strided, matmuls: five tiles each
}

TEST(ContractionGpu, KernelForcedVariantsMatmul) {
  REQUIRE_GPU();
  cuda::retain_primary();
  int sm = cuda::query_device_info().sm;
  int i = 0;
  for (const auto& c : matmul_cases()) {
    Graph g = matmul_graph(c);
    for (const ContractionConfig& cfg : forced_configs(g, sm)) {
      SCOPED_TRACE(fmt::format("matmul case {} config {}", i, cfg.str()));
      check_kernel(g, matmul_inputs(g, c), c.dt, &cfg);
    }
    ++i;
  }
}

// Autotuning: the first Engine times the candidates of each conv/matmul and writes the tuning
// file; the result still matches the reference; a second Engine reuses the file (measures
// nothing) and builds the same kernels.
TEST(ContractionGpu, AutotuneMeasuresOnceThenReusesTheFile) {
  REQUIRE_GPU();
  std::string dir = ::testing::TempDir() + "kiln_autotune_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  EngineOptions o;
  o.autotune = true;
  o.tuning_file = dir + "/tuning.json";
  ConvCase c{DType::F16, 8,      64,     14, 14,           64,   3,     3,
             {1, 1},     {1, 1}, {1, 1}, 1,  Layout::NHWC, true, "relu"};
  Graph conv = conv_graph(c);
  std::vector<std::string> first_names;
  {
    Engine eng(o);
    run_engine_check(eng, conv, conv_inputs(conv, c, 5), c.dt);
    EngineStats st = eng.stats();
    EXPECT_EQ(st.autotune_measured, 1);
    EXPECT_EQ(st.autotune_reused, 0);
    CompiledGraph cg = eng.compile(conv);
    bool noted = false;
    for (const KernelInfo& k : cg.kernels()) {
      first_names.push_back(k.name);
      if (k.name.rfind("conv_", 0) == 0) {
        EXPECT_EQ(k.tuning.rfind("autotuned: ", 0), 0u) << k.tuning;
        // Every candidate ran and computed what the rules' config computes (else "skipped").
        EXPECT_EQ(k.tuning.find("skipped"), std::string::npos) << k.tuning;
        std::printf("autotune %s: %s\n", k.name.c_str(), k.tuning.c_str());
        noted = true;
      }
    }
    EXPECT_TRUE(noted);
  }
  ASSERT_TRUE(std::filesystem::exists(o.tuning_file));
  Engine again(o);
  run_engine_check(again, conv, conv_inputs(conv, c, 6), c.dt);
  EXPECT_EQ(again.stats().autotune_measured, 0);
  EXPECT_EQ(again.stats().autotune_reused, 1);
  std::vector<std::string> names;
  for (const KernelInfo& k : again.compile(conv).kernels()) names.push_back(k.name);
  EXPECT_EQ(names, first_names);
  std::filesystem::remove_all(dir);
}

// A batchnorm whose parameters are not all constants cannot fold into the weights: it runs as a
// per-channel affine in the conv's epilogue (the constant case folds: examples' bottleneck).
TEST(ContractionGpu, EngineUnfoldableBatchnormRunsInTheEpilogue) {
  REQUIRE_GPU();
  for (DType dt : {DType::F16, DType::BF16}) {
    ConvCase c{dt, 6, 64, 14, 14, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, Layout::NHWC, false, ""};
    Graph g("conv_bn");
    Tensor x = g.input("x", dt, {"N", 64, 14, 14}, Layout::NHWC);
    Tensor w =
        g.constant_random("w", {dt, {64, 64, 3, 3}, Layout::NHWC, {}}, "normal", 0, 1.0 / 24.0, 1);
    Conv2dOptions o;
    o.padding = {1, 1};
    Tensor y = g.conv2d(x, w, Tensor{}, o);
    Tensor scale = g.input("scale", dt, {64});  // a graph input: not foldable
    auto cst = [&](const char* n, double lo, double hi, uint64_t seed) {
      return g.constant_random(n, {dt, {64}, Layout::NCHW, {}}, "uniform", lo, hi, seed);
    };
    g.output(g.relu(g.batchnorm(y, scale, cst("b", -0.5, 0.5, 2), cst("m", -0.5, 0.5, 3),
                                cst("v", 0.5, 1.5, 4))));
    Engine eng;
    run_engine_check(eng, g, conv_inputs(g, c, 9), dt);
    CompiledGraph cg = eng.compile(g);
    ASSERT_EQ(cg.kernels().size(), 1u);
    EXPECT_NE(cg.kernels()[0].name.find("batchnorm_relu"), std::string::npos)
        << cg.kernels()[0].name;
  }
}

// Autotuning may pick any candidate the heuristics list: every one of them, for a conv and a
// matmul of concrete shape (so split-K candidates are listed too), matches the reference.
TEST(ContractionGpu, EveryAutotuneCandidateMatchesTheReference) {
  REQUIRE_GPU();
  cuda::retain_primary();
  int sm = cuda::query_device_info().sm;
  auto each_candidate = [&](const Graph& g, const std::map<std::string, HostTensor>& in, DType dt) {
    contraction::Problem p = contraction::describe(g, contraction_group(g));
    std::vector<ContractionConfig> cands =
        contraction_candidates(contraction::problem_info(p, sm, true), 64);
    EXPECT_GE(cands.size(), sm == 90 ? 6u : 1u);
    for (const ContractionConfig& cfg : cands) {
      SCOPED_TRACE(cfg.str());
      check_kernel(g, in, dt, &cfg);
    }
  };
  ConvCase c{DType::F16, 8,      64,     14, 14,           64,   3,     3,
             {1, 1},     {1, 1}, {1, 1}, 1,  Layout::NHWC, true, "relu"};
  Graph conv = specialize_graph(conv_graph(c), {{"N", 8}});
  each_candidate(conv, conv_inputs(conv, c, 13), c.dt);
  MatmulCase m{DType::BF16, {"M", 2048}, {2048, 256}, false,
               false,       true,        "gelu_tanh", {{"M", 1024}}};
  Graph mm = specialize_graph(matmul_graph(m), m.binds);
  each_candidate(mm, matmul_inputs(mm, m), m.dt);
}

TEST(ContractionGpu, AttentionReadsHeadsInPlace) {
  REQUIRE_GPU();
  Engine eng;
  // f16 / bf16 heads (any multiple of 8): the fused attention kernel; f32: the two matmuls.
  for (DType dt : {DType::F16, DType::BF16, DType::F32}) {
    for (auto [t, heads, hd, out_root, kt_direct] :
         std::vector<std::tuple<int64_t, int64_t, int64_t, bool, bool>>{
             {197, 4, 64, false, true},
             {7, 2, 32, true, false},
             {64, 3, 16, false, false},
             {77, 1, 128, false, true}}) {
      Graph g = test::attention_graph(dt, t, heads, hd, out_root, kt_direct);
      CompiledGraph cg = eng.compile(g);
      bool fused = false;
      for (const KernelInfo& k : cg.kernels()) {
        EXPECT_EQ(k.name.rfind("copy", 0), std::string::npos) << "a copy kernel ran: " << k.name;
        fused |= k.name.rfind("attention_", 0) == 0;
      }
      EXPECT_EQ(fused, dt != DType::F32 && hd % 8 == 0);
      for (int64_t n : {1, 3}) {
        std::map<std::string, HostTensor> in{
            {"x", random_tensor(dt, {n, t, heads * hd}, Layout::NCHW, 40 + n + t)}};
        SCOPED_TRACE(fmt::format("{} T={} heads={} hd={} N={}", dtype_name(dt), t, heads, hd, n));
        run_engine_check(eng, g, in, dt);
      }
    }
  }
}
