// Times kiln's conv2d / matmul kernels (emit_contraction -> NVRTC -> launch) on the GPU.
//
//   bench_contraction conv N C K H W R stride pad [act]     conv + bias + act, f16 NHWC / KRSC
//   bench_contraction matmul M N K [act] [dtype]            matmul + bias + act (default bf16)
//   --mma (anywhere): the mma.sync kernel where the sm_90a wgmma one would be chosen
//   --static (anywhere): batch dim static (a shape-specialized graph): tiles from the concrete M
//   --config=wgBMxBNx64_sS[_ws|_tma|_i2c] (anywhere): that sm_90a wgmma tile (_ws:
//   warp-specialized, _tma: warp-specialized with TMA loads, _i2c: the same with a conv's A by
//   im2col-mode TMA)
//   --autotune (anywhere): every candidate config timed at this shape, the fastest reported
//   --groups=G (anywhere): a grouped conv of G groups (G = C: depthwise), filters [K, C/G, R, R]
//
// act: relu (default for conv), gelu_tanh (default for matmul), none. Prints one JSON line: the
// kernel name, median ms over CUDA-event-timed launches (runtime/kernel_timer), TFLOP/s. Inputs are
// fresh random data.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "codegen/contraction_common.hpp"
#include "codegen/emit.hpp"
#include "codegen/nvrtc.hpp"
#include "kiln/error.hpp"
#include "kiln/graph.hpp"
#include "runtime/cuda_driver.hpp"
#include "runtime/kernel_timer.hpp"

using namespace kiln;

namespace {

int usage() {
  std::fprintf(
      stderr,
      "usage: bench_contraction conv N C K H W R stride pad [relu|none] [--mma] [--static]\n"
      "       bench_contraction matmul M N K [gelu_tanh|relu|none] [bf16|f16] [--mma] "
      "[--static]\n"
      "--mma: the mma.sync kernel instead of the sm_90a wgmma one\n"
      "--static: the batch size (conv N / matmul M) is a static dim, as in a\n"
      "  shape-specialized graph: tiles are chosen from the concrete M\n"
      "--config=wgBMxBNx64_sS[_ws|_tma|_i2c]: force that sm_90a wgmma tile (_ws: warp-\n"
      "  specialized, _tma: warp-specialized with TMA loads, _i2c: a conv's A by im2col TMA)\n"
      "--autotune: time every candidate config (what EngineOptions::autotune measures) at\n"
      "  this shape and report the fastest (the candidates' times go to stderr)\n"
      "--groups=G: a grouped conv of G groups (G = C: depthwise)\n");
  return 2;
}

Tensor act(Graph& g, Tensor y, const std::string& a) {
  if (a == "relu") return g.relu(y);
  if (a == "gelu_tanh") return g.gelu(y, GeluApprox::Tanh);
  if (a == "silu") return g.silu(y);
  if (a == "none") return y;
  throw Error(ErrorKind::User, "unknown activation '" + a + "' (relu, gelu_tanh, silu, none)");
}

}  // namespace

