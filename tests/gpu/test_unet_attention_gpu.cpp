// A UNet attention block (tests/unet_attention.hpp) on the device: q, k and v read at their
// thirds of the QKV conv's channels-last result, O^T written through the channels-last copy the
// projection conv reads, against the CPU reference (f64) on random inputs, f16 and bf16, on the
// rules' attention kernel (wgmma on Hopper) and the mma.sync one (attention.wgmma=2); token
// counts under, at and over a key block, with partial blocks; outputs poisoned.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "kiln/engine.hpp"
#include "kiln/reference.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/unet_attention.hpp"

namespace kiln {
namespace {

using namespace gputest;

// The reference rounds the scores to bf16 before its softmax; the kernel keeps them in f32
// (tests/gpu/test_attention_masks_gpu.cpp): two bf16 units.
double rtol(DType dt) {
  return dt == DType::BF16 ? 2e-2 : default_rtol(dt);
}

TEST(UnetAttentionGpu, BlockMatchesTheReference) {
  KILN_REQUIRE_DEVICE();
  void* stream = cuda::stream_create();
  uint64_t seed = 9700;
  struct Shape {
    int64_t c, heads, h, w;
  };
  for (const char* schedule : {"", "attention.wgmma=2"})
    for (DType dt : {DType::F16, DType::BF16})
      for (Shape s : {Shape{64, 2, 4, 6}, Shape{128, 4, 9, 15}, Shape{128, 4, 32, 32}}) {
        const Graph g = test::unet_attention(dt, s.c, s.heads, s.h, s.w);
        EngineOptions o;
        o.schedule = schedule;
        Engine engine(o);
        CompiledGraph cg = engine.compile(g);
        int fused = 0;
        for (const KernelInfo& k : cg.kernels()) fused += k.name.rfind("attention_", 0) == 0;
        EXPECT_EQ(fused, 1);
        EXPECT_EQ(cg.kernels().size(), 3u) << "QKV conv, attention, projection: no copy";
        for (int64_t n : {1, 3}) {
          SCOPED_TRACE(fmt::format("{} {} C={} heads={} {}x{} N={}", *schedule ? schedule : "rules",
                                   dtype_name(dt), s.c, s.heads, s.h, s.w, n));
          std::map<std::string, HostTensor> in{
              {"x", random_tensor(dt, {n, s.c, s.h, s.w}, seed++, -2.0, 2.0)}};
          const auto want = run_reference(g, in);
          std::map<std::string, DeviceData> din, dout;
          din["x"] = upload(in.at("x"), Layout::NHWC);
          for (int id : g.outputs()) {
            const TensorInfo& t = g.tensor(id);
            dout[t.name] = alloc_poisoned(dt, want.at(t.name).shape, t.desc.layout);
          }
          cg.run(tensors_of(din), tensors_of(dout), stream);
          cuda::stream_synchronize(stream);
          for (auto& [name, d] : dout)
            EXPECT_TRUE(all_close(download(d), want.at(name), rtol(dt))) << name;
        }
      }
  cuda::stream_destroy(stream);
}

}  // namespace
}  // namespace kiln
