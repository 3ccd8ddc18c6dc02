// Elementwise ops above channels-last relabels on the device: ConvNeXt blocks whose layer scale
// and residual add run in fc2's epilogue, reading the residual through a view of its
// channels-last memory (engine/passes/relabel_epilogues.cpp); f16, bf16 and f32, odd sizes,
// against the CPU reference of the graph as built, at two batch sizes, outputs poisoned.
#include <gtest/gtest.h>

#include "kiln/engine.hpp"
#include "kiln/reference.hpp"
#include "tests/convnext_graphs.hpp"
#include "tests/gpu/gpu_test_util.hpp"

using namespace kiln;
using namespace kiln::gputest;

TEST(RelabelEpiloguesGpu, ConvNextBlocks) {
  KILN_REQUIRE_DEVICE();
  void* stream = cuda::stream_create();
  uint64_t seed = 4200;
  for (DType dt : {DType::F16, DType::BF16, DType::F32})
    for (int64_t c : {16, 96}) {
      std::shared_ptr<Graph> g = test::convnext_blocks(c, dt);
      Engine engine;
      CompiledGraph cg = engine.compile(*g);
      for (const KernelInfo& k : cg.kernels())
        EXPECT_EQ(k.name.rfind("pointwise_", 0), std::string::npos) << k.name;
      for (int64_t n : {1, 7}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " C=" << c << " N=" << n);
        EXPECT_TRUE(
            matches_reference(cg, *g, {{"x", random_tensor(dt, {n, c, 6, 5}, seed++)}}, stream));
      }
    }
  cuda::stream_destroy(stream);
}
