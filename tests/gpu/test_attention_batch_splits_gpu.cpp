// Attention in the batch shape of its mask on the device: Swin's shifted-window attention, its
// scores reshaped around the window mask in the graph as built, as one fused attention over two
// batch dims whose mask (the bias and the window mask summed) broadcasts over N
// (engine/passes/attention_batch_splits.cpp); f16 and bf16, head dims 32 and 64, against the CPU
// reference of the graph as built, at two batch sizes, outputs poisoned.
#include <gtest/gtest.h>

#include "kiln/engine.hpp"
#include "kiln/reference.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/window_attention_graphs.hpp"

using namespace kiln;
using namespace kiln::gputest;

TEST(AttentionBatchSplitsGpu, SwinWindowMask) {
  KILN_REQUIRE_DEVICE();
  void* stream = cuda::stream_create();
  uint64_t seed = 4400;
  for (DType dt : {DType::F16, DType::BF16})
    for (int64_t d : {32, 64}) {
      const int64_t w = 4, h = 3, s = 49;
      std::shared_ptr<Graph> g = test::window_attention(w, h, s, d, dt);
      Engine engine;
      CompiledGraph cg = engine.compile(*g);
      int attention = 0;
      for (const KernelInfo& k : cg.kernels()) attention += k.name.rfind("attention_", 0) == 0;
      EXPECT_EQ(attention, 1);
      EXPECT_EQ(cg.kernels().size(), 2u);  // the attention and the graph's relu
      for (int64_t n : {1, 6}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " D=" << d << " N=" << n);
        std::map<std::string, HostTensor> in;
        for (const char* name : {"q", "k", "v"})
          in[name] = random_tensor(dt, {n, w, h, s, d}, seed++);
        EXPECT_TRUE(matches_reference(cg, *g, in, stream));
      }
    }
  cuda::stream_destroy(stream);
}
