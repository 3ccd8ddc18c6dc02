// Matmul row reshapes on the device (tests/linear_graphs.hpp): GPT-2's MLP with its written-out
// GELU and residual add in the matmul epilogues, ViT's out-projection stored through the
// transpose's strides with S x N rows folded into one GEMM; f16 and f32 against the CPU
// reference at two batch sizes (the folded rows' coordinates change with N), outputs poisoned.
#include <gtest/gtest.h>

#include <functional>

#include "kiln/engine.hpp"
#include "kiln/reference.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/linear_graphs.hpp"

using namespace kiln;
using namespace kiln::gputest;

namespace {

void check(const std::function<std::shared_ptr<Graph>(DType)>& build, DType dt) {
  std::shared_ptr<Graph> g = build(dt);
  Engine engine;
  CompiledGraph cg = engine.compile(*g);
  void* stream = cuda::stream_create();
  uint64_t seed = 900;
  for (int64_t n : {2, 37}) {
    SCOPED_TRACE(::testing::Message() << g->name() << " " << dtype_name(dt) << " N=" << n);
    std::map<std::string, HostTensor> in;
    std::map<std::string, DeviceData> din, dout;
    std::map<std::string, std::vector<int64_t>> shapes;
    for (int id : g->inputs()) {
      const TensorInfo& t = g->tensor(id);
      shapes[t.name] = eval_shape(t.desc.shape, {{"N", n}});
      in[t.name] = random_tensor(dt, shapes[t.name], seed++);
      din[t.name] = upload(in[t.name]);
    }
    auto want = run_reference(*g, in);
    Bindings b = g->bind(shapes);
    for (int id : g->outputs()) {
      const TensorInfo& t = g->tensor(id);
      dout[t.name] = alloc_poisoned(dt, cg.output_shapes(b).at(t.name), t.desc.layout);
    }
    cg.run(tensors_of(din), tensors_of(dout), stream);
    cuda::stream_synchronize(stream);
    for (auto& [name, d] : dout)
      EXPECT_TRUE(all_close(download(d), want.at(name), default_rtol(dt))) << name;
  }
  cuda::stream_destroy(stream);
}

TEST(MatmulReshapesGpu, Gpt2Mlp) {
  KILN_REQUIRE_DEVICE();
  for (DType dt : {DType::F16, DType::F32}) check(test::gpt2_mlp, dt);
}

TEST(MatmulReshapesGpu, VitOutProjection) {
  KILN_REQUIRE_DEVICE();
  for (DType dt : {DType::F16, DType::BF16, DType::F32}) check(test::vit_out_proj, dt);
}

TEST(MatmulReshapesGpu, VitQkvProjection) {
  KILN_REQUIRE_DEVICE();
  for (DType dt : {DType::F16, DType::BF16, DType::F32}) check(test::vit_qkv_proj, dt);
}

}  // namespace
