// A conv's A prologue on the device (codegen/contraction/prologue.cpp): a squeeze-excite channel
// scale and DenseNet's pre-activation batchnorm + relu rewritten in the 1x1 convs' A tiles, on
// the sm_90a wgmma kernel and on the mma.sync one (EngineOptions.arch sm_80), f16 and bf16,
// channel counts with partial k tiles, output sizes with partial M tiles, two batch sizes, against
// the CPU reference of the graph as built, outputs poisoned.
#include <gtest/gtest.h>

#include "kiln/engine.hpp"
#include "kiln/reference.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/prologue_graphs.hpp"

using namespace kiln;
using namespace kiln::gputest;

namespace {

// Compiles `g` for `arch` (empty: the device's own) and checks that the prologue ran in a conv.
CompiledGraph compile_with_prologue(const Graph& g, const std::string& arch, const char* pre) {
  EngineOptions o;
  o.arch = arch;
  Engine engine(o);
  CompiledGraph cg = engine.compile(g);
  int found = 0;
  for (const KernelInfo& k : cg.kernels()) found += k.name.find(pre) != std::string::npos;
  EXPECT_GE(found, 1) << pre;
  return cg;
}

}  // namespace

TEST(ConvPrologueGpu, SqueezeExciteScale) {
  KILN_REQUIRE_DEVICE();
  void* stream = cuda::stream_create();
  uint64_t seed = 9100;
  for (const char* arch : {"", "sm_80"})
    for (DType dt : {DType::F16, DType::BF16})
      for (int64_t c : {32, 136}) {
        std::shared_ptr<Graph> g = test::se_block(c, 72, 9, 7, dt);
        CompiledGraph cg = compile_with_prologue(*g, arch, "_pre_mul");
        for (int64_t n : {1, 5}) {
          SCOPED_TRACE(::testing::Message() << (*arch ? arch : "device") << " " << dtype_name(dt)
                                            << " C=" << c << " N=" << n);
          EXPECT_TRUE(
              matches_reference(cg, *g, {{"x", random_tensor(dt, {n, c, 9, 7}, seed++)}}, stream));
        }
      }
  cuda::stream_destroy(stream);
}

TEST(ConvPrologueGpu, DenseNetPreActivation) {
  KILN_REQUIRE_DEVICE();
  void* stream = cuda::stream_create();
  uint64_t seed = 9300;
  for (const char* arch : {"", "sm_80"})
    for (DType dt : {DType::F16, DType::BF16}) {
      std::shared_ptr<Graph> g = test::dense_layers(24, 16, 11, 6, dt);
      CompiledGraph cg = compile_with_prologue(*g, arch, "_pre_batchnorm_relu");
      for (int64_t n : {1, 3}) {
        SCOPED_TRACE(::testing::Message()
                     << (*arch ? arch : "device") << " " << dtype_name(dt) << " N=" << n);
        EXPECT_TRUE(
            matches_reference(cg, *g, {{"x", random_tensor(dt, {n, 24, 11, 6}, seed++)}}, stream));
      }
    }
  cuda::stream_destroy(stream);
}
