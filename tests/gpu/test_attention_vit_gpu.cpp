// torchvision ViT's attention (tests/attention_vit.hpp) on the GPU: the head split of the QKV
// projection and the heads merge run inside the fused attention kernel (Q, K and V read at their
// offsets and strides over the projection, O written through the merge's strides), against the
// CPU reference (f64) on random inputs, f16 and bf16, N = 1, 2 and 5, plain runs and CUDA graphs
// (each batch size captured once and replayed).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "kiln/engine.hpp"
#include "kiln/reference.hpp"
#include "tests/attention_vit.hpp"
#include "tests/gpu/gpu_test_util.hpp"

namespace kiln {
namespace {

using namespace gputest;

void poison(const DeviceData& d) {
  cuda::memset_d8(d.t.ptr, 0xFF, d.buf.bytes());
  cuda::ctx_synchronize();
}

// The reference rounds the scores to bf16 before its softmax; the kernel keeps them in f32
// (tests/gpu/test_attention_masks_gpu.cpp): two bf16 units.
double vit_rtol(DType dt) {
  return dt == DType::BF16 ? 2e-2 : default_rtol(dt);
}

void check(DType dt, int64_t tokens, bool cuda_graphs) {
  const Graph g = test::vit_attention(dt, 2, 64, tokens);
  EngineOptions o;
  o.cuda_graphs = cuda_graphs;
  Engine engine(o);
  CompiledGraph cg = engine.compile(g);
  int fused = 0;
  for (const KernelInfo& k : cg.kernels()) fused += k.name.rfind("attention_", 0) == 0;
  EXPECT_EQ(fused, 1) << "the fused kernel";
  EXPECT_EQ(cg.kernels().size(), 3u) << "the projections and the attention: no copy kernel";
  struct Case {
    std::map<std::string, DeviceData> in, out;
    std::map<std::string, HostTensor> want;
  };
  std::map<int64_t, Case> cases;
  for (int64_t n : {1, 2, 5}) {
    Case& c = cases[n];
    std::map<std::string, HostTensor> in{
        {"x", random_tensor(dt, {n, tokens, 128}, 40 + static_cast<uint64_t>(n), -2.0, 2.0)}};
    c.in["x"] = upload(in.at("x"));
    c.want = run_reference(g, in);
    Bindings b = g.bind({{"x", in.at("x").shape}});
    for (auto& [name, s] : cg.output_shapes(b)) c.out[name] = alloc_poisoned(dt, s);
  }
  void* stream = cuda::stream_create();
  for (int rep = 0; rep < 2; ++rep)
    for (auto& [n, c] : cases) {
      SCOPED_TRACE(fmt::format("{} T={} N={}{} round {}", dtype_name(dt), tokens, n,
                               cuda_graphs ? " cuda graph" : "", rep));
      for (auto& [name, d] : c.out) poison(d);
      cg.run(tensors_of(c.in), tensors_of(c.out), stream);
      cuda::stream_synchronize(stream);
      for (auto& [name, d] : c.out)
        EXPECT_TRUE(all_close(download(d), c.want.at(name), vit_rtol(dt))) << name;
    }
  cuda::stream_destroy(stream);
}

TEST(AttentionVitGpu, HeadSplitAndMergeInsideTheKernel) {
  KILN_REQUIRE_DEVICE();
  for (DType dt : {DType::F16, DType::BF16})
    for (int64_t tokens : {5, 77})
      for (bool graphs : {false, true}) check(dt, tokens, graphs);
}

}  // namespace
}  // namespace kiln
