// Rolls as gathers on the device: Swin's shifted-window step, its two rolls one gather each
// (engine/passes/rolls.cpp); f16, bf16 and f32, against the CPU reference of the graph as built
// (slices and concats), at two batch sizes, outputs poisoned.
#include <gtest/gtest.h>

#include "kiln/engine.hpp"
#include "kiln/reference.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/roll_graphs.hpp"

using namespace kiln;
using namespace kiln::gputest;

TEST(RollsGpu, SwinShiftedWindowStep) {
  KILN_REQUIRE_DEVICE();
  void* stream = cuda::stream_create();
  uint64_t seed = 4300;
  for (DType dt : {DType::F16, DType::BF16, DType::F32})
    for (int64_t c : {8, 96}) {
      std::shared_ptr<Graph> g = test::swin_shift(c, dt);
      Engine engine;
      CompiledGraph cg = engine.compile(*g);
      for (const KernelInfo& k : cg.kernels()) {
        EXPECT_EQ(k.name.find("concat"), std::string::npos) << k.name;
        EXPECT_EQ(k.name.find("slice"), std::string::npos) << k.name;
      }
      for (int64_t n : {1, 3}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " C=" << c << " N=" << n);
        EXPECT_TRUE(
            matches_reference(cg, *g, {{"x", random_tensor(dt, {n, 14, 14, c}, seed++)}}, stream));
      }
    }
  cuda::stream_destroy(stream);
}
