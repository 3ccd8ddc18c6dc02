// Concat elimination and strided views on the device: the graphs of tests/concat_view_graphs.hpp
// (DenseNet block, Inception block, UNet skip, ShuffleNet unit, batch concat, slices + expand)
// against the CPU reference, f16 channels-last and f32, at two batch sizes (the views' offsets
// are rebound per run: the batch concat's second input sits N x 64 elements in), plainly and
// replayed from CUDA graphs with the outputs poisoned before every run.
#include <gtest/gtest.h>

#include <functional>

#include "kiln/engine.hpp"
#include "kiln/reference.hpp"
#include "tests/concat_view_graphs.hpp"
#include "tests/gpu/gpu_test_util.hpp"

using namespace kiln;
using namespace kiln::gputest;

namespace {

using Build = std::function<std::shared_ptr<Graph>(DType)>;

void poison(const DeviceData& d) {
  cuda::memset_d8(d.t.ptr, 0xFF, d.buf.bytes());
  cuda::ctx_synchronize();
}

// Runs `build(dt)` for N = 2 and N = 5 (each twice under CUDA graphs: capture, then replay) and
// compares every output with the CPU reference.
void check(const Build& build, DType dt, bool cuda_graphs) {
  std::shared_ptr<Graph> g = build(dt);
  EngineOptions o;
  o.cuda_graphs = cuda_graphs;
  Engine engine(o);
  CompiledGraph cg = engine.compile(*g);
  void* stream = cuda::stream_create();
  for (int rep = 0; rep < (cuda_graphs ? 2 : 1); ++rep)
    for (int64_t n : {2, 5}) {
      SCOPED_TRACE(::testing::Message() << g->name() << " " << dtype_name(dt) << " N=" << n
                                        << (cuda_graphs ? " cuda graph" : "") << " rep " << rep);
      std::map<std::string, HostTensor> in;
      std::map<std::string, DeviceData> din;
      std::map<std::string, std::vector<int64_t>> shapes;
      uint64_t seed = 100 + static_cast<uint64_t>(n);
      for (int id : g->inputs()) {
        const TensorInfo& t = g->tensor(id);
        std::vector<int64_t> shape = eval_shape(t.desc.shape, {{"N", n}});
        in[t.name] = random_tensor(dt, shape, seed++);
        din[t.name] = upload(in[t.name], t.desc.layout);
        shapes[t.name] = shape;
      }
      auto want = run_reference(*g, in);
      Bindings b = g->bind(shapes);
      std::map<std::string, DeviceData> dout;
      for (int id : g->outputs()) {
        const TensorInfo& t = g->tensor(id);
        dout[t.name] = alloc_poisoned(dt, cg.output_shapes(b).at(t.name), t.desc.layout);
        poison(dout[t.name]);
      }
      cg.run(tensors_of(din), tensors_of(dout), stream);
      cuda::stream_synchronize(stream);
      for (auto& [name, d] : dout)
        EXPECT_TRUE(all_close(download(d), want.at(name), default_rtol(dt))) << name;
    }
  cuda::stream_destroy(stream);
}

void check_all(const Build& build, std::initializer_list<DType> dts) {
  for (DType dt : dts)
    for (bool graphs : {false, true}) check(build, dt, graphs);
}

TEST(ConcatViewsGpu, DenseBlock) {
  KILN_REQUIRE_DEVICE();
  check_all([](DType dt) { return test::dense_block(dt); }, {DType::F16, DType::F32});
}

TEST(ConcatViewsGpu, InceptionBlock) {
  KILN_REQUIRE_DEVICE();
  check_all([](DType dt) { return test::inception_block(dt); }, {DType::F16, DType::F32});
}

TEST(ConcatViewsGpu, UnetSkip) {
  KILN_REQUIRE_DEVICE();
  check_all([](DType dt) { return test::unet_skip(dt); }, {DType::F16, DType::F32});
}

TEST(ConcatViewsGpu, ShuffleUnit) {
  KILN_REQUIRE_DEVICE();
  check_all([](DType dt) { return test::shuffle_unit(dt); }, {DType::F16, DType::F32});
}

TEST(ConcatViewsGpu, BatchConcatSymbolicOffset) {
  KILN_REQUIRE_DEVICE();
  check_all([](DType dt) { return test::batch_concat(dt); }, {DType::F32, DType::F16});
}

TEST(ConcatViewsGpu, SlicesSplitsAndExpand) {
  KILN_REQUIRE_DEVICE();
  check_all([](DType dt) { return test::slice_expand(dt); }, {DType::F32, DType::F16});
}

}  // namespace
