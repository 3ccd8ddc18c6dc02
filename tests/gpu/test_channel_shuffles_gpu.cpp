// Channel shuffles on the device: ShuffleNet units whose shuffles are channels-last gathers
// (engine/passes/channel_shuffles.cpp) and whose convs then run channels-last, f16, bf16 and f32,
// odd channel counts (the halves of 58 are ShuffleNet's), against the CPU reference of the
// graph as built (the shuffle as reshape / transpose / reshape), at two batch sizes, outputs
// poisoned.
#include <gtest/gtest.h>

#include "kiln/engine.hpp"
#include "kiln/reference.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/shuffle_graphs.hpp"

using namespace kiln;
using namespace kiln::gputest;

TEST(ChannelShufflesGpu, ShuffleNetUnits) {
  KILN_REQUIRE_DEVICE();
  void* stream = cuda::stream_create();
  uint64_t seed = 4000;
  for (DType dt : {DType::F16, DType::BF16, DType::F32})
    for (int64_t c : {16, 116}) {
      std::shared_ptr<Graph> g = test::shuffle_units(c, dt);
      Engine engine;
      CompiledGraph cg = engine.compile(*g);
      int gathers = 0;
      for (const KernelInfo& k : cg.kernels()) {
        gathers += k.name.find("gather") != std::string::npos;
        EXPECT_EQ(k.name.find("nchw"), std::string::npos) << k.name;
      }
      EXPECT_EQ(gathers, 4);  // each unit's two halves
      for (int64_t n : {2, 33}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " C=" << c << " N=" << n);
        EXPECT_TRUE(
            matches_reference(cg, *g, {{"x", random_tensor(dt, {n, c, 6, 5}, seed++)}}, stream));
      }
    }
  cuda::stream_destroy(stream);
}
