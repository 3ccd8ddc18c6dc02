// Swin V2's cosine window attention (tests/swin_v2_attention.hpp) on the device: the folded
// position bias and logit scale, the per-head scale on q's normalization, v read in place from the
// head split, in one fused attention kernel, against the CPU reference (f64) of the graph as
// built, f16 and bf16, the rules' attention kernel and the mma.sync one, two window counts,
// outputs poisoned.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "kiln/engine.hpp"
#include "kiln/reference.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/swin_v2_attention.hpp"

namespace kiln {
namespace {

using namespace gputest;

TEST(SwinV2AttentionGpu, BlockMatchesTheReference) {
  KILN_REQUIRE_DEVICE();
  void* stream = cuda::stream_create();
  uint64_t seed = 9900;
  for (const char* schedule : {"", "attention.wgmma=2"})
    for (DType dt : {DType::F16, DType::BF16}) {
      const Graph g = test::swin_v2_attention(dt, 3, 32, 49);
      EngineOptions o;
      o.schedule = schedule;
      Engine engine(o);
      CompiledGraph cg = engine.compile(g);
      int fused = 0;
      for (const KernelInfo& k : cg.kernels()) fused += k.name.rfind("attention_", 0) == 0;
      EXPECT_EQ(fused, 1);
      for (int64_t n : {1, 6}) {
        SCOPED_TRACE(fmt::format("{} {} N={}", *schedule ? schedule : "rules", dtype_name(dt), n));
        std::map<std::string, HostTensor> in{
            {"x", random_tensor(dt, {n, 49, 96}, seed++, -2.0, 2.0)}};
        const auto want = run_reference(g, in);
        std::map<std::string, DeviceData> din, dout;
        din["x"] = upload(in.at("x"));
        for (auto& [name, w] : want) dout[name] = alloc_poisoned(dt, w.shape);
        cg.run(tensors_of(din), tensors_of(dout), stream);
        cuda::stream_synchronize(stream);
        // bf16: the reference rounds the scores to bf16 before its softmax, the kernel keeps them
        // in f32 (tests/gpu/test_attention_masks_gpu.cpp), and the logit scale (up to 10 here)
        // multiplies that rounding and the normalized q's and k's: three bf16 units, of the
        // output's scale (a softmax-weighted sum that cancels to near zero keeps the error of
        // the values it summed; run 127: one element of 28224, -0.0145 for -0.0464)
        const bool bf16 = dt == DType::BF16;
        const double rtol = bf16 ? 3e-2 : default_rtol(dt);
        for (auto& [name, d] : dout) {
          double atol = rtol;
          if (bf16)
            for (double v : want.at(name).to_f64()) atol = std::max(atol, rtol * std::abs(v));
          EXPECT_TRUE(all_close(download(d), want.at(name), rtol, atol));
        }
      }
    }
  cuda::stream_destroy(stream);
}

}  // namespace
}  // namespace kiln