int main(int argc, char** argv) {
  // --mma (anywhere): the sm_80+ mma.sync kernel even where the sm_90a wgmma one applies.
  // --static (anywhere): the batch dim is static (what Engine hot-shape specialization compiles).
  // --config=wgBMxBNx64_sS (anywhere): that wgmma tile instead of the heuristics' choice.
  bool force_mma = false, static_shape = false, autotune = false;
  int64_t groups = 1;
  ContractionConfig forced;
  std::vector<char*> av;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--mma") == 0) {
      force_mma = true;
    } else if (std::strcmp(argv[i], "--static") == 0) {
      static_shape = true;
    } else if (std::strcmp(argv[i], "--autotune") == 0) {
      autotune = true;
    } else if (std::strncmp(argv[i], "--groups=", 9) == 0) {
      groups = std::atoll(argv[i] + 9);
      if (groups < 1) return usage();
    } else if (std::strncmp(argv[i], "--config=", 9) == 0) {
      int bm = 0, bn = 0, bk = 0, st = 0;
      if (std::sscanf(argv[i] + 9, "wg%dx%dx%d_s%d", &bm, &bn, &bk, &st) != 4 || bk != 64)
        return usage();
      forced = wgmma_tile(bm, bn, st);
      forced.im2col = std::strstr(argv[i] + 9, "_i2c") != nullptr;
      forced.tma = forced.im2col || std::strstr(argv[i] + 9, "_tma") != nullptr;
      forced.ws = forced.tma || std::strstr(argv[i] + 9, "_ws") != nullptr;
    } else {
      av.push_back(argv[i]);
    }
  }
  argc = static_cast<int>(av.size());
  argv = av.data();
  try {
    if (argc < 2) return usage();
    std::string mode = argv[1];
    Graph g("bench");
    Bindings b;
    std::string label;
    if (mode == "conv" && argc >= 10) {
      int64_t n = std::atoll(argv[2]), c = std::atoll(argv[3]), k = std::atoll(argv[4]),
              h = std::atoll(argv[5]), w = std::atoll(argv[6]), r = std::atoll(argv[7]),
              st = std::atoll(argv[8]), pad = std::atoll(argv[9]);
      std::string a = argc > 10 ? argv[10] : "relu";
      Tensor x =
          g.input("x", DType::F16, {static_shape ? Dim(n) : Dim("N"), c, h, w}, Layout::NHWC);
      if (c % groups != 0 || k % groups != 0) return usage();
      Tensor wt = g.constant_random("w", {DType::F16, {k, c / groups, r, r}, Layout::NHWC, {}},
                                    "normal", 0, 0.05, 1);
      Tensor bias = g.constant_random("b", {DType::F16, {k}, Layout::NCHW, {}}, "normal", 0, 1, 2);
      Conv2dOptions o;
      o.stride = {st, st};
      o.padding = {pad, pad};
      o.groups = groups;
      g.output(act(g, g.conv2d(x, wt, bias, o), a));
      b["N"] = n;
      label = fmt::format("conv N={} C={} K={} {}x{} {}x{} s{} p{} g{} +bias+{}", n, c, k, h, w, r,
                          r, st, pad, groups, a);
    } else if (mode == "matmul" && argc >= 5) {
      int64_t m = std::atoll(argv[2]), n = std::atoll(argv[3]), k = std::atoll(argv[4]);
      std::string a = argc > 5 ? argv[5] : "gelu_tanh";
      DType dt = DType::BF16;
      if (argc > 6 && !parse_dtype(argv[6], &dt)) return usage();
      Tensor x = g.input("a", dt, {static_shape ? Dim(m) : Dim("M"), k});
      Tensor wt = g.input("b", dt, {k, n});
      Tensor bias = g.constant_random("bias", {dt, {n}, Layout::NCHW, {}}, "normal", 0, 1, 2);
      g.output(act(g, g.matmul(x, wt, bias), a));
      b["M"] = m;
      label = fmt::format("matmul {} {}x{}x{} +bias+{}", dtype_name(dt), m, n, k, a);
    } else {
      return usage();
    }

    std::string why;
    if (!cuda::driver_available(&why)) {
      std::fprintf(stderr, "bench_contraction: no CUDA device: %s\n", why.c_str());
      return 1;
    }
    cuda::retain_primary();
    DeviceInfo dev = cuda::query_device_info();
    CodegenOptions co;
    co.sm = dev.sm;
    co.arch_specific = !force_mma;  // as the Engine does: wgmma kernels (sm_90a) on sm_90
    FusionGroup grp;
    grp.kind = GroupKind::Contraction;
    grp.anchor = 0;
    for (int i = 0; i < static_cast<int>(g.nodes().size()); ++i) grp.nodes.push_back(i);
    for (int t = 0; t < static_cast<int>(g.tensors().size()); ++t)
      if (g.tensor(t).role != TensorRole::Intermediate) grp.inputs.push_back(t);
    grp.outputs = g.outputs();
    EmitContext cx{g, co};
    KernelSpec k =
        forced.kind == ContractionConfig::Kind::Wgmma
            ? contraction::emit_with_config(contraction::describe(g, grp), forced, dev.sm)
            : emit_contraction(cx, grp);
    int tuned_from = 0;
    if (autotune) {
      // The candidates the Engine's autotuning would measure, timed here at the bound shape.
      contraction::Problem prob = contraction::describe(g, grp);
      std::vector<ContractionConfig> cands =
          contraction_candidates(contraction::problem_info(prob, dev.sm, co.arch_specific));
      double best = -1;
      for (const ContractionConfig& c : cands) {
        KernelSpec kc = contraction::emit_with_config(prob, c, dev.sm);
        try {
          NvrtcResult r = nvrtc_compile(kc.source, kc.name, kc.arch.empty() ? dev.arch : kc.arch);
          double ms = cuda::time_kernel_alone(kc, r.cubin, g, b, 30);
          std::fprintf(stderr, "candidate %-56s %.5f ms\n", kc.name.c_str(), ms);
          ++tuned_from;
          if (best < 0 || ms < best) {
            best = ms;
            k = kc;
          }
        } catch (const Error& e) {
          std::fprintf(stderr, "candidate %s skipped: %s\n", kc.name.c_str(), e.what());
        }
      }
    }
    NvrtcResult nr = nvrtc_compile(k.source, k.name, k.arch.empty() ? dev.arch : k.arch);
    // About 1 s of timed launches, at least 20, at most 1000, on fresh random buffers, timed as
    // the anchors are (L2 flushed before each launch, launch latency hidden).
    double est = cuda::time_kernel_alone(k, nr.cubin, g, b, 5);
    int iters = std::clamp(static_cast<int>(1000.0 / std::max(est, 1e-3)), 20, 1000);
    double med = cuda::time_kernel_alone(k, nr.cubin, g, b, iters);
    uint32_t grid[3];
    for (int i = 0; i < 3; ++i) grid[i] = static_cast<uint32_t>(k.grid[i].eval(b));
    double flops = static_cast<double>(k.flops.eval(b));
    std::printf(
        "{\"case\": \"%s\", \"kernel\": \"%s\", \"ms\": %.5f, \"TFLOP/s\": %.2f, \"iters\": %d, "
        "\"grid\": [%u, %u, %u], \"block\": %u, \"smem\": %d, \"tuned_from\": %d, "
        "\"device\": \"%s\"}\n",
        label.c_str(), k.name.c_str(), med, flops / med / 1e9, iters, grid[0], grid[1], grid[2],
        k.block[0], k.smem_bytes, tuned_from, dev.name.c_str());
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_contraction: %s\n", e.what());
    return e.kind() == ErrorKind::User ? 2 : 1;
  }
}
