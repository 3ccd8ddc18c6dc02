// Composed movement chains on the device: MaxViT layers whose window and grid partitions are one
// transpose each and whose departitions write channels-last maps (engine/passes/
// movement_chains.cpp), so that their MBConv convs run channels-last; f16, bf16 and f32, against
// the CPU reference of the graph as built (the chains as exported), at two batch sizes, outputs
// poisoned.
#include <gtest/gtest.h>

#include "kiln/engine.hpp"
#include "kiln/reference.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/maxvit_graphs.hpp"

using namespace kiln;
using namespace kiln::gputest;

TEST(MovementChainsGpu, MaxVitLayers) {
  KILN_REQUIRE_DEVICE();
  void* stream = cuda::stream_create();
  uint64_t seed = 4100;
  for (DType dt : {DType::F16, DType::BF16, DType::F32})
    for (int64_t c : {16, 64}) {
      std::shared_ptr<Graph> g = test::maxvit_layers(c, 2, dt);
      Engine engine;
      CompiledGraph cg = engine.compile(*g);
      int copies = 0;
      for (const KernelInfo& k : cg.kernels()) {
        copies += k.name.rfind("copy_", 0) == 0;
        EXPECT_EQ(k.name.find("nchw"), std::string::npos) << k.name;
      }
      EXPECT_EQ(copies, 8);  // four a layer
      for (int64_t n : {1, 5}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " C=" << c << " N=" << n);
        // bf16: two layers of matmuls over 64 channels whose pooled head cancels to near zero
        // in places (1.6e-1 against 4.8 largest): the tolerance is relative to the largest.
        EXPECT_TRUE(matches_reference(cg, *g, {{"x", random_tensor(dt, {n, c, 14, 14}, seed++)}},
                                      stream, dt == DType::BF16));
      }
    }
  cuda::stream_destroy(stream);
}
