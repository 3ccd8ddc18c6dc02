// Concat elimination and strided views on the device: the graphs of tests/concat_view_graphs.hpp
// (DenseNet blocks chained and as exported, Inception block, UNet skip, ShuffleNet unit, batch
// concat, slices + expand) against the CPU reference, f16 channels-last and f32, at two batch sizes
// (the views' offsets are rebound per run: the batch concat's second input sits N x 64 elements
// in), plainly and replayed from CUDA graphs with the outputs poisoned before every run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

// |got - want| <= rtol x (|want| + rms(want)) everywhere, NaN never passing: the scale the
// contraction tests use, since a conv chain's f16 rounding grows with the values' magnitude, not
// with each element's own (sums that cancel). Reports the first mismatch.
::testing::AssertionResult close_to(const HostTensor& got, const HostTensor& want, double rtol) {
  if (got.shape != want.shape) return ::testing::AssertionFailure() << "shape mismatch";
  std::vector<double> a = got.to_f64(), b = want.to_f64();
  double rms = 0;
  for (double x : b) rms += x * x;
  rms = std::sqrt(rms / std::max<size_t>(1, b.size()));
  int64_t bad = 0;
  std::string first;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isfinite(a[i]) && std::abs(a[i] - b[i]) <= rtol * (std::abs(b[i]) + rms)) continue;
    if (bad++ == 0)
      first = "[" + std::to_string(i) + "] got " + std::to_string(a[i]) + " want " +
              std::to_string(b[i]);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << a.size() << " elements differ (rtol "
                                       << rtol << ", rms " << rms << "); first " << first;
}

// One batch size's inputs, the reference's outputs and the device buffers (kept across runs, so
// that a CUDA graph captured on them is replayed).
struct Case {
  std::map<std::string, DeviceData> in, out;
  std::map<std::string, HostTensor> want;
};

Case make_case(const Graph& g, const CompiledGraph& cg, DType dt, int64_t n) {
  Case c;
  std::map<std::string, HostTensor> in;
  std::map<std::string, std::vector<int64_t>> shapes;
  uint64_t seed = 100 + static_cast<uint64_t>(n);
  for (int id : g.inputs()) {
    const TensorInfo& t = g.tensor(id);
    std::vector<int64_t> shape = eval_shape(t.desc.shape, {{"N", n}});
    in[t.name] = random_tensor(dt, shape, seed++);
    c.in[t.name] = upload(in[t.name], t.desc.layout);
    shapes[t.name] = shape;
  }
  c.want = run_reference(g, in);
  Bindings b = g.bind(shapes);
  for (int id : g.outputs()) {
    const TensorInfo& t = g.tensor(id);
    c.out[t.name] = alloc_poisoned(dt, cg.output_shapes(b).at(t.name), t.desc.layout);
  }
  return c;
}

// Runs `build(dt)` at N = 2 and N = 5 in turn, three rounds (under CUDA graphs: the first
// captures each batch size, the others replay it with the views' offsets of that size), the
// outputs poisoned before every run, and compares every output with the CPU reference.
void check(const Build& build, DType dt, bool cuda_graphs) {
  std::shared_ptr<Graph> g = build(dt);
  EngineOptions o;
  o.cuda_graphs = cuda_graphs;
  Engine engine(o);
  CompiledGraph cg = engine.compile(*g);
  std::map<int64_t, Case> cases;
  for (int64_t n : {2, 5}) cases.emplace(n, make_case(*g, cg, dt, n));
  void* stream = cuda::stream_create();
  for (int rep = 0; rep < 3; ++rep)
    for (auto& [n, c] : cases) {
      SCOPED_TRACE(::testing::Message() << g->name() << " " << dtype_name(dt) << " N=" << n
                                        << (cuda_graphs ? " cuda graph" : "") << " round " << rep);
      for (auto& [name, d] : c.out) poison(d);
      cg.run(tensors_of(c.in), tensors_of(c.out), stream);
      cuda::stream_synchronize(stream);
      for (auto& [name, d] : c.out)
        EXPECT_TRUE(close_to(download(d), c.want.at(name), default_rtol(dt))) << name;
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

TEST(ConcatViewsGpu, ExportedDenseBlock) {
  KILN_REQUIRE_DEVICE();
  check_all([](DType dt) { return test::dense_block_exported(dt); }, {DType::F16, DType::F32});
}

TEST(ConcatViewsGpu, InceptionBlock) {
  KILN_REQUIRE_DEVICE();
  check_all([](DType dt) { return test::inception_block(dt); }, {DType::F16, DType::F32});
  check_all(
      [](DType dt) {
        return test::inception_block(dt, {"N", 32, 8, 8}, true);
      },
      {DType::F16, DType::F32});
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
